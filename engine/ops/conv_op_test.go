package ops

import (
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// convGraph is loss = Σ ConvNet(x) ⊙ R in a fresh graph.
type convGraph struct {
	g          *G.ExprGraph
	net        *ConvNet
	x, out     *G.Node
	ws, bs     []*G.Node
	loss       *G.Node
	tx, tr     *tensor.Dense
	tws, tbs   []*tensor.Dense
	op         *ConvOp
	paramNodes []*G.Node
}

func newConvGraph(t testing.TB, p *convProblem) *convGraph {
	t.Helper()
	s := p.spec
	cg := &convGraph{g: G.NewGraph()}
	var err error
	if cg.net, err = NewConvNet(nil, s); err != nil {
		t.Fatal(err)
	}
	cg.tx = tensor.New(tensor.WithShape(p.N, s.InDim()), tensor.WithBacking(slices.Clone(p.x)))
	cg.x = G.NewMatrix(cg.g, G.Float64, G.WithShape(p.N, s.InDim()), G.WithName("x"), G.WithValue(cg.tx))
	for l := range s.Blocks {
		tw := tensor.New(tensor.WithShape(s.Filters, s.FanIn(l)), tensor.WithBacking(slices.Clone(p.ws[l])))
		tb := tensor.New(tensor.WithShape(s.Filters), tensor.WithBacking(slices.Clone(p.bs[l])))
		cg.tws, cg.tbs = append(cg.tws, tw), append(cg.tbs, tb)
		cg.ws = append(cg.ws, G.NewMatrix(cg.g, G.Float64, G.WithShape(s.Filters, s.FanIn(l)), G.WithName("w"+string(rune('0'+l))), G.WithValue(tw)))
		cg.bs = append(cg.bs, G.NewVector(cg.g, G.Float64, G.WithShape(s.Filters), G.WithName("b"+string(rune('0'+l))), G.WithValue(tb)))
	}
	cg.tr = tensor.New(tensor.WithShape(p.N, s.OutDim()), tensor.WithBacking(slices.Clone(p.r)))
	r := G.NewMatrix(cg.g, G.Float64, G.WithShape(p.N, s.OutDim()), G.WithName("R"), G.WithValue(cg.tr))
	if cg.out, err = cg.net.Apply(cg.x, cg.ws, cg.bs); err != nil {
		t.Fatal(err)
	}
	cg.op = cg.out.Op().(*ConvOp)
	prod, err := G.HadamardProd(cg.out, r)
	if err != nil {
		t.Fatal(err)
	}
	if cg.loss, err = G.Sum(prod); err != nil {
		t.Fatal(err)
	}
	cg.paramNodes = append(append([]*G.Node{}, cg.ws...), cg.bs...)
	if _, err = G.Grad(cg.loss, cg.paramNodes...); err != nil {
		t.Fatal(err)
	}
	return cg
}

func (cg *convGraph) machine() G.VM {
	return G.NewTapeMachine(cg.g, G.BindDualValues(cg.paramNodes...))
}

// grads returns copies of the parameter gradients and zeroes the machine's
// accumulators, as a solver step would.
func (cg *convGraph) grads(t testing.TB) [][]float64 {
	t.Helper()
	var gs [][]float64
	for _, n := range cg.paramNodes {
		g, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, slices.Clone(g.Data().([]float64)))
		g.(*tensor.Dense).Zero()
	}
	return gs
}

