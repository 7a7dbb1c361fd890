package ops

import (
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// flowGraph builds loss = Σ CouplingFlow(ω0, h, θ) ⊙ R in a fresh graph.
type flowGraph struct {
	g                          *gorgonia.ExprGraph
	omega0, cond, theta, out   *gorgonia.Node
	loss                       *gorgonia.Node
	op                         *FlowOp
	tOmega0, tCond, tTheta, tR *tensor.Dense
}

func newFlowGraph(t testing.TB, p *flowProblem) *flowGraph {
	t.Helper()
	s := p.spec
	fg := &flowGraph{g: gorgonia.NewGraph()}
	fg.tOmega0 = tensor.New(tensor.WithShape(p.T, p.D, s.Dim), tensor.WithBacking(slices.Clone(p.omega0)))
	fg.tCond = tensor.New(tensor.WithShape(p.T, s.Cond), tensor.WithBacking(slices.Clone(p.cond)))
	fg.tTheta = tensor.New(tensor.WithShape(s.NumParams()), tensor.WithBacking(slices.Clone(p.theta)))
	fg.tR = tensor.New(tensor.WithShape(p.T, p.D, s.Dim+1), tensor.WithBacking(slices.Clone(p.r)))
	fg.omega0 = gorgonia.NewTensor(fg.g, gorgonia.Float64, 3, gorgonia.WithShape(p.T, p.D, s.Dim), gorgonia.WithName("omega0"), gorgonia.WithValue(fg.tOmega0))
	fg.cond = gorgonia.NewMatrix(fg.g, gorgonia.Float64, gorgonia.WithShape(p.T, s.Cond), gorgonia.WithName("cond"), gorgonia.WithValue(fg.tCond))
	fg.theta = gorgonia.NewVector(fg.g, gorgonia.Float64, gorgonia.WithShape(s.NumParams()), gorgonia.WithName("theta"), gorgonia.WithValue(fg.tTheta))
	r := gorgonia.NewTensor(fg.g, gorgonia.Float64, 3, gorgonia.WithShape(p.T, p.D, s.Dim+1), gorgonia.WithName("R"), gorgonia.WithValue(fg.tR))
	var err error
	if fg.out, fg.op, err = CouplingFlow(nil, fg.omega0, fg.cond, fg.theta, s); err != nil {
		t.Fatal(err)
	}
	prod, err := gorgonia.HadamardProd(fg.out, r)
	if err != nil {
		t.Fatal(err)
	}
	if fg.loss, err = gorgonia.Sum(prod); err != nil {
		t.Fatal(err)
	}
	if _, err = gorgonia.Grad(fg.loss, fg.omega0, fg.cond, fg.theta); err != nil {
		t.Fatal(err)
	}
	return fg
}

func (fg *flowGraph) machine() gorgonia.VM {
	return gorgonia.NewTapeMachine(fg.g, gorgonia.BindDualValues(fg.omega0, fg.cond, fg.theta))
}

func (fg *flowGraph) grads(t testing.TB) [3][]float64 {
	t.Helper()
	var gs [3][]float64
	for i, n := range []*gorgonia.Node{fg.omega0, fg.cond, fg.theta} {
		g, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = slices.Clone(g.Data().([]float64))
	}
	return gs
}

func TestFlowGraphGradFD(t *testing.T) {
	for _, c := range flowSmallSpecs[:2] {
		t.Run(c.name, func(t *testing.T) {
			p := newFlowProblem(c.spec, c.T, c.D, 0.5, 6)
			fg := newFlowGraph(t, p)
			fg.op.kern.f64 = true // finite differences
			vm := fg.machine()
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			gs := fg.grads(t)

			// The graph must report exactly what the kernel computes.
			k := newFlowKernelPrec(t, c.spec, true)
			p.forward(t, k)
			kg := [3][]float64{make([]float64, len(p.omega0)), make([]float64, len(p.cond)), make([]float64, len(p.theta))}
			if err := k.Backward(p.r, kg[0], kg[1], kg[2]); err != nil {
				t.Fatal(err)
			}
			for i := range gs {
				if !slices.Equal(gs[i], kg[i]) {
					t.Errorf("input %d: graph gradient differs from kernel gradient by %g", i, flowMaxAbsDiff(gs[i], kg[i]))
				}
			}

			// Finite differences of the graph's loss (gradients accumulate
			// across these runs, but only the first run's are compared).
			f := func() float64 {
				vm.Reset()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				return fg.loss.Value().Data().(float64)
			}
			for i, x := range [][]float64{fg.tOmega0.Float64s(), fg.tCond.Float64s(), fg.tTheta.Float64s()} {
				fd := fdGrad(x, f)
				e := flowRelErr(gs[i], fd)
				t.Logf("input %d: relative error %.3g", i, e)
				if e > 1e-7 {
					t.Errorf("input %d: relative error %g vs finite differences", i, e)
				}
			}
			if st := fg.op.Steps(0); len(st) != c.spec.Layers+1 {
				t.Errorf("op.Steps(0) has %d steps, want %d", len(st), c.spec.Layers+1)
			}
		})
	}
}

// TestFlowGraphRerun runs one machine twice with new inputs: the second
// forward and gradients must match a fresh machine's (buffers are reused).
func TestFlowGraphRerun(t *testing.T) {
	spec := FlowSpec{Layers: 2, Dim: 6, Cond: 3, Hidden: 8}
	p := newFlowProblem(spec, 5, 7, 0.5, 7)
	q := newFlowProblem(spec, 5, 7, 0.5, 8)
	fg := newFlowGraph(t, p)
	vm := fg.machine()
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ dst, src []float64 }{
		{fg.tOmega0.Float64s(), q.omega0}, {fg.tCond.Float64s(), q.cond}, {fg.tTheta.Float64s(), q.theta}, {fg.tR.Float64s(), q.r},
	} {
		copy(b.dst, b.src)
	}
	// Zero the accumulated gradients, as a solver step would.
	for _, n := range []*gorgonia.Node{fg.omega0, fg.cond, fg.theta} {
		g, _ := n.Grad()
		g.(*tensor.Dense).Zero()
	}
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := fg.grads(t)
	gotOut := slices.Clone(fg.out.Value().Data().([]float64))

	fq := newFlowGraph(t, q)
	vq := fq.machine()
	defer vq.Close()
	if err := vq.RunAll(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotOut, fq.out.Value().Data().([]float64)) {
		t.Error("rerun output differs from a fresh machine's")
	}
	want := fq.grads(t)
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("input %d: rerun gradient differs from a fresh machine's by %g", i, flowMaxAbsDiff(got[i], want[i]))
		}
	}
}

