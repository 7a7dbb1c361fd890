package ops

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Test helpers shared by rff_test.go, attention_test.go and elu_test.go
// (prefixed like the helpers in rff.go, to stay clear of other files).

func miscRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

func miscNormals(rng *rand.Rand, n int, scale float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = scale * rng.NormFloat64()
	}
	return s
}

func miscDense(shape tensor.Shape, data []float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(data))
}

// miscCompare fails if |got−want| / max(|got|, |want|, 1) exceeds tol for
// any element: relative for large entries, absolute for small ones (where
// finite differences have only absolute accuracy).
func miscCompare(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", name, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		e := math.Abs(got[i]-want[i]) / max(math.Abs(got[i]), math.Abs(want[i]), 1)
		if !(e <= worst) { // also catches NaN
			worst, at = e, i
		}
	}
	if at >= 0 {
		t.Logf("%s: worst relative error %.2g", name, worst)
	}
	if !(worst <= tol) {
		t.Errorf("%s: relative error %.3g at %d (got %.12g, want %.12g), tolerance %.1g",
			name, worst, at, got[at], want[at], tol)
	}
}

func miscDot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// miscGraph is loss = Sum(op(inputs) ∘ R) built in a real gorgonia graph,
// with gradients w.r.t. the first nWRT inputs, run by a TapeMachine.
type miscGraph struct {
	g      *gorgonia.ExprGraph
	nodes  []*gorgonia.Node
	vals   []*tensor.Dense
	out    *gorgonia.Node
	loss   *gorgonia.Node
	wrt    []*gorgonia.Node
	grads  []*gorgonia.Node
	vm     gorgonia.VM
	rValue []float64
}

func newMiscGraph(t testing.TB, rng *rand.Rand, names []string, vals []*tensor.Dense, nWRT int,
	build func(in []*gorgonia.Node) (*gorgonia.Node, error)) *miscGraph {
	t.Helper()
	m := &miscGraph{g: gorgonia.NewGraph(), vals: vals}
	for i, v := range vals {
		n := gorgonia.NewTensor(m.g, tensor.Float64, v.Dims(), gorgonia.WithShape(v.Shape()...),
			gorgonia.WithValue(v), gorgonia.WithName(names[i]))
		m.nodes = append(m.nodes, n)
	}
	out, err := build(m.nodes)
	if err != nil {
		t.Fatal(err)
	}
	m.out = out
	m.rValue = miscNormals(rng, out.Shape().TotalSize(), 1)
	r := gorgonia.NewTensor(m.g, tensor.Float64, out.Dims(), gorgonia.WithShape(out.Shape()...),
		gorgonia.WithValue(miscDense(out.Shape(), m.rValue)), gorgonia.WithName("R"))
	if m.loss, err = gorgonia.Sum(gorgonia.Must(gorgonia.HadamardProd(out, r))); err != nil {
		t.Fatal(err)
	}
	m.wrt = m.nodes[:nWRT]
	if m.grads, err = gorgonia.Grad(m.loss, m.wrt...); err != nil {
		t.Fatal(err)
	}
	m.vm = gorgonia.NewTapeMachine(m.g, gorgonia.BindDualValues(m.wrt...))
	return m
}

func (m *miscGraph) run(t testing.TB) float64 {
	t.Helper()
	m.vm.Reset()
	if err := m.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return m.loss.Value().Data().(float64)
}

func miscValueData(t testing.TB, v gorgonia.Value) []float64 {
	t.Helper()
	data, _, err := floatsOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return append([]float64(nil), data...)
}

// gradsAndOutput runs the machine once and returns copies of the output and
// of the gradients of the wrt inputs (zeroed first: they accumulate).
func (m *miscGraph) gradsAndOutput(t testing.TB) (out []float64, grads [][]float64) {
	t.Helper()
	for _, n := range m.wrt {
		if g, err := n.Grad(); err == nil {
			if d, ok := g.(*tensor.Dense); ok {
				clear(d.Float64s())
			}
		}
	}
	m.run(t)
	out = miscValueData(t, m.out.Value())
	for _, n := range m.wrt {
		g, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, miscValueData(t, g))
	}
	return out, grads
}

// checkFD compares the machine's gradients with finite differences of the
// loss computed by re-running the same machine.
func (m *miscGraph) checkFD(t *testing.T, tol float64) {
	t.Helper()
	_, grads := m.gradsAndOutput(t)
	for i := range m.wrt {
		fd := fdGrad(m.vals[i].Float64s(), func() float64 { return m.run(t) })
		miscCompare(t, "graph grad of "+m.wrt[i].Name(), grads[i], fd, tol)
	}
}

// miscGraphBitIdentical checks that the graphs mk builds give bit-identical
// outputs and gradients on one core and on two.
func miscGraphBitIdentical(t *testing.T, mk func() *miscGraph) {
	t.Helper()
	miscBitIdentical(t, func() [][]float64 {
		m := mk()
		defer m.vm.Close()
		out, grads := m.gradsAndOutput(t)
		return append([][]float64{out}, grads...)
	})
}

