package ops

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

const (
	krrFDStep = 1e-6
	// krrFDTol bounds |analytic − FD| / max(|analytic|, |FD|, krrFDFloor).
	// The floor keeps entries that are zero up to roundoff (~1e-10 from
	// ε·|loss|/h) from failing on noise.
	krrFDTol   = 1e-6
	krrFDFloor = 1e-3
)

func krrRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

func krrRandn(rng *rand.Rand, size int) []float64 {
	v := make([]float64, size)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// krrRandPSD returns T random n×n kernels Φ Φᵀ/d with Φ n×d; d<n makes them
// singular so that λ matters, as with few random features.
func krrRandPSD(rng *rand.Rand, T, n, d int) []float64 {
	k := make([]float64, T*n*n)
	for t := range T {
		phi := krrRandn(rng, n*d)
		for i := range n {
			for j := range n {
				s := 0.0
				for l := range d {
					s += phi[i*d+l] * phi[j*d+l]
				}
				k[t*n*n+i*n+j] = s / float64(d)
			}
		}
	}
	return k
}

func krrRelErr(an, fd float64) float64 {
	return math.Abs(an-fd) / max(math.Abs(an), math.Abs(fd), krrFDFloor)
}

// krrLoss evaluates Σ R∘X for X = (K+λI)⁻¹Y with the raw kernels.
func krrLoss(t *testing.T, k, y, r []float64, lambda float64, T, n, o int) float64 {
	t.Helper()
	var st krrState
	x := make([]float64, T*n*o)
	if err := st.factor(k, lambda, T, n, y, x, o); err != nil {
		t.Fatal(err)
	}
	s := 0.0
	for i := range x {
		s += r[i] * x[i]
	}
	return s
}

func TestKRRKernelForward(t *testing.T) {
	for _, tc := range []struct{ T, n, o int }{{1, 1, 1}, {3, 5, 1}, {2, 7, 3}, {6, 25, 5}, {2, 100, 4}} {
		t.Run(fmt.Sprintf("T%dn%do%d", tc.T, tc.n, tc.o), func(t *testing.T) {
			rng := krrRNG(1)
			k := krrRandPSD(rng, tc.T, tc.n, max(1, tc.n/2))
			y := krrRandn(rng, tc.T*tc.n*tc.o)
			lambda := 0.1
			var st krrState
			x := make([]float64, len(y))
			if err := st.factor(k, lambda, tc.T, tc.n, y, x, tc.o); err != nil {
				t.Fatal(err)
			}
			n, o := tc.n, tc.o
			for ti := range tc.T {
				a := mat.NewDense(n, n, append([]float64(nil), k[ti*n*n:(ti+1)*n*n]...))
				for i := range n {
					a.Set(i, i, a.At(i, i)+lambda)
				}
				var want mat.Dense
				if err := want.Solve(a, mat.NewDense(n, o, y[ti*n*o:(ti+1)*n*o])); err != nil {
					t.Fatal(err)
				}
				got := mat.NewDense(n, o, x[ti*n*o:(ti+1)*n*o])
				if !mat.EqualApprox(got, &want, 1e-9) {
					t.Fatalf("task %d: got\n%v\nwant\n%v", ti, mat.Formatted(got), mat.Formatted(&want))
				}
			}
		})
	}
}

func TestKRRKernelGradFD(t *testing.T) {
	const T, n, o = 3, 5, 2
	rng := krrRNG(2)
	k := krrRandPSD(rng, T, n, 3)
	y := krrRandn(rng, T*n*o)
	r := krrRandn(rng, T*n*o)
	lambda := 0.3

	var st krrState
	x := make([]float64, T*n*o)
	if err := st.factor(k, lambda, T, n, y, x, o); err != nil {
		t.Fatal(err)
	}
	dy := make([]float64, T*n*o)
	st.gradY(r, dy, o)
	dk := make([]float64, T*n*n)
	krrGradK(nil, dy, x, dk, T, n, o)
	dl := krrGradLambda(dy, x, T, n*o)

	loss := func() float64 { return krrLoss(t, k, y, r, lambda, T, n, o) }
	worst := 0.0
	check := func(name string, an, fd float64) {
		e := krrRelErr(an, fd)
		worst = max(worst, e)
		if e > krrFDTol {
			t.Errorf("%s: analytic %.12g, FD %.12g, rel err %.3g", name, an, fd, e)
		}
	}
	for i := range y {
		v := y[i]
		y[i] = v + krrFDStep
		lp := loss()
		y[i] = v - krrFDStep
		lm := loss()
		y[i] = v
		check(fmt.Sprintf("dY[%d]", i), dy[i], (lp-lm)/(2*krrFDStep))
	}
	// K is symmetric, so perturb K_ij and K_ji together: the loss then moves
	// by h·(dK_ij + dK_ji), or h·dK_ii on the diagonal.
	for ti := range T {
		for i := range n {
			for j := i; j < n; j++ {
				a, b := ti*n*n+i*n+j, ti*n*n+j*n+i
				if dk[a] != dk[b] {
					t.Fatalf("dK not symmetric at task %d (%d,%d)", ti, i, j)
				}
				va, vb := k[a], k[b]
				k[a], k[b] = va+krrFDStep, vb+krrFDStep
				if a == b {
					k[a] = va + krrFDStep
				}
				lp := loss()
				k[a], k[b] = va-krrFDStep, vb-krrFDStep
				if a == b {
					k[a] = va - krrFDStep
				}
				lm := loss()
				k[a], k[b] = va, vb
				an := dk[a] + dk[b]
				if a == b {
					an = dk[a]
				}
				check(fmt.Sprintf("dK[%d,%d,%d]", ti, i, j), an, (lp-lm)/(2*krrFDStep))
			}
		}
	}
	lp := krrLoss(t, k, y, r, lambda+krrFDStep, T, n, o)
	lm := krrLoss(t, k, y, r, lambda-krrFDStep, T, n, o)
	check("dλ", dl, (lp-lm)/(2*krrFDStep))
	t.Logf("worst relative error %.3g", worst)
}

func TestKRRKernelNotPD(t *testing.T) {
	const n = 3
	good := []float64{2, 0.5, 0, 0.5, 2, 0, 0, 0, 2}
	indefinite := []float64{1, 0, 0, 0, -2, 0, 0, 0, 1} // eigenvalue −2 < −λ
	nanLower := append([]float64(nil), good...)
	nanLower[1*n+0] = math.NaN()
	nanUpper := append([]float64(nil), good...)
	nanUpper[0*n+2] = math.NaN()
	infDiag := append([]float64(nil), good...)
	infDiag[4] = math.Inf(1)
	for _, tc := range []struct {
		name   string
		k      []float64
		lambda float64
		want   string
	}{
		{"indefinite", append(append([]float64(nil), good...), indefinite...), 0.5, "task 1"},
		{"nan-lower", append(append([]float64(nil), good...), nanLower...), 0.5, "task 1"},
		{"nan-upper", append(append([]float64(nil), good...), nanUpper...), 0.5, "task 1"},
		{"inf", append(append([]float64(nil), good...), infDiag...), 0.5, "task 1"},
		{"negative-lambda", append(append([]float64(nil), good...), good...), -5, "task 0"},
		{"nan-lambda", append(append([]float64(nil), good...), good...), math.NaN(), "λ=NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st krrState
			y := make([]float64, 2*n)
			x := make([]float64, 2*n)
			err := st.factor(tc.k, tc.lambda, 2, n, y, x, 1)
			if !errors.Is(err, ErrNotPD) || !IsNotPD(err) {
				t.Fatalf("got %v, want ErrNotPD", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "learning rate") {
				t.Fatalf("error %q should name %q and give advice", err, tc.want)
			}
		})
	}
}

// krrParam gives uniform element access to a node's value, scalar or tensor.
type krrParam struct {
	size int
	get  func(i int) float64
	set  func(i int, v float64)
}

func krrParamOf(t *testing.T, n *gorgonia.Node) krrParam {
	t.Helper()
	switch v := n.Value().(type) {
	case *gorgonia.F64:
		return krrParam{1, func(int) float64 { return float64(*v) }, func(_ int, x float64) { *v = gorgonia.F64(x) }}
	case *tensor.Dense:
		d := v.Float64s()
		return krrParam{len(d), func(i int) float64 { return d[i] }, func(i int, x float64) { d[i] = x }}
	}
	t.Fatalf("unsupported value %T for %v", n.Value(), n)
	return krrParam{}
}

func krrScalarOf(t *testing.T, v gorgonia.Value) float64 {
	t.Helper()
	switch x := v.(type) {
	case *gorgonia.F64:
		return float64(*x)
	case *tensor.Dense:
		return x.Float64s()[0]
	}
	t.Fatalf("unsupported value %T", v)
	return 0
}

func krrGradOf(t *testing.T, n *gorgonia.Node) []float64 {
	t.Helper()
	g, err := n.Grad()
	if err != nil {
		t.Fatalf("grad of %v: %v", n, err)
	}
	switch x := g.(type) {
	case *gorgonia.F64:
		return []float64{float64(*x)}
	case *tensor.Dense:
		return append([]float64(nil), x.Float64s()...)
	}
	t.Fatalf("unsupported gradient %T", g)
	return nil
}

// krrCheckGraphGrads runs vm once, then compares the gradient of every wrt
// node with central differences of loss obtained by re-running vm. Nodes in
// sym hold batches of symmetric n×n matrices and are perturbed in symmetric
// pairs. It returns the worst relative error.
func krrCheckGraphGrads(t *testing.T, vm gorgonia.VM, loss *gorgonia.Node, wrts []*gorgonia.Node, sym map[*gorgonia.Node]int) float64 {
	t.Helper()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	grads := make([][]float64, len(wrts))
	for i, w := range wrts {
		grads[i] = krrGradOf(t, w)
	}
	// Later runs accumulate into the gradients; only the loss is read now.
	eval := func() float64 {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return krrScalarOf(t, loss.Value())
	}
	worst := 0.0
	for wi, w := range wrts {
		p := krrParamOf(t, w)
		an := grads[wi]
		if len(an) != p.size {
			t.Fatalf("%v: gradient has %d values, want %d", w, len(an), p.size)
		}
		n, isSym := sym[w]
		for i := range p.size {
			j := i
			if isSym {
				r, c := (i%(n*n))/n, i%n
				if c < r {
					continue
				}
				j = i - r*n - c + c*n + r
			}
			vi, vj := p.get(i), p.get(j)
			p.set(i, vi+krrFDStep)
			p.set(j, vj+krrFDStep)
			lp := eval()
			p.set(i, vi-krrFDStep)
			p.set(j, vj-krrFDStep)
			lm := eval()
			p.set(i, vi)
			p.set(j, vj)
			want := an[i]
			if j != i {
				want += an[j]
			}
			fd := (lp - lm) / (2 * krrFDStep)
			e := krrRelErr(want, fd)
			worst = max(worst, e)
			if e > krrFDTol {
				t.Errorf("%v[%d]: analytic %.12g, FD %.12g, rel err %.3g", w, i, want, fd, e)
			}
		}
	}
	return worst
}

func krrTensorNode(g *gorgonia.ExprGraph, name string, shape tensor.Shape, data []float64) *gorgonia.Node {
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	return gorgonia.NewTensor(g, tensor.Float64, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(name), gorgonia.WithValue(v))
}

// krrMust unwraps graph-building results; a panic fails the test.
func krrMust(n *gorgonia.Node, err error) *gorgonia.Node {
	if err != nil {
		panic(err)
	}
	return n
}

// krrSumWeighted returns Sum(x ∘ R) for a fixed random R.
func krrSumWeighted(t *testing.T, rng *rand.Rand, x *gorgonia.Node) *gorgonia.Node {
	t.Helper()
	r := krrTensorNode(x.Graph(), "R_"+x.Name(), x.Shape(), krrRandn(rng, x.Shape().TotalSize()))
	return krrMust(gorgonia.Sum(krrMust(gorgonia.HadamardProd(x, r))))
}

func TestKRRGraphGradFD(t *testing.T) {
	const T, n, o = 3, 4, 2
	for _, lambdaKind := range []string{"exp-scalar", "tensor1"} {
		t.Run(lambdaKind, func(t *testing.T) {
			rng := krrRNG(3)
			g := gorgonia.NewGraph()
			k := krrTensorNode(g, "k", tensor.Shape{T, n, n}, krrRandPSD(rng, T, n, 2))
			y := krrTensorNode(g, "y", tensor.Shape{T, n, o}, krrRandn(rng, T*n*o))
			var lp, lambda *gorgonia.Node
			if lambdaKind == "exp-scalar" {
				lp = gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("loglambda"), gorgonia.WithValue(math.Log(0.2)))
				lambda = krrMust(gorgonia.Exp(lp))
			} else {
				lp = krrTensorNode(g, "lambda", tensor.Shape{1}, []float64{0.2})
				lambda = lp
			}
			x := krrMust(KRRSolve(nil, k, y, lambda))
			loss := krrSumWeighted(t, rng, x)
			wrts := []*gorgonia.Node{k, y, lp}
			if _, err := gorgonia.Grad(loss, wrts...); err != nil {
				t.Fatal(err)
			}
			vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(wrts...))
			defer vm.Close()
			worst := krrCheckGraphGrads(t, vm, loss, wrts, map[*gorgonia.Node]int{k: n})
			t.Logf("worst relative error %.3g", worst)
		})
	}
}

