package engine

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/testutil"
)

// smallConfig is a model small enough for finite differences over the whole
// graph, with every piece of the variant present.
func smallConfig(variant string) Config {
	c := sineConfig(variant)
	c.EmbedHidden = []int{6, 5}
	c.InferHidden, c.PriorHidden, c.FlowHidden, c.Bases = 4, 4, 6, 8
	c.MetaBatch, c.Shot, c.Query = 3, 3, 4
	c.KLWeight = 0.3 // large, so the KL's gradient is visible next to the MSE's
	if c.FlowLayers > 0 {
		c.FlowLayers = 2
	}
	return c
}

// The gradient of the whole loss — embedding, inference network, LSTM,
// reparametrization, flows, features, KRR, prior network and KL composed by
// gorgonia — against central finite differences, for every variant and the
// unidirectional LSTM switch.
func TestModelGradientMatchesFiniteDifferences(t *testing.T) {
	cases := map[string]func(*Config){}
	for _, v := range Variants {
		cases[v] = nil
	}
	cases["vrf+lstm"] = func(c *Config) { c.Context = ContextLSTM }
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			v := name
			if mut != nil {
				v = "vrf+ctx"
			}
			cfg := smallConfig(v)
			if mut != nil {
				mut(&cfg)
			}
			m, err := NewModel(cfg, sineLike{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkModelFD(t, m, rand.New(rand.NewPCG(11, 0)))
		})
	}
}

// randomizeModel gives every zero parameter (the flow's output layer starts
// at zero, which would hide its paths) and, with context, the carried LSTM
// state random values.
func randomizeModel(m *Model, rng *rand.Rand) {
	for _, p := range m.Params.List {
		for i := range p.Data {
			if p.Data[i] == 0 {
				p.Data[i] = 0.2 * rng.NormFloat64()
			}
		}
	}
	if m.Cfg.Context != ContextNone {
		for k := 0; k < 2; k++ {
			for i := range m.State.H[k] {
				m.State.H[k][i], m.State.C[k][i] = 0.3*rng.NormFloat64(), 0.3*rng.NormFloat64()
			}
		}
	}
}

// useFloat64 switches a graph's float32 kernels (flow, convolutions) to
// their float64 twins, for finite differences.
func useFloat64(gr *graph) {
	if gr.flow != nil {
		gr.flow.Kernel().UseFloat64()
	}
	for _, n := range gr.g.AllNodes() {
		switch op := n.Op().(type) {
		case *ops.ConvOp:
			op.Kernel().UseFloat64()
		case *ops.ResNetOp:
			op.Kernel().UseFloat64()
		}
	}
}

// checkModelFD randomizes m and compares the gradient of its one-graph
// training loss (float32 kernels switched to their float64 twins) with
// central finite differences at a few coordinates of every parameter.
func checkModelFD(t *testing.T, m *Model, rng *rand.Rand) {
	t.Helper()
	randomizeModel(m, rng)
	in := &m.bufs[0]
	m.prepare(0, in, nil)
	sh := m.batchShape(&in.batch, m.Src)
	sh.train = true
	gr, err := m.graph(sh)
	if err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		useFloat64(gr)
		st := m.State.clone()
		if err := m.run(gr, &in.batch, &in.noise, &st, nil); err != nil {
			t.Fatal(err)
		}
		return scalarOf(gr.r.lossV)
	}
	loss()
	grads, err := gr.grads(nil, len(m.Params.List))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for pi, p := range m.Params.List {
		for n := 0; n < 3 && n < p.Size(); n++ {
			j := rng.IntN(p.Size())
			num := testutil.CentralDiff(p.Data, j, loss)
			if an := grads[pi][j]; math.Abs(num-an) > 1e-5*math.Max(1, math.Abs(num)) {
				t.Errorf("%s[%d]: analytic %.9g, finite difference %.9g", p.Name, j, an, num)
			}
			checked++
		}
	}
	// The finite-difference runs accumulated into the gradients; leave
	// the machine clean.
	gr.grads(grads, len(m.Params.List))
	if checked == 0 {
		t.Fatal("no parameters checked")
	}
}