// miscBitIdentical runs f under GOMAXPROCS 1 and 2 and requires identical
// bits in everything it returns.
func miscBitIdentical(t *testing.T, f func() [][]float64) {
	t.Helper()
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	one := f()
	runtime.GOMAXPROCS(2)
	two := f()
	for i := range one {
		if len(one[i]) != len(two[i]) {
			t.Fatalf("result %d: lengths %d and %d", i, len(one[i]), len(two[i]))
		}
		for j := range one[i] {
			if math.Float64bits(one[i][j]) != math.Float64bits(two[i][j]) {
				t.Fatalf("result %d differs at %d: %v (1 proc) vs %v (2 procs)", i, j, one[i][j], two[i][j])
			}
		}
	}
}

func rffRandom(rng *rand.Rand, d rffDims) (x, omega, b []float64) {
	x = miscNormals(rng, d.T*d.n*d.f, 1)
	omega = miscNormals(rng, d.T*d.D*d.f, 1/math.Sqrt(float64(d.f)))
	b = make([]float64, d.T*d.D)
	for i := range b {
		b[i] = 2 * math.Pi * rng.Float64()
	}
	return
}

func TestRFFForwardMatchesDirect(t *testing.T) {
	for _, d := range []rffDims{{1, 1, 1, 1}, {2, 3, 4, 5}, {3, 17, 9, 33}} {
		x, omega, b := rffRandom(miscRNG(1), d)
		z := make([]float64, d.T*d.n*d.D)
		sinv := make([]float64, len(z))
		rffForward(nil, z, sinv, x, omega, b, d)
		zNoSin := make([]float64, len(z))
		rffForward(nil, zNoSin, nil, x, omega, b, d)
		want := make([]float64, len(z))
		wantSin := make([]float64, len(z))
		for t := range d.T {
			for i := range d.n {
				for j := range d.D {
					a := b[t*d.D+j] + miscDot(x[(t*d.n+i)*d.f:(t*d.n+i+1)*d.f], omega[(t*d.D+j)*d.f:(t*d.D+j+1)*d.f])
					want[(t*d.n+i)*d.D+j] = math.Sqrt(2/float64(d.D)) * math.Cos(a)
					wantSin[(t*d.n+i)*d.D+j] = math.Sin(a)
				}
			}
		}
		miscCompare(t, "z", z, want, 1e-12)
		miscCompare(t, "z without sin cache", zNoSin, want, 1e-12)
		miscCompare(t, "sin", sinv, wantSin, 1e-12)
	}
}

func TestRFFKernelGradFD(t *testing.T) {
	for _, d := range []rffDims{{1, 1, 1, 1}, {2, 3, 4, 5}, {3, 6, 5, 11}} {
		rng := miscRNG(2)
		x, omega, b := rffRandom(rng, d)
		r := miscNormals(rng, d.T*d.n*d.D, 1)
		z := make([]float64, len(r))
		sinv := make([]float64, len(r))
		loss := func() float64 {
			rffForward(nil, z, nil, x, omega, b, d)
			return miscDot(z, r)
		}
		rffForward(nil, z, sinv, x, omega, b, d)
		dx := make([]float64, len(x))
		dw := make([]float64, len(omega))
		scratch := make([]float64, len(r))
		rffBackward(nil, dx, dw, x, omega, sinv, r, scratch, d)
		miscCompare(t, "dx", dx, fdGrad(x, loss), 1e-7)
		miscCompare(t, "domega", dw, fdGrad(omega, loss), 1e-7)

		// Each gradient alone must equal the joint computation.
		dx1 := make([]float64, len(x))
		rffBackward(nil, dx1, nil, x, omega, sinv, r, scratch, d)
		dw1 := make([]float64, len(omega))
		rffBackward(nil, nil, dw1, x, omega, sinv, r, scratch, d)
		miscCompare(t, "dx alone", dx1, dx, 0)
		miscCompare(t, "domega alone", dw1, dw, 0)
	}
}

func rffGraph(t testing.TB, seed uint64, d rffDims) *miscGraph {
	rng := miscRNG(seed)
	x, omega, b := rffRandom(rng, d)
	vals := []*tensor.Dense{
		miscDense(tensor.Shape{d.T, d.n, d.f}, x),
		miscDense(tensor.Shape{d.T, d.D, d.f}, omega),
		miscDense(tensor.Shape{d.T, d.D}, b),
	}
	return newMiscGraph(t, rng, []string{"x", "omega", "b"}, vals, 2, func(in []*gorgonia.Node) (*gorgonia.Node, error) {
		return RFFFeatures(nil, in[0], in[1], in[2])
	})
}

func TestRFFGraphGradFD(t *testing.T) {
	m := rffGraph(t, 3, rffDims{T: 3, n: 4, f: 5, D: 7})
	defer m.vm.Close()
	if s := m.out.Shape(); !s.Eq(tensor.Shape{3, 4, 7}) {
		t.Fatalf("output shape %v", s)
	}
	m.checkFD(t, 1e-7)
	// A second check exercises the preallocated-output path and a forward
	// cache refilled by later runs.
	m.vals[0].Float64s()[0] += 0.3
	m.checkFD(t, 1e-7)
}

