package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// flowProblem is a flow evaluation with fixed random inputs.
type flowProblem struct {
	spec                FlowSpec
	T, D                int
	omega0, cond, theta []float64
	r                   []float64 // loss weights: loss = Σ out ⊙ r
}

// newFlowProblem draws inputs; with scale > 0 every parameter (biases and
// W2 included) is N(0, scale²) so that all paths carry gradient, otherwise
// theta comes from spec.Init.
func newFlowProblem(spec FlowSpec, T, D int, scale float64, seed uint64) *flowProblem {
	rng := rand.New(rand.NewPCG(seed, 0))
	p := &flowProblem{spec: spec, T: T, D: D}
	fill := func(n int, s float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = s * rng.NormFloat64()
		}
		return v
	}
	p.omega0 = fill(T*D*spec.Dim, 1)
	p.cond = fill(T*spec.Cond, 1)
	if scale > 0 {
		p.theta = fill(spec.NumParams(), scale)
	} else {
		p.theta = make([]float64, spec.NumParams())
		spec.Init(rng, p.theta)
	}
	p.r = fill(T*D*(spec.Dim+1), 1)
	return p
}

func (p *flowProblem) forward(t testing.TB, k *FlowKernel) []float64 {
	t.Helper()
	out := make([]float64, p.T*p.D*(p.spec.Dim+1))
	if err := k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *flowProblem) loss(t testing.TB, k *FlowKernel) float64 {
	t.Helper()
	s := 0.0
	for i, v := range p.forward(t, k) {
		s += v * p.r[i]
	}
	return s
}