// TestKRRGraphGramFD differentiates through K = Φ Φᵀ with unconstrained
// perturbations of Φ: this is what the symmetrized dK convention must get
// right.
func TestKRRGraphGramFD(t *testing.T) {
	const T, n, d, o = 2, 4, 3, 2
	rng := krrRNG(4)
	g := gorgonia.NewGraph()
	phi := krrTensorNode(g, "phi", tensor.Shape{T, n, d}, krrRandn(rng, T*n*d))
	y := krrTensorNode(g, "y", tensor.Shape{T, n, o}, krrRandn(rng, T*n*o))
	lp := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("loglambda"), gorgonia.WithValue(math.Log(0.5)))
	k := krrMust(gorgonia.BatchedMatMul(phi, phi, false, true))
	x := krrMust(KRRSolve(nil, k, y, krrMust(gorgonia.Exp(lp))))
	loss := krrSumWeighted(t, rng, x)
	wrts := []*gorgonia.Node{phi, y, lp}
	if _, err := gorgonia.Grad(loss, wrts...); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(wrts...))
	defer vm.Close()
	t.Logf("worst relative error %.3g", krrCheckGraphGrads(t, vm, loss, wrts, nil))
}

func TestKRRGraphNotPD(t *testing.T) {
	const n = 3
	good := []float64{2, 0.5, 0, 0.5, 2, 0, 0, 0, 2}
	indefinite := []float64{1, 0, 0, 0, -2, 0, 0, 0, 1}
	withNaN := append([]float64(nil), good...)
	withNaN[5] = math.NaN()
	for _, tc := range []struct {
		name string
		bad  []float64
	}{{"indefinite", indefinite}, {"nan", withNaN}} {
		t.Run(tc.name, func(t *testing.T) {
			g := gorgonia.NewGraph()
			k := krrTensorNode(g, "k", tensor.Shape{2, n, n}, append(append([]float64(nil), good...), tc.bad...))
			y := krrTensorNode(g, "y", tensor.Shape{2, n, 1}, []float64{1, 2, 3, 4, 5, 6})
			lp := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("loglambda"), gorgonia.WithValue(math.Log(0.5)))
			x := krrMust(KRRSolve(nil, k, y, krrMust(gorgonia.Exp(lp))))
			loss := krrMust(gorgonia.Sum(x))
			if _, err := gorgonia.Grad(loss, k, y, lp); err != nil {
				t.Fatal(err)
			}
			vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(k, y, lp))
			defer vm.Close()
			err := vm.RunAll()
			if !IsNotPD(err) {
				t.Fatalf("RunAll: got %v, want an error wrapping ErrNotPD", err)
			}
			if !strings.Contains(err.Error(), "task 1") {
				t.Fatalf("error %q should name task 1", err)
			}
			// Cause unwraps gorgonia's machine error to the op's own.
			var ke *KRRError
			if c := Cause(err); !errors.As(c, &ke) || ke.Task != 1 || strings.Contains(c.Error(), "PC ") {
				t.Fatalf("Cause(%q) = %q, want the op's KRRError", err, c)
			}
			if ke.NonFinite != (tc.name == "nan") || errors.Is(err, ErrNotFinite) && tc.name != "nan" {
				t.Fatalf("non-finite %v for %s", ke.NonFinite, tc.name)
			}
		})
	}
}

func TestKRRBuildErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	k := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(2, 3, 3), gorgonia.WithName("k"))
	y := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(2, 3, 1), gorgonia.WithName("y"))
	lam := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("lam"))
	k32 := gorgonia.NewTensor(g, tensor.Float32, 3, gorgonia.WithShape(2, 3, 3), gorgonia.WithName("k32"))
	kRect := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(2, 3, 4), gorgonia.WithName("kRect"))
	yBadT := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(3, 3, 1), gorgonia.WithName("yBadT"))
	y2d := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(3, 1), gorgonia.WithName("y2d"))
	lam2 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(2), gorgonia.WithName("lam2"))
	lam32 := gorgonia.NewScalar(g, tensor.Float32, gorgonia.WithName("lam32"))
	for _, tc := range []struct {
		name       string
		k, y, lamb *gorgonia.Node
	}{
		{"float32 k", k32, y, lam},
		{"float32 λ", k, y, lam32},
		{"non-square k", kRect, y, lam},
		{"T mismatch", k, yBadT, lam},
		{"2-d y", k, y2d, lam},
		{"2-element λ", k, y, lam2},
		{"nil", nil, y, lam},
	} {
		if _, err := KRRSolve(nil, tc.k, tc.y, tc.lamb); err == nil {
			t.Errorf("%s: want an error", tc.name)
		}
	}
	if _, err := KRRSolve(nil, k, y, lam); err != nil {
		t.Fatalf("valid inputs: %v", err)
	}
}

