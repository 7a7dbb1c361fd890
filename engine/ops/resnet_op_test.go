package ops

import (
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// resGraph is loss = Σ ResNet(x) ⊙ R in a fresh graph.
type resGraph struct {
	g      *G.ExprGraph
	net    *ResNet
	out    *G.Node
	loss   *G.Node
	op     *ResNetOp
	params []*G.Node
	vm     G.VM
}

func newResGraph(t testing.TB, p *resProblem) *resGraph {
	t.Helper()
	s := p.spec
	rg := &resGraph{g: G.NewGraph()}
	var err error
	if rg.net, err = NewResNet(nil, s, p.stats); err != nil {
		t.Fatal(err)
	}
	n := p.lay.Images()
	x := G.NewMatrix(rg.g, G.Float64, G.WithShape(n, s.InDim()), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(n, s.InDim()), tensor.WithBacking(p.x))))
	for i, ps := range s.Params() {
		rg.params = append(rg.params, G.NewTensor(rg.g, G.Float64, len(ps.Shape), G.WithShape(ps.Shape...), G.WithName(ps.Name),
			G.WithValue(tensor.New(tensor.WithShape(ps.Shape...), tensor.WithBacking(p.params[i])))))
	}
	r := G.NewMatrix(rg.g, G.Float64, G.WithShape(n, s.OutDim()), G.WithName("R"),
		G.WithValue(tensor.New(tensor.WithShape(n, s.OutDim()), tensor.WithBacking(p.r))))
	if rg.out, err = rg.net.Apply(x, rg.params, p.lay); err != nil {
		t.Fatal(err)
	}
	rg.op = rg.out.Op().(*ResNetOp)
	rg.loss = G.Must(G.Sum(G.Must(G.HadamardProd(rg.out, r))))
	if _, err := G.Grad(rg.loss, rg.params...); err != nil {
		t.Fatal(err)
	}
	rg.vm = G.NewTapeMachine(rg.g, G.BindDualValues(rg.params...))
	return rg
}

// step runs the machine and returns copies of the output and gradients,
// zeroing the gradient accumulators as a solver step would.
func (rg *resGraph) step(t testing.TB) (out []float64, grads [][]float64) {
	t.Helper()
	rg.vm.Reset()
	if err := rg.vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, n := range rg.params {
		g, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, slices.Clone(g.Data().([]float64)))
		g.(*tensor.Dense).Zero()
	}
	return slices.Clone(rg.out.Value().Data().([]float64)), grads
}

// TestResNetGraph: through a tape machine the op yields exactly the
// kernel's outputs and gradients, in each mode; FoldRunning folds the
// training runs only, once each.
func TestResNetGraph(t *testing.T) {
	s := ResNetSpec{Channels: 3, Height: 16, Width: 16, Widths: [4]int{4, 4, 8, 8}, Out: 5}
	lay := BNLayout{Episodes: 2, Support: 3, Query: 2}
	p := newResProblem(s, lay, 8)
	rg := newResGraph(t, p)
	defer rg.vm.Close()
	for _, mode := range []BNMode{BNTrain, BNEpisode, BNRunning} {
		q := newResProblem(s, lay, 8)
		q.stats = cloneStats(p.stats)
		rg.net.SetMode(mode)
		out, grads := rg.step(t)
		wout, wgrads, _ := q.run(t, newResKernel(t, s, false), mode)
		if !slices.Equal(out, wout) {
			t.Errorf("%v: graph output differs from the kernel's", mode)
		}
		for i := range grads {
			if !slices.Equal(grads[i], wgrads[i]) {
				t.Errorf("%v: gradient of %s differs from the kernel's", mode, s.Params()[i].Name)
			}
		}
		before := cloneStats(p.stats)
		if err := rg.net.FoldRunning(); err != nil {
			t.Fatal(err)
		}
		if changed := !statsEqual(before, p.stats); changed != (mode == BNTrain) {
			t.Errorf("%v: folding changed the running statistics: %v", mode, changed)
		}
		if err := rg.net.FoldRunning(); err != nil {
			t.Fatal(err)
		}
		if mode == BNTrain {
			k := newResKernel(t, s, false)
			q.forward(t, k, BNTrain)
			if err := k.FoldRunning(q.stats); err != nil {
				t.Fatal(err)
			}
			if !statsEqual(q.stats, p.stats) {
				t.Error("the net's fold differs from the kernel's, or folded twice")
			}
		}
	}
}

// TestResNetGraphGradFD checks the op's float64 gradients through a real
// graph and tape machine against finite differences (fdCheckOp).
func TestResNetGraphGradFD(t *testing.T) {
	s := ResNetSpec{Channels: 2, Height: 8, Width: 8, Widths: [4]int{2, 2, 3, 3}, Out: 3}
	lay := BNLayout{Episodes: 2, Support: 3, Query: 1}
	shapes := [][]int{{lay.Images(), s.InDim()}}
	diff := []bool{false}
	for _, ps := range s.Params() {
		shapes, diff = append(shapes, ps.Shape), append(diff, true)
	}
	init := func(i int, x []float64, rng *rand.Rand) {
		for j := range x {
			x[j] = rng.NormFloat64()
			if i > 0 && (i-1)%3 == 1 && i < len(shapes)-2 { // γ
				x[j] = 0.5 + rng.Float64()
			}
		}
	}
	fdCheckOp(t, "resnet", shapes, diff, init, func(in []*G.Node) (*G.Node, error) {
		net, err := NewResNet(nil, s, nil)
		if err != nil {
			return nil, err
		}
		out, err := net.Apply(in[0], in[1:], lay)
		if err == nil {
			out.Op().(*ResNetOp).Kernel().UseFloat64()
		}
		return out, err
	})
}

func TestResNetApplyErrors(t *testing.T) {
	s := resTiny
	if _, err := NewResNet(nil, s, NewResNetStats(s)[1:]); err == nil {
		t.Error("short running statistics: no error")
	}
	bad := NewResNetStats(s)
	bad[3].Var = bad[3].Var[1:]
	if _, err := NewResNet(nil, s, bad); err == nil {
		t.Error("short running variances: no error")
	}
	net, err := NewResNet(nil, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := G.NewGraph()
	lay := BNBatch(3)
	x := G.NewMatrix(g, G.Float64, G.WithShape(3, s.InDim()), G.WithName("x"))
	x32 := G.NewMatrix(g, G.Float32, G.WithShape(3, s.InDim()), G.WithName("x32"))
	var ps []*G.Node
	for _, p := range s.Params() {
		ps = append(ps, G.NewTensor(g, G.Float64, len(p.Shape), G.WithShape(p.Shape...), G.WithName(p.Name)))
	}
	swapped := slices.Clone(ps)
	swapped[0], swapped[3] = swapped[3], swapped[0]
	for _, c := range []struct {
		name string
		x    *G.Node
		ps   []*G.Node
		lay  BNLayout
		ok   bool
	}{
		{"ok", x, ps, lay, true},
		{"float32", x32, ps, lay, false},
		{"images", x, ps, BNBatch(4), false},
		{"layout", x, ps, BNLayout{Episodes: 1, Query: 3}, false},
		{"params", x, ps[1:], lay, false},
		{"shapes", x, swapped, lay, false},
		{"nil", nil, ps, lay, false},
	} {
		out, err := net.Apply(c.x, c.ps, c.lay)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if !out.Shape().Eq(tensor.Shape{3, s.OutDim()}) {
				t.Errorf("%s: output shape %v", c.name, out.Shape())
			}
		} else if err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