// newFlowKernelPrec returns a kernel computing in float64 if f64 (the
// reference path: finite-difference checks need its precision), otherwise
// in the production float32.
func newFlowKernelPrec(t testing.TB, spec FlowSpec, f64 bool) *FlowKernel {
	t.Helper()
	k, err := NewFlowKernel(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	k.f64 = f64
	return k
}

// flowPrecName names a precision in subtest names.
func flowPrecName(f64 bool) string {
	if f64 {
		return "float64"
	}
	return "float32"
}

func flowMaxAbsDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

// flowRelErr is the normwise relative error ‖g − ref‖ / ‖ref‖.
func flowRelErr(g, ref []float64) float64 {
	var num, den float64
	for i := range g {
		num += (g[i] - ref[i]) * (g[i] - ref[i])
		den += ref[i] * ref[i]
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

var flowSmallSpecs = []struct {
	name string
	spec FlowSpec
	T, D int
}{
	{"odd-dim", FlowSpec{Layers: 3, Dim: 5, Cond: 3, Hidden: 7}, 3, 4},
	{"even-dim", FlowSpec{Layers: 2, Dim: 6, Cond: 2, Hidden: 5}, 5, 3},
	{"dim2-one-task", FlowSpec{Layers: 4, Dim: 2, Cond: 1, Hidden: 3}, 1, 6},
}

func TestFlowLayout(t *testing.T) {
	L := FlowSpec{Layers: 2, Dim: 5, Cond: 1, Hidden: 1}.layout()
	if !slices.Equal(L[0].a, []int{0, 1}) || !slices.Equal(L[0].b, []int{2, 3, 4}) {
		t.Errorf("layer 0 split %v | %v, want [0 1] | [2 3 4]", L[0].a, L[0].b)
	}
	if !slices.Equal(L[1].a, []int{0, 2, 4}) || !slices.Equal(L[1].b, []int{1, 3}) {
		t.Errorf("layer 1 split %v | %v, want [0 2 4] | [1 3]", L[1].a, L[1].b)
	}
	for _, s := range []FlowSpec{{4, 40, 80, 128}, {3, 5, 3, 7}, {1, 2, 1, 1}} {
		if got := s.layout(); got[len(got)-1].h[1].end != s.NumParams() {
			t.Errorf("%+v: layout ends at %d, NumParams %d", s, got[len(got)-1].h[1].end, s.NumParams())
		}
	}
}

func TestFlowSpecValidate(t *testing.T) {
	for _, s := range []FlowSpec{{0, 4, 2, 3}, {2, 1, 2, 3}, {2, 4, 0, 3}, {2, 4, 2, 0}} {
		if s.Validate() == nil {
			t.Errorf("%+v: Validate accepted it", s)
		}
		if _, err := NewFlowKernel(nil, s); err == nil {
			t.Errorf("%+v: NewFlowKernel accepted it", s)
		}
	}
}

// TestFlowForwardMatchesReference checks both precisions against the
// sample-by-sample float64 reference: float64 to rounding (1e-12), float32
// to 1e-5 normwise (float32 rounding is ~6e-8 per operation; through 2K
// coupling halves with sums over H = 7 hidden units the measured error is
// ~1e-6).
func TestFlowForwardMatchesReference(t *testing.T) {
	for _, f64 := range []bool{true, false} {
		for _, c := range flowSmallSpecs {
			t.Run(flowPrecName(f64)+"/"+c.name, func(t *testing.T) {
				p := newFlowProblem(c.spec, c.T, c.D, 0.5, 1)
				k := newFlowKernelPrec(t, c.spec, f64)
				out := p.forward(t, k)
				want, steps := flowRef(c.spec, c.T, c.D, p.omega0, p.cond, p.theta)
				check := func(what string, got, want []float64) {
					if f64 {
						if e := flowMaxAbsDiff(got, want); e > 1e-12 {
							t.Errorf("%s differs from reference by %g", what, e)
						}
					} else if e := flowRelErr(got, want); e > 1e-5 {
						t.Errorf("%s differs from reference by %g relative", what, e)
					}
				}
				check("forward", out, want)
				for tk := 0; tk < c.T; tk++ {
					got := k.Steps(tk)
					if len(got) != c.spec.Layers+1 {
						t.Fatalf("Steps(%d) has %d steps, want %d", tk, len(got), c.spec.Layers+1)
					}
					for s := range got {
						check(fmt.Sprintf("task %d step %d", tk, s), got[s], steps[tk][s])
					}
				}
				if k.Steps(-1) != nil || k.Steps(c.T) != nil {
					t.Error("Steps accepted an out-of-range task")
				}
			})
		}
	}
}

func TestFlowKernelGradFD(t *testing.T) {
	for _, c := range flowSmallSpecs {
		t.Run(c.name, func(t *testing.T) {
			p := newFlowProblem(c.spec, c.T, c.D, 0.5, 2)
			k := newFlowKernelPrec(t, c.spec, true)
			p.forward(t, k)
			gO := make([]float64, len(p.omega0))
			gC := make([]float64, len(p.cond))
			gT := make([]float64, len(p.theta))
			// Garbage in the outputs checks that Backward overwrites them.
			for _, g := range [][]float64{gO, gC, gT} {
				for i := range g {
					g[i] = 7
				}
			}
			if err := k.Backward(p.r, gO, gC, gT); err != nil {
				t.Fatal(err)
			}
			f := func() float64 { return p.loss(t, k) }
			for _, in := range []struct {
				name string
				x, g []float64
			}{{"omega0", p.omega0, gO}, {"cond", p.cond, gC}, {"theta", p.theta, gT}} {
				fd := fdGrad(in.x, f)
				e := flowRelErr(in.g, fd)
				t.Logf("%s: relative error %.3g", in.name, e)
				if e > 1e-7 {
					t.Errorf("%s: relative error %g vs finite differences", in.name, e)
				}
			}
		})
	}
}

// TestFlowKernelReuse runs one kernel over changing shapes: each result must
// be bit-identical to a fresh kernel's, in either precision. The kernel
// also switches precision in between, which must not disturb either path.
func TestFlowKernelReuse(t *testing.T) {
	spec := FlowSpec{Layers: 3, Dim: 5, Cond: 2, Hidden: 6}
	reused, err := NewFlowKernel(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	for i, sz := range [][2]int{{3, 4}, {5, 2}, {3, 4}, {1, 9}, {6, 33}} {
		for _, f64 := range []bool{false, true} {
			p := newFlowProblem(spec, sz[0], sz[1], 0.5, uint64(20+i))
			var res [2][4][]float64
			for j, k := range []*FlowKernel{reused, nil} {
				if k == nil {
					k = newFlowKernelPrec(t, spec, f64)
				}
				k.f64 = f64
				out := p.forward(t, k)
				g := [3][]float64{make([]float64, len(p.omega0)), make([]float64, len(p.cond)), make([]float64, len(p.theta))}
				if err := k.Backward(p.r, g[0], g[1], g[2]); err != nil {
					t.Fatal(err)
				}
				res[j] = [4][]float64{out, g[0], g[1], g[2]}
			}
			for j := range res[0] {
				if !slices.Equal(res[0][j], res[1][j]) {
					t.Errorf("%s shape %v: result %d of the reused kernel differs from a fresh one", flowPrecName(f64), sz, j)
				}
			}
		}
	}
}

func TestFlowKernelErrors(t *testing.T) {
	spec := FlowSpec{Layers: 2, Dim: 4, Cond: 3, Hidden: 5}
	k, err := NewFlowKernel(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	p := newFlowProblem(spec, 2, 3, 0.5, 30)
	gO := make([]float64, len(p.omega0))
	gC := make([]float64, len(p.cond))
	gT := make([]float64, len(p.theta))
	if k.Backward(p.r, gO, gC, gT) == nil {
		t.Error("Backward before Forward succeeded")
	}
	if k.Steps(0) != nil {
		t.Error("Steps before Forward returned steps")
	}
	out := make([]float64, len(p.r))
	for _, c := range []struct {
		name                     string
		T, D                     int
		omega0, cond, theta, out []float64
	}{
		{"omega0", 2, 3, p.omega0[1:], p.cond, p.theta, out},
		{"cond", 2, 3, p.omega0, p.cond[1:], p.theta, out},
		{"theta", 2, 3, p.omega0, p.cond, p.theta[1:], out},
		{"out", 2, 3, p.omega0, p.cond, p.theta, out[1:]},
		{"T", 0, 3, nil, nil, p.theta, nil},
	} {
		if k.Forward(c.T, c.D, c.omega0, c.cond, c.theta, c.out) == nil {
			t.Errorf("Forward with a bad %s succeeded", c.name)
		}
	}
	p.forward(t, k)
	if k.Backward(p.r[1:], gO, gC, gT) == nil {
		t.Error("Backward with a short output gradient succeeded")
	}
	if k.Backward(p.r, gO, gC, gT[1:]) == nil {
		t.Error("Backward with a short theta gradient succeeded")
	}
	if err := flowInverse(spec, 2, 3, p.omega0, p.cond, p.theta[1:], gO); err == nil {
		t.Error("FlowInverse with a short theta succeeded")
	}
}

// TestFlowInverse inverts forward outputs with the float64 FlowInverse: to
// 1e-12 after a float64 forward, to 1e-5 normwise after a float32 one
// (whose output carries float32 rounding).
func TestFlowInverse(t *testing.T) {
	for _, f64 := range []bool{true, false} {
		for _, c := range append(flowSmallSpecs, struct {
			name string
			spec FlowSpec
			T, D int
		}{"realistic-dims", FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}, 3, 16}) {
			t.Run(flowPrecName(f64)+"/"+c.name, func(t *testing.T) {
				p := newFlowProblem(c.spec, c.T, c.D, 0.1, 3)
				k := newFlowKernelPrec(t, c.spec, f64)
				out := p.forward(t, k)
				d := c.spec.Dim
				omegaK := make([]float64, len(p.omega0))
				for r := 0; r < c.T*c.D; r++ {
					copy(omegaK[r*d:(r+1)*d], out[r*(d+1):])
				}
				back := make([]float64, len(p.omega0))
				if err := flowInverse(c.spec, c.T, c.D, omegaK, p.cond, p.theta, back); err != nil {
					t.Fatal(err)
				}
				if f64 {
					if e := flowMaxAbsDiff(back, p.omega0); e > 1e-12 {
						t.Errorf("inverse(forward(ω)) differs from ω by %g", e)
					}
				} else if e := flowRelErr(back, p.omega0); e > 1e-5 {
					t.Errorf("inverse(forward(ω)) differs from ω by %g relative", e)
				}
			})
		}
	}
}

// TestFlowLogDetJacobian compares the log-det column with log|det J| of the
// finite-difference Jacobian of ω_K w.r.t. ω_0, sample by sample.
func TestFlowLogDetJacobian(t *testing.T) {
	for _, spec := range []FlowSpec{{3, 4, 2, 6}, {3, 5, 2, 6}, {4, 6, 3, 8}} {
		p := newFlowProblem(spec, 2, 3, 0.3, 4)
		k := newFlowKernelPrec(t, spec, true) // finite differences
		d := spec.Dim
		out := p.forward(t, k)
		for s := 0; s < p.T*p.D; s++ {
			jac := mat.NewDense(d, d, nil)
			x := p.omega0[s*d : (s+1)*d]
			const h = 1e-6
			for j := 0; j < d; j++ {
				v := x[j]
				x[j] = v + h
				fp := p.forward(t, k)[s*(d+1) : s*(d+1)+d]
				x[j] = v - h
				fm := p.forward(t, k)[s*(d+1) : s*(d+1)+d]
				x[j] = v
				for i := 0; i < d; i++ {
					jac.Set(i, j, (fp[i]-fm[i])/(2*h))
				}
			}
			var lu mat.LU
			lu.Factorize(jac)
			logDet, _ := lu.LogDet()
			// Finite-difference noise (~1e-10 per entry) is amplified by
			// the conditioning of J.
			tol := 1e-9 * math.Max(1, lu.Cond())
			if got := out[s*(d+1)+d]; math.Abs(got-logDet) > tol {
				t.Errorf("%+v sample %d: log-det %g, log|det J| %g (cond %.3g)", spec, s, got, logDet, lu.Cond())
			}
		}
	}
}

// TestFlowNearIdentityAtInit checks that Init starts close to the identity
// at the realistic size (the coupling outputs are small, not zero) and that
// every parameter block receives gradient.
func TestFlowNearIdentityAtInit(t *testing.T) {
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	p := newFlowProblem(spec, 4, 32, 0, 5)
	k, err := NewFlowKernel(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	out := p.forward(t, k)
	d := spec.Dim
	var dev, ld float64
	n := p.T * p.D
	for s := 0; s < n; s++ {
		for j := 0; j < d; j++ {
			dev += math.Abs(out[s*(d+1)+j] - p.omega0[s*d+j])
		}
		ld += math.Abs(out[s*(d+1)+d])
	}
	dev /= float64(n * d)
	ld /= float64(n)
	t.Logf("mean |ω_K − ω_0| = %.3g per coordinate, mean |log-det| = %.3g per sample", dev, ld)
	if dev > 0.5 || ld > 0.5*float64(d) {
		t.Errorf("flow at init is far from the identity: mean |Δω| %g, mean |log-det| %g", dev, ld)
	}
	if dev == 0 {
		t.Error("flow at init is exactly the identity: W2 was not initialized")
	}
	gO := make([]float64, len(p.omega0))
	gC := make([]float64, len(p.cond))
	gT := make([]float64, len(p.theta))
	if err := k.Backward(p.r, gO, gC, gT); err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, g := range gT {
		norm += g * g
	}
	if !(norm > 0) {
		t.Fatal("no parameter gradient at init")
	}
}

// TestFlowDeterministicAcrossGOMAXPROCS runs the realistic size through the
// graph with one and two cores and requires bit-identical results.
func TestFlowDeterministicAcrossGOMAXPROCS(t *testing.T) {
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	T, D := 25, 128
	if testing.Short() {
		T, D = 9, 16
	}
	p := newFlowProblem(spec, T, D, 0.1, 9)
	run := func(procs int) ([]float64, [3][]float64) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		fg := newFlowGraph(t, p)
		vm := fg.machine()
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(fg.out.Value().Data().([]float64)), fg.grads(t)
	}
	out1, g1 := run(1)
	out2, g2 := run(2)
	if !slices.Equal(out1, out2) {
		t.Errorf("outputs differ between GOMAXPROCS 1 and 2 by %g", flowMaxAbsDiff(out1, out2))
	}
	for i := range g1 {
		if !slices.Equal(g1[i], g2[i]) {
			t.Errorf("input %d: gradients differ between GOMAXPROCS 1 and 2 by %g", i, flowMaxAbsDiff(g1[i], g2[i]))
		}
	}
}

// TestFlowGonumGemmDeterministic backs the choice of gemm layout: gonum's
// parallel Dgemm (taken for large products, e.g. one batched over all T·D
// samples) splits C into fixed 64×64 blocks, each with its own full k loop,
// so it is bit-identical for any GOMAXPROCS; our dgemm's serial panels are
// trivially so.
func TestFlowGonumGemmDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 0))
	m, n, k := 300, 130, 200
	a, b := make([]float64, m*k), make([]float64, k*n)
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	run := func(procs int, split bool) []float64 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		c := make([]float64, m*n)
		if split {
			dgemm.Gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
		} else {
			blas64.Gemm(blas.NoTrans, blas.Trans, 1,
				blas64.General{Rows: m, Cols: k, Stride: k, Data: a},
				blas64.General{Rows: n, Cols: k, Stride: k, Data: b}, 0,
				blas64.General{Rows: m, Cols: n, Stride: n, Data: c})
		}
		return c
	}
	for _, split := range []bool{false, true} {
		if !slices.Equal(run(1, split), run(2, split)) {
			t.Errorf("split=%v: Dgemm differs between GOMAXPROCS 1 and 2", split)
		}
	}
}