// TestConvGraph: through a tape machine, the op yields exactly the direct
// kernel's output and gradients, and a rerun with new inputs and seed
// matches a fresh kernel again.
func TestConvGraph(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.9}
	p := newConvProblem(spec, 5, 9)
	cg := newConvGraph(t, p)
	vm := cg.machine()
	defer vm.Close()
	for step, seed := range []uint64{5, 6} {
		if step > 0 {
			q := newConvProblem(spec, 5, 10)
			copy(cg.tx.Float64s(), q.x)
			copy(cg.tr.Float64s(), q.r)
			for l := range spec.Blocks {
				copy(cg.tws[l].Float64s(), q.ws[l])
				copy(cg.tbs[l].Float64s(), q.bs[l])
			}
			p = q
			vm.Reset()
		}
		cg.net.SetStep(seed, true)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		gs := cg.grads(t)
		out, gws, gbs := p.run(t, newConvKernelPrec(t, spec, false), seed, true)
		if !slices.Equal(cg.out.Value().Data().([]float64), out) {
			t.Errorf("step %d: graph output differs from the kernel's", step)
		}
		for l := range spec.Blocks {
			if !slices.Equal(gs[l], gws[l]) || !slices.Equal(gs[spec.Blocks+l], gbs[l]) {
				t.Errorf("step %d: block %d gradients differ from the kernel's", step, l)
			}
		}
	}
}

// TestConvGraphGradFD checks the graph's float64 gradients against finite
// differences of its loss.
func TestConvGraphGradFD(t *testing.T) {
	c := convSpecs[0]
	p := newConvProblem(c.spec, c.N, 11)
	cg := newConvGraph(t, p)
	cg.op.kern.f64, cg.op.kern.path = true, convPathWinograd
	cg.net.SetStep(3, true)
	vm := cg.machine()
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	gs := cg.grads(t)
	f := func() float64 {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return cg.loss.Value().Data().(float64)
	}
	vals := make([][]float64, 0, 2*c.spec.Blocks)
	for _, tw := range cg.tws {
		vals = append(vals, tw.Float64s())
	}
	for _, tb := range cg.tbs {
		vals = append(vals, tb.Float64s())
	}
	for i, v := range vals {
		fd := make([]float64, len(v))
		const h = 1e-6
		for j := range v {
			old := v[j]
			v[j] = old + h
			up := f()
			v[j] = old - h
			down := f()
			v[j] = old
			fd[j] = (up - down) / (2 * h)
		}
		if e := convRelErr(gs[i], fd); e > 1e-7 {
			t.Errorf("parameter %d: relative error %g vs finite differences", i, e)
		}
	}
}

func TestConvApplyErrors(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 6, Width: 6, Blocks: 2, Filters: 4, Keep: 0.9}
	net, err := NewConvNet(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	x := G.NewMatrix(g, G.Float64, G.WithShape(3, 36), G.WithName("x"))
	x32 := G.NewMatrix(g, G.Float32, G.WithShape(3, 36), G.WithName("x32"))
	xBad := G.NewMatrix(g, G.Float64, G.WithShape(3, 35), G.WithName("xBad"))
	w0 := G.NewMatrix(g, G.Float64, G.WithShape(4, 9), G.WithName("w0"))
	w1 := G.NewMatrix(g, G.Float64, G.WithShape(4, 36), G.WithName("w1"))
	b := G.NewVector(g, G.Float64, G.WithShape(4), G.WithName("b"))
	bBad := G.NewVector(g, G.Float64, G.WithShape(5), G.WithName("bBad"))
	for _, c := range []struct {
		name   string
		x      *G.Node
		ws, bs []*G.Node
		ok     bool
	}{
		{"ok", x, []*G.Node{w0, w1}, []*G.Node{b, b}, true},
		{"float32", x32, []*G.Node{w0, w1}, []*G.Node{b, b}, false},
		{"x width", xBad, []*G.Node{w0, w1}, []*G.Node{b, b}, false},
		{"weight shape", x, []*G.Node{w1, w1}, []*G.Node{b, b}, false},
		{"bias shape", x, []*G.Node{w0, w1}, []*G.Node{b, bBad}, false},
		{"blocks", x, []*G.Node{w0}, []*G.Node{b}, false},
		{"nil", nil, []*G.Node{w0, w1}, []*G.Node{b, b}, false},
	} {
		out, err := net.Apply(c.x, c.ws, c.bs)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if !out.Shape().Eq(tensor.Shape{3, spec.OutDim()}) {
				t.Errorf("%s: output shape %v", c.name, out.Shape())
			}
		} else if err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