// TestKRRPrealloc exercises UsePreallocDo, which gorgonia uses when an output
// register still holds a value, including a stale one of the wrong shape.
func TestKRRPrealloc(t *testing.T) {
	const T, n, o = 2, 4, 3
	rng := krrRNG(5)
	g := gorgonia.NewGraph()
	k := krrTensorNode(g, "k", tensor.Shape{T, n, n}, krrRandPSD(rng, T, n, 2))
	y := krrTensorNode(g, "y", tensor.Shape{T, n, o}, krrRandn(rng, T*n*o))
	lam := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("lam"), gorgonia.WithValue(0.3))
	x := krrMust(KRRSolve(nil, k, y, lam))
	op := x.Op().(*krrSolveOp)
	in := []gorgonia.Value{k.Value(), y.Value(), lam.Value()}
	want, err := op.Do(in...)
	if err != nil {
		t.Fatal(err)
	}
	pre := tensor.New(tensor.WithShape(T, n, o), tensor.Of(tensor.Float64))
	got, err := op.UsePreallocDo(pre, in...)
	if err != nil {
		t.Fatal(err)
	}
	if got != gorgonia.Value(pre) {
		t.Fatal("UsePreallocDo did not write into prealloc")
	}
	stale := tensor.New(tensor.WithShape(3, 3), tensor.Of(tensor.Float64))
	got2, err := op.UsePreallocDo(stale, in...)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []gorgonia.Value{got, got2} {
		if !krrBitEqual(v.(*tensor.Dense).Float64s(), want.(*tensor.Dense).Float64s()) {
			t.Fatal("prealloc result differs from Do")
		}
	}
}

func krrBitEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// krrWithProcs runs fn under GOMAXPROCS=p and restores the old setting.
func krrWithProcs(p int, fn func()) {
	old := runtime.GOMAXPROCS(p)
	defer runtime.GOMAXPROCS(old)
	fn()
}

func TestKRRDeterministicAcrossGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct{ T, n, o int }{{25, 5, 1}, {6, 25, 5}, {6, 100, 20}} {
		t.Run(fmt.Sprintf("kernels-T%dn%do%d", tc.T, tc.n, tc.o), func(t *testing.T) {
			rng := krrRNG(6)
			k := krrRandPSD(rng, tc.T, tc.n, tc.n/2+1)
			y := krrRandn(rng, tc.T*tc.n*tc.o)
			r := krrRandn(rng, tc.T*tc.n*tc.o)
			run := func() [][]float64 {
				var st krrState
				x := make([]float64, len(y))
				if err := st.factor(k, 0.05, tc.T, tc.n, y, x, tc.o); err != nil {
					t.Fatal(err)
				}
				dy := make([]float64, len(y))
				st.gradY(r, dy, tc.o)
				dk := make([]float64, len(k))
				krrGradK(nil, dy, x, dk, tc.T, tc.n, tc.o)
				return [][]float64{x, dy, dk, {krrGradLambda(dy, x, tc.T, tc.n*tc.o)}}
			}
			var one, two [][]float64
			krrWithProcs(1, func() { one = run() })
			krrWithProcs(2, func() { two = run() })
			for i := range one {
				if !krrBitEqual(one[i], two[i]) {
					t.Fatalf("output %d differs between GOMAXPROCS=1 and 2", i)
				}
			}
		})
	}
	t.Run("graph", func(t *testing.T) {
		// Large enough that krrForTasks goes parallel.
		const T, n, o = 6, 100, 20
		run := func() [][]float64 {
			rng := krrRNG(7)
			g := gorgonia.NewGraph()
			k := krrTensorNode(g, "k", tensor.Shape{T, n, n}, krrRandPSD(rng, T, n, 40))
			y := krrTensorNode(g, "y", tensor.Shape{T, n, o}, krrRandn(rng, T*n*o))
			lp := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("loglambda"), gorgonia.WithValue(math.Log(0.1)))
			x := krrMust(KRRSolve(nil, k, y, krrMust(gorgonia.Exp(lp))))
			loss := krrSumWeighted(t, rng, x)
			if _, err := gorgonia.Grad(loss, k, y, lp); err != nil {
				t.Fatal(err)
			}
			vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(k, y, lp))
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			return [][]float64{x.Value().(*tensor.Dense).Float64s(), krrGradOf(t, k), krrGradOf(t, y), krrGradOf(t, lp)}
		}
		var one, two [][]float64
		krrWithProcs(1, func() { one = run() })
		krrWithProcs(2, func() { two = run() })
		for i := range one {
			if !krrBitEqual(one[i], two[i]) {
				t.Fatalf("output %d differs between GOMAXPROCS=1 and 2", i)
			}
		}
	})
}

// BenchmarkKRRSolve times one forward and backward pass of the raw kernels
// (factor+solve, dY, dK, dλ) at the sizes the experiments use.
func BenchmarkKRRSolve(b *testing.B) {
	for _, tc := range []struct{ T, n, o int }{{25, 5, 1}, {6, 25, 5}, {6, 100, 20}} {
		b.Run(fmt.Sprintf("T%d_n%d_o%d", tc.T, tc.n, tc.o), func(b *testing.B) {
			rng := krrRNG(8)
			k := krrRandPSD(rng, tc.T, tc.n, tc.n/2+1)
			y := krrRandn(rng, tc.T*tc.n*tc.o)
			r := krrRandn(rng, tc.T*tc.n*tc.o)
			x := make([]float64, len(y))
			dy := make([]float64, len(y))
			dk := make([]float64, len(k))
			var st krrState
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := st.factor(k, 0.05, tc.T, tc.n, y, x, tc.o); err != nil {
					b.Fatal(err)
				}
				st.gradY(r, dy, tc.o)
				krrGradK(nil, dy, x, dk, tc.T, tc.n, tc.o)
				_ = krrGradLambda(dy, x, tc.T, tc.n*tc.o)
			}
		})
	}
}