// flowRun is the output and the three input gradients of one pass.
type flowRun [4][]float64

func (p *flowProblem) run(t testing.TB, k *FlowKernel) flowRun {
	t.Helper()
	out := p.forward(t, k)
	g := [3][]float64{make([]float64, len(p.omega0)), make([]float64, len(p.cond)), make([]float64, len(p.theta))}
	if err := k.Backward(p.r, g[0], g[1], g[2]); err != nil {
		t.Fatal(err)
	}
	return flowRun{out, g[0], g[1], g[2]}
}

// TestFlowFloat32MatchesFloat64 compares the production float32 path with
// the float64 path at the realistic size, on the output and on every
// gradient, normwise. Measured errors are 1e-7 to 4e-7 (float32 rounding
// with FMA); the test allows 1e-5, well inside the 1e-4 the training
// needs. It also checks that the float32 path is deterministic run to run.
func TestFlowFloat32MatchesFloat64(t *testing.T) {
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	T, D := 25, 128
	if testing.Short() {
		T, D = 5, 32
	}
	for _, c := range []struct {
		name  string
		scale float64
	}{{"init", 0}, {"trained-like", 0.05}} {
		t.Run(c.name, func(t *testing.T) {
			p := newFlowProblem(spec, T, D, c.scale, 12)
			k32 := newFlowKernelPrec(t, spec, false)
			k64 := newFlowKernelPrec(t, spec, true)
			r32, r64 := p.run(t, k32), p.run(t, k64)
			for i, name := range []string{"output", "omega0 gradient", "cond gradient", "theta gradient"} {
				e := flowRelErr(r32[i], r64[i])
				t.Logf("%s: float32 vs float64 relative error %.3g", name, e)
				if e > 1e-5 {
					t.Errorf("%s: float32 differs from float64 by %g relative", name, e)
				}
			}
			again := p.run(t, k32)
			for i := range again {
				if !slices.Equal(again[i], r32[i]) {
					t.Errorf("result %d differs between two float32 runs", i)
				}
			}
		})
	}
}