func TestRFFDeterministicAcrossProcs(t *testing.T) {
	// Large enough that gonum's GEMM goes parallel internally too.
	d := rffDims{T: 5, n: 70, f: 64, D: 300}
	miscGraphBitIdentical(t, func() *miscGraph { return rffGraph(t, 4, d) })
}

func TestRFFShapeErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	ten := func(dt tensor.Dtype, shape ...int) *gorgonia.Node {
		return gorgonia.NewTensor(g, dt, len(shape), gorgonia.WithShape(shape...))
	}
	x := ten(tensor.Float64, 2, 3, 4)
	omega := ten(tensor.Float64, 2, 5, 4)
	b := ten(tensor.Float64, 2, 5)
	if _, err := RFFFeatures(nil, x, omega, b); err != nil {
		t.Fatalf("valid shapes rejected: %v", err)
	}
	for _, tc := range []struct {
		name        string
		x, omega, b *gorgonia.Node
		want        string
	}{
		{"nil x", nil, omega, b, "x is nil"},
		{"x 2-d", ten(tensor.Float64, 3, 4), omega, b, "x must be 3-d"},
		{"b 3-d", x, omega, ten(tensor.Float64, 2, 5, 1), "b must be 2-d"},
		{"float32", ten(tensor.Float32, 2, 3, 4), omega, b, "float64"},
		{"scalar b", x, omega, gorgonia.NewScalar(g, tensor.Float64), "scalar"},
		{"T mismatch", ten(tensor.Float64, 3, 3, 4), omega, b, "want x (T,n,f)"},
		{"f mismatch", ten(tensor.Float64, 2, 3, 6), omega, b, "want x (T,n,f)"},
		{"D mismatch", x, omega, ten(tensor.Float64, 2, 6), "want x (T,n,f)"},
		{"b T mismatch", x, omega, ten(tensor.Float64, 1, 5), "want x (T,n,f)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RFFFeatures(nil, tc.x, tc.omega, tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRFFOpRejectsBadValues(t *testing.T) {
	op := &rffOp{st: &rffState{}}
	x := miscDense(tensor.Shape{1, 2, 3}, make([]float64, 6))
	omega := miscDense(tensor.Shape{1, 4, 2}, make([]float64, 8)) // f mismatch
	b := miscDense(tensor.Shape{1, 4}, make([]float64, 4))
	if _, err := op.Do(x, omega, b); err == nil {
		t.Fatal("mismatched values accepted")
	}
	f32 := tensor.New(tensor.WithShape(1, 2, 3), tensor.WithBacking(make([]float32, 6)))
	if _, err := op.Do(f32, omega, b); err == nil {
		t.Fatal("float32 value accepted")
	}
	// An unusable preallocated value is an error (the machine then falls
	// back to Do), never a silent write into the wrong buffer.
	omega = miscDense(tensor.Shape{1, 4, 3}, make([]float64, 12))
	if _, err := op.UsePreallocDo(miscDense(tensor.Shape{1, 2, 5}, make([]float64, 10)), x, omega, b); err == nil {
		t.Fatal("wrongly shaped prealloc accepted")
	}
}

func rffBenchOps(b *testing.B, d rffDims) {
	x, omega, ph := rffRandom(miscRNG(5), d)
	xv := miscDense(tensor.Shape{d.T, d.n, d.f}, x)
	ov := miscDense(tensor.Shape{d.T, d.D, d.f}, omega)
	bv := miscDense(tensor.Shape{d.T, d.D}, ph)
	gv := miscDense(tensor.Shape{d.T, d.n, d.D}, miscNormals(miscRNG(6), d.T*d.n*d.D, 1))
	st := &rffState{}
	fwd := &rffOp{st: st}
	gx := &rffGradOp{wrtInput: wrtInput{arity: 5, wrt: 0}, st: st}
	gw := &rffGradOp{wrtInput: wrtInput{arity: 5, wrt: 1}, st: st}
	z, err := fwd.Do(xv, ov, bv)
	if err != nil {
		b.Fatal(err)
	}
	dx, _ := gx.Do(xv, ov, bv, z, gv)
	dw, _ := gw.Do(xv, ov, bv, z, gv)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := fwd.UsePreallocDo(z, xv, ov, bv); err != nil {
			b.Fatal(err)
		}
		if _, err := gx.UsePreallocDo(dx, xv, ov, bv, z, gv); err != nil {
			b.Fatal(err)
		}
		if _, err := gw.UsePreallocDo(dw, xv, ov, bv, z, gv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRFFFeatures times forward plus both backward ops, as the tape
// machine runs them (preallocated outputs), at the sine-regression and
// classification sizes.
func BenchmarkRFFFeatures(b *testing.B) {
	for _, bc := range []struct {
		name string
		d    rffDims
	}{
		{"T25_n15_f40_D128", rffDims{T: 25, n: 15, f: 40, D: 128}},
		{"T6_n80_f256_D780", rffDims{T: 6, n: 80, f: 256, D: 780}},
	} {
		b.Run(bc.name, func(b *testing.B) { rffBenchOps(b, bc.d) })
	}
}