func TestFlowGraphErrors(t *testing.T) {
	spec := FlowSpec{Layers: 2, Dim: 4, Cond: 3, Hidden: 5}
	g := gorgonia.NewGraph()
	om := gorgonia.NewTensor(g, gorgonia.Float64, 3, gorgonia.WithShape(2, 3, 4), gorgonia.WithName("om"))
	om32 := gorgonia.NewTensor(g, gorgonia.Float32, 3, gorgonia.WithShape(2, 3, 4), gorgonia.WithName("om32"))
	omBad := gorgonia.NewTensor(g, gorgonia.Float64, 3, gorgonia.WithShape(2, 3, 5), gorgonia.WithName("omBad"))
	om2 := gorgonia.NewMatrix(g, gorgonia.Float64, gorgonia.WithShape(6, 4), gorgonia.WithName("om2"))
	h := gorgonia.NewMatrix(g, gorgonia.Float64, gorgonia.WithShape(2, 3), gorgonia.WithName("h"))
	hBad := gorgonia.NewMatrix(g, gorgonia.Float64, gorgonia.WithShape(3, 3), gorgonia.WithName("hBad"))
	th := gorgonia.NewVector(g, gorgonia.Float64, gorgonia.WithShape(spec.NumParams()), gorgonia.WithName("th"))
	thBad := gorgonia.NewVector(g, gorgonia.Float64, gorgonia.WithShape(spec.NumParams()+1), gorgonia.WithName("thBad"))
	for _, c := range []struct {
		name        string
		om, h, th   *gorgonia.Node
		spec        FlowSpec
		wantSuccess bool
	}{
		{"ok", om, h, th, spec, true},
		{"float32", om32, h, th, spec, false},
		{"dim", omBad, h, th, spec, false},
		{"rank", om2, h, th, spec, false},
		{"tasks", om, hBad, th, spec, false},
		{"params", om, h, thBad, spec, false},
		{"no layers", om, h, th, FlowSpec{Layers: 0, Dim: 4, Cond: 3, Hidden: 5}, false},
		{"nil", nil, h, th, spec, false},
	} {
		out, _, err := CouplingFlow(nil, c.om, c.h, c.th, c.spec)
		if c.wantSuccess {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if !out.Shape().Eq(tensor.Shape{2, 3, 5}) {
				t.Errorf("%s: output shape %v, want (2, 3, 5)", c.name, out.Shape())
			}
		} else if err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// BenchmarkCouplingFlowGraph measures the same pass through a gorgonia tape
// machine (graph built once), including the loss and gradient bookkeeping.
func BenchmarkCouplingFlowGraph(b *testing.B) {
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	p := newFlowProblem(spec, 25, 128, 0, 10)
	fg := newFlowGraph(b, p)
	vm := fg.machine()
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
	}
}