// TestFlowNaNPropagates: a NaN in one task's ω0 must make that task's
// output NaN (so the trainer's non-finite check sees it) and leave the
// other tasks untouched, in both precisions.
func TestFlowNaNPropagates(t *testing.T) {
	spec := FlowSpec{Layers: 2, Dim: 6, Cond: 3, Hidden: 16}
	for _, f64 := range []bool{false, true} {
		p := newFlowProblem(spec, 3, 16, 0.5, 13)
		k := newFlowKernelPrec(t, spec, f64)
		clean := p.forward(t, k)
		p.omega0[len(p.omega0)/2] = math.NaN() // task 1
		out := p.forward(t, k)
		n := len(out) / 3
		if !slices.Equal(out[:n], clean[:n]) || !slices.Equal(out[2*n:], clean[2*n:]) {
			t.Errorf("%s: a NaN in task 1 changed other tasks", flowPrecName(f64))
		}
		nan := false
		for _, v := range out[n : 2*n] {
			nan = nan || math.IsNaN(v)
		}
		if !nan {
			t.Errorf("%s: a NaN in ω0 left the output finite", flowPrecName(f64))
		}
	}
}

// TestFlowSteadyStateAllocs: after the first pass sized the buffers (and
// started the helper goroutines), a forward and backward pass allocates
// nothing, with one core or two.
func TestFlowSteadyStateAllocs(t *testing.T) {
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	p := newFlowProblem(spec, 4, 32, 0, 14)
	k := newFlowKernelPrec(t, spec, false)
	out := make([]float64, len(p.r))
	gO := make([]float64, len(p.omega0))
	gC := make([]float64, len(p.cond))
	gT := make([]float64, len(p.theta))
	pass := func() {
		if err := k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, out); err != nil {
			t.Fatal(err)
		}
		if err := k.Backward(p.r, gO, gC, gT); err != nil {
			t.Fatal(err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		pass()
		if a := testing.AllocsPerRun(5, pass); a != 0 {
			t.Errorf("%v allocations per pass with GOMAXPROCS=%d", a, procs)
		}
	}
}

// TestFlowHelpersEnd: the parked helper goroutines of a kernel end once the
// kernel is garbage.
func TestFlowHelpersEnd(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	runtime.GC()
	before := runtime.NumGoroutine()
	func() {
		spec := FlowSpec{Layers: 1, Dim: 4, Cond: 2, Hidden: 8}
		p := newFlowProblem(spec, 8, 8, 0.5, 15)
		for range 3 {
			p.run(t, newFlowKernelPrec(t, spec, false))
		}
	}()
	if runtime.NumGoroutine() <= before {
		t.Fatal("no helper goroutines were started")
	}
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the kernels became garbage, %d before", n, before)
	}
}