func TestDisplaySnapshots(t *testing.T) {
	for _, tc := range []struct {
		variant string
		steps   int // entries in OmegaSteps
	}{{"rbf", 0}, {"rff", 1}, {"vrf+ctx", 1}, {"metakernel", 5}} {
		t.Run(tc.variant, func(t *testing.T) {
			cfg := tinyConfig(tc.variant, 14)
			var disp []*Display
			var snaps int
			_, err := Run(context.Background(), cfg, sineLike{}, RunOptions{ReportEvery: 1 << 40, DisplayDraws: 4, SkipEval: true},
				ObserverFunc(func(s Snapshot) error {
					snaps++
					if s.Display != nil {
						disp = append(disp, s.Display)
					}
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			// Throttled: with a huge ReportEvery only display snapshots
			// (first step, every 7, last) get through.
			if snaps != 3 || len(disp) != 3 {
				t.Fatalf("want 3 snapshots, all with a display; got %d snapshots, %d displays", snaps, len(disp))
			}
			d := disp[len(disp)-1]
			if d.Iter != 14 || len(d.OmegaSteps) != tc.steps {
				t.Fatalf("display at %d with %d ω steps, want 14 and %d", d.Iter, len(d.OmegaSteps), tc.steps)
			}
			for _, w := range d.OmegaSteps {
				if len(w) != cfg.Bases*cfg.FeatureDim() {
					t.Fatalf("ω step has %d values, want D·d = %d", len(w), cfg.Bases*cfg.FeatureDim())
				}
			}
			if len(d.GridX) != displayGrid || len(d.PredMean) != displayGrid || len(d.Truth) != displayGrid || len(d.SupportX) != cfg.Shot {
				t.Fatalf("display sizes: grid %d, mean %d, truth %d, support %d", len(d.GridX), len(d.PredMean), len(d.Truth), len(d.SupportX))
			}
			spread := 0.0
			for _, s := range d.PredSD {
				if s < 0 || math.IsNaN(s) {
					t.Fatalf("bad spread %v", s)
				}
				spread += s
			}
			if tc.variant == "rbf" && spread != 0 {
				t.Fatalf("the RBF kernel has no randomness, spread %v", spread)
			}
			if tc.variant != "rbf" && spread == 0 {
				t.Fatal("random bases but no spread over draws")
			}
			if math.IsNaN(d.TaskMSE) {
				t.Fatal("display MSE is NaN")
			}
			// The same display task in every snapshot.
			if disp[0].Truth[10] != d.Truth[10] {
				t.Fatal("display task changed during the run")
			}
		})
	}
}

func TestOptimizers(t *testing.T) {
	p := []*Param{{Name: "w", Shape: []int{2}, Data: []float64{1, -2}}}
	g := [][]float64{{0.5, -4}}
	adam := NewOptimizer(Config{Optimizer: "adam", LR: 0.1}, p)
	if _, err := adam.Step(p, g); err != nil {
		t.Fatal(err)
	}
	// The first Adam step moves every coordinate by lr against its sign.
	if math.Abs(p[0].Data[0]-0.9) > 1e-6 || math.Abs(p[0].Data[1]+1.9) > 1e-6 {
		t.Fatalf("after one Adam step: %v", p[0].Data)
	}
	p[0].Data = []float64{1, -2}
	sgd := NewOptimizer(Config{Optimizer: "sgd", LR: 0.1, Momentum: 0.5, ClipNorm: 1}, p)
	n, _ := sgd.Step(p, g)
	if math.Abs(n-math.Hypot(0.5, 4)) > 1e-12 {
		t.Fatalf("gradient norm %v", n)
	}
	s := 1 / math.Hypot(0.5, 4) // clipped to norm 1
	want := []float64{1 - 0.1*0.5*s, -2 + 0.1*4*s}
	for i := range want {
		if math.Abs(p[0].Data[i]-want[i]) > 1e-12 {
			t.Fatalf("after clipped SGD: %v, want %v", p[0].Data, want)
		}
	}
	sgd.Step(p, g) // momentum: velocity = 0.5·v + g
	want = []float64{want[0] - 0.1*1.5*0.5*s, want[1] + 0.1*1.5*4*s}
	for i := range want {
		if math.Abs(p[0].Data[i]-want[i]) > 1e-12 {
			t.Fatalf("after momentum step: %v, want %v", p[0].Data, want)
		}
	}
	before := append([]float64(nil), p[0].Data...)
	if _, err := sgd.Step(p, [][]float64{{math.NaN(), 0}}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("NaN gradient: %v", err)
	}
	if p[0].Data[0] != before[0] || p[0].Data[1] != before[1] {
		t.Fatal("a NaN gradient changed the parameters")
	}
}

// Config.PsiWeightDecay shrinks ψ's weights, and only them, by 1 − lr·wd a
// step before the update (here a zero gradient, so Adam moves nothing
// else); without it the optimizer has no decay state at all.
func TestPsiWeightDecay(t *testing.T) {
	names := []string{"conv0.w", "conv0.b", "embed.W1", "embed.b1", "resnet.layer1.0.conv1.w", "resnet.layer1.0.conv1.bn.gamma", "q.Wmu", "flow.theta", "loglambda"}
	decayed := map[string]bool{"conv0.w": true, "embed.W1": true, "resnet.layer1.0.conv1.w": true}
	var ps []*Param
	var gs [][]float64
	for _, n := range names {
		ps = append(ps, &Param{Name: n, Shape: []int{2}, Data: []float64{1, -2}})
		gs = append(gs, []float64{0, 0})
	}
	cfg := Config{Optimizer: "adam", LR: 0.1, PsiWeightDecay: 0.5, FlowLRScale: 0.1}
	for _, kind := range []string{"adam", "sgd"} {
		cfg.Optimizer = kind
		for _, p := range ps {
			p.Data = []float64{1, -2}
		}
		o := NewOptimizer(cfg, ps)
		o.LR = 0.2 // as a schedule sets it
		if _, err := o.Step(ps, gs); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			f := 1.0
			if decayed[p.Name] {
				f = 1 - 0.2*0.5
			}
			if p.Data[0] != f || p.Data[1] != -2*f {
				t.Errorf("%s: %s after one step: %v, want ×%v", kind, p.Name, p.Data, f)
			}
		}
	}
	if o := NewOptimizer(Config{Optimizer: "adam", LR: 0.1}, ps); o.Decay != nil {
		t.Errorf("no weight decay set, decay state %v", o.Decay)
	}
	for _, wd := range []float64{-1, math.NaN(), 1 / 1e-3} {
		c := tinyConfig("vrf", 10)
		c.LR, c.PsiWeightDecay = 1e-3, wd
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "psi_weight_decay") {
			t.Errorf("psi_weight_decay %v: %v", wd, err)
		}
	}
}

// SGD with momentum and clipping trains the sine model too: 60 steps
// bring the evaluation MSE on fixed tasks well below the untrained
// model's (2.58 → 1.83).
func TestSGDTrains(t *testing.T) {
	cfg := tinyConfig("vrf", 60)
	cfg.Optimizer, cfg.LR, cfg.ClipNorm = "sgd", 0.001, 5
	m, err := NewModel(cfg, sineLike{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	opt := NewOptimizer(cfg, m.Params.List)
	eval := func() float64 {
		res, err := m.Evaluate(50, 20, 1, 7)
		if err != nil {
			t.Fatal(err)
		}
		return res.Mean
	}
	before := eval()
	for i := range cfg.Iters {
		if _, err := m.Step(i, opt); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if after := eval(); !(after < 0.85*before) {
		t.Fatalf("evaluation MSE %.4f after %d SGD steps, %.4f before: not trained", after, cfg.Iters, before)
	}
}

// Step 0 of the display's bases is the Gaussian draw ω₀ = μ + σ⊙ε itself.
func TestDisplayStepZeroIsTheGaussianDraw(t *testing.T) {
	cfg := tinyConfig("metakernel", 3)
	m, err := NewModel(cfg, sineLike{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := m.Display(0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	gr, _ := m.graph(shape{T: 1, NS: cfg.Shot, NQ: displayGrid})
	w0 := dataOf(gr.r.omega0V)
	for i, v := range d.OmegaSteps[0] {
		if math.Abs(v-w0[i]) > 1e-5*math.Max(1, math.Abs(v)) {
			t.Fatalf("step 0 value %d: %v, Gaussian draw %v", i, v, w0[i])
		}
	}
}
