package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestReparamGradients(t *testing.T) {
	fdCheckOp(t, "reparam", [][]int{{2, 3}, {2, 3}, {2, 4, 3}}, []bool{true, true, false}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return Reparam(in[0], in[1], in[2]) })
}

func TestScaleShiftGradients(t *testing.T) {
	fdCheckOp(t, "scaleshift", [][]int{{2, 3}, {2, 3}, {2, 4, 3}}, []bool{true, true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return ScaleShift(in[0], in[1], in[2]) })
	// On a flow output (T,D,d+1) it reads the first d columns in place; the
	// last column gets no gradient from it.
	fdCheckOp(t, "scaleshift(flow out)", [][]int{{2, 3}, {2, 3}, {2, 4, 4}}, []bool{true, true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return ScaleShift(in[0], in[1], in[2]) })
}

func TestFlowLogDetMeanGradients(t *testing.T) {
	fdCheckOp(t, "flowlogdetmean", [][]int{{3, 5, 4}}, []bool{true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return FlowLogDetMean(in[0]) })
}

// The in-place readers equal gorgonia's slices of the flow output.
func TestFlowOutputReadersMatchSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := G.NewGraph()
	T, D, d := 2, 4, 3
	val := func(s ...int) *tensor.Dense {
		x := tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float64))
		for i := range x.Data().([]float64) {
			x.Data().([]float64)[i] = rng.NormFloat64()
		}
		return x
	}
	out := G.NewTensor(g, G.Float64, 3, G.WithShape(T, D, d+1), G.WithValue(val(T, D, d+1)))
	mu := G.NewTensor(g, G.Float64, 2, G.WithShape(T, d), G.WithValue(val(T, d)))
	lv := G.NewTensor(g, G.Float64, 2, G.WithShape(T, d), G.WithValue(val(T, d)))
	a := G.Must(ScaleShift(mu, lv, out))
	b := G.Must(ScaleShift(mu, lv, G.Must(G.Slice(out, nil, nil, G.S(0, d)))))
	c := G.Must(FlowLogDetMean(out))
	e := G.Must(G.Mean(G.Must(G.Slice(out, nil, nil, G.S(d))), 1))
	var av, bv, cv, ev G.Value
	G.Read(a, &av)
	G.Read(b, &bv)
	G.Read(c, &cv)
	G.Read(e, &ev)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]G.Value{{av, bv}, {cv, ev}} {
		x, y := dataOf(p[0]), dataOf(p[1])
		if len(x) != len(y) {
			t.Fatalf("lengths %d, %d", len(x), len(y))
		}
		for i := range x {
			if math.Abs(x[i]-y[i]) > 1e-14 {
				t.Fatalf("element %d: %v vs slice %v", i, x[i], y[i])
			}
		}
	}
}

func TestGaussKLGradients(t *testing.T) {
	fdCheckOp(t, "gausskl", [][]int{{2, 3}, {2, 3}, {2, 4, 3}, {2, 4, 3}}, []bool{true, true, true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return GaussKL(in[0], in[1], in[2], in[3]) })
}

func TestGaussLogDensityGradients(t *testing.T) {
	fdCheckOp(t, "gausslogdensity", [][]int{{2, 5, 3}, {2, 4, 3}, {2, 4, 3}}, []bool{true, true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return GaussLogDensity(in[0], in[1], in[2]) })
}

// The closed-form KL and the Monte Carlo estimate built from Reparam and
// GaussLogDensity must agree when there is no flow: a check that both
// parametrize the Gaussian the same way (log-variance everywhere).
func TestGaussKLMatchesMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0))
	const T, D, m, d = 1, 200000, 2, 3
	mq := []float64{0.3, -0.2, 0.5}
	lq := []float64{-0.4, 0.2, 0.1}
	mp := make([]float64, m*d)
	lp := make([]float64, m*d)
	for i := range mp {
		mp[i], lp[i] = rng.NormFloat64()*0.5, rng.NormFloat64()*0.3
	}
	eps := make([]float64, T*D*d)
	for i := range eps {
		eps[i] = rng.NormFloat64()
	}
	g := G.NewGraph()
	mk := func(name string, x []float64, s ...int) *G.Node {
		return G.NewTensor(g, G.Float64, len(s), G.WithShape(s...), G.WithName(name), G.WithValue(tensor.New(tensor.WithShape(s...), tensor.WithBacking(x))))
	}
	MQ, LQ, MP, LP, E := mk("mq", mq, T, d), mk("lq", lq, T, d), mk("mp", mp, T, m, d), mk("lp", lp, T, m, d), mk("e", eps, T, D, d)
	kl := G.Must(GaussKL(MQ, LQ, MP, LP))
	w := G.Must(Reparam(MQ, LQ, E))
	lpd := G.Must(GaussLogDensity(w, MP, LP))
	var klV, lpV G.Value
	G.Read(kl, &klV)
	G.Read(lpd, &lpV)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	// E_q[log q] = −½Σ(1 + log 2π + lq).
	var hq float64
	for _, l := range lq {
		hq += -0.5 * (1 + log2Pi + l)
	}
	for i := 0; i < m; i++ {
		want := dataOf(klV)[i]
		got := hq - dataOf(lpV)[i]
		if math.Abs(got-want) > 0.02*math.Max(1, want) {
			t.Errorf("query %d: Monte Carlo KL %.4f, closed form %.4f", i, got, want)
		}
	}
}

func TestBandwidthGradients(t *testing.T) {
	fdCheckOp(t, "bandwidth", [][]int{{3, 4, 2}}, []bool{true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return Bandwidth(in[0]) })
}

// The RBF kernel with its bandwidth computed from the same features: the
// gradient must include the path through σ.
func TestRBFWithBandwidthGradients(t *testing.T) {
	fdCheckOp(t, "rbf+bandwidth", [][]int{{2, 4, 3}, {2, 5, 3}}, []bool{true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) {
			bw, err := Bandwidth(in[0])
			if err != nil {
				return nil, err
			}
			return RBFKernel(nil, in[1], in[0], bw)
		})
}