// BenchmarkCouplingFlow measures one forward and backward pass of the kernel
// at the realistic size (T=25, D=128, d=40, c=80, H=128, K=4).
func BenchmarkCouplingFlow(b *testing.B) {
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	k, err := NewFlowKernel(nil, spec)
	if err != nil {
		b.Fatal(err)
	}
	benchFlowPass(b, k, newFlowProblem(spec, 25, 128, 0, 10))
}

// BenchmarkCouplingFlowOmniglot is one pass at the Omniglot step's size
// (flowOmniglotSpec: T=6, D=780, d=256, c=768, H=128, K=4), the CPU twin of
// BenchmarkCouplingFlowOmniglotDevice.
func BenchmarkCouplingFlowOmniglot(b *testing.B) {
	k, err := NewFlowKernel(nil, flowOmniglotSpec)
	if err != nil {
		b.Fatal(err)
	}
	benchFlowPass(b, k, newFlowProblem(flowOmniglotSpec, flowOmniglotT, flowOmniglotD, 0, 10))
}

// benchFlowPass times k's forward and backward passes on p.
func benchFlowPass(b *testing.B, k *FlowKernel, p *flowProblem) {
	out := make([]float64, len(p.r))
	gO := make([]float64, len(p.omega0))
	gC := make([]float64, len(p.cond))
	gT := make([]float64, len(p.theta))
	// Size the buffers outside the measurement (a whole pass: Backward
	// sizes the packing buffers): allocs/op is the steady state.
	if err := k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, out); err != nil {
		b.Fatal(err)
	}
	if err := k.Backward(p.r, gO, gC, gT); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, out); err != nil {
			b.Fatal(err)
		}
		if err := k.Backward(p.r, gO, gC, gT); err != nil {
			b.Fatal(err)
		}
	}
}
