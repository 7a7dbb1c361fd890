package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The staged training step (summaries, LSTM, task stages, LSTM backward,
// seeded summaries)
// computes the same loss, statistics, gradients and carried state as the
// whole model in one graph, whose gradient the finite-difference test
// checks. Five tasks split 2 + 3, so the stages' shares differ.
func TestStagedStepMatchesOneGraph(t *testing.T) {
	cases := map[string]func(*Config){}
	for _, v := range Variants {
		cases[v] = nil
	}
	cases["vrf+lstm"] = func(c *Config) { c.Context = ContextLSTM }
	for _, v := range Variants {
		cases["classify/"+v] = nil
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			v, classify := strings.CutPrefix(name, "classify/")
			if mut != nil {
				v = "vrf+ctx"
			}
			cfg := smallConfig(v)
			var src TaskSource = sineLike{}
			if classify {
				// Without dropout: the stages' nets draw their own masks.
				cfg = classConfig(v, 1)
				src = blobs{way: 3, side: 7}
			}
			cfg.MetaBatch = 5
			if mut != nil {
				mut(&cfg)
			}
			m, err := NewModel(cfg, src)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			randomizeModel(m, rand.New(rand.NewPCG(21, 0)))
			sh := shape{T: cfg.MetaBatch, NS: cfg.SupportPoints(), NQ: cfg.QueryPoints(), train: true}
			one, err := m.graph(sh)
			if err != nil {
				t.Fatal(err)
			}
			st, err := m.staged(sh)
			if err != nil {
				t.Fatal(err)
			}
			if want := cfg.Context != ContextNone && !classify; (st.mlp != nil) != want {
				t.Fatalf("direct MLP summaries: %v, want %v", st.mlp != nil, want)
			}
			if len(st.tasks) != 2 || st.tasks[0].T != 2 || st.tasks[1].T != 3 {
				t.Fatalf("task stages %d, want tasks 2 + 3", len(st.tasks))
			}
			// The flow's float32 sums over tasks round differently when the
			// tasks are split; compare its float64 instantiation.
			for _, gs := range [][]*graph{{one}, st.tasks, st.sums, st.seeded} {
				for _, gr := range gs {
					useFloat64(gr)
				}
			}
			in := &m.bufs[0]
			m.prepare(3, in, nil)

			s1 := m.State.clone()
			if err := m.run(one, &in.batch, &in.noise, &s1, nil); err != nil {
				t.Fatal(err)
			}
			want, err := one.grads(nil, len(m.Params.List))
			if err != nil {
				t.Fatal(err)
			}
			wantStats := StepStats{Loss: scalarOf(one.r.lossV), Data: scalarOf(one.r.dataV), Lambda: scalarOf(one.r.lambdaV)}
			if one.r.klV != nil {
				wantStats.KL = scalarOf(one.r.klV)
			}

			// Twice: a second run must not see anything left over from the
			// first (gorgonia accumulates gradients across runs).
			for run := 0; run < 2; run++ {
				s2 := m.State.clone()
				var got [][]float64
				stats, err := st.run(m.Params, &in.batch, &in.noise, &s2, nil, &got)
				if err != nil {
					t.Fatal(err)
				}
				close := func(what string, a, b float64) {
					t.Helper()
					if math.Abs(a-b) > 1e-10*math.Max(1, math.Abs(b)) {
						t.Errorf("run %d: %s = %.15g staged, %.15g in one graph", run, what, a, b)
					}
				}
				close("loss", stats.Loss, wantStats.Loss)
				close("data", stats.Data, wantStats.Data)
				close("kl", stats.KL, wantStats.KL)
				close("lambda", stats.Lambda, wantStats.Lambda)
				for i, p := range m.Params.List {
					if len(got[i]) != len(want[i]) || len(want[i]) == 0 {
						t.Fatalf("%s: %d gradient entries staged, %d in one graph", p.Name, len(got[i]), len(want[i]))
					}
					for j := range want[i] {
						close(p.Name, got[i][j], want[i][j])
					}
				}
				for k := 0; k < 2; k++ {
					for i := range s1.H[k] {
						close("lstm h", s2.H[k][i], s1.H[k][i])
						close("lstm c", s2.C[k][i], s1.C[k][i])
					}
				}
			}
		})
	}
}

// The hand-written backward of the MLP summaries against central finite
// differences of Σ s̄⊙R.
func TestMLPSummaryGradients(t *testing.T) {
	cfg := smallConfig("vrf+ctx")
	m, err := NewModel(cfg, sineLike{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(31, 0))
	for _, p := range m.Params.List {
		for i := range p.Data {
			p.Data[i] = 0.5 * rng.NormFloat64()
		}
	}
	s := newMLPSummary(cfg, m.Params, 1, 1)
	T, n, H := 3, 4, cfg.InferHidden
	xs, ys, R := make([]float64, T*n), make([]float64, T*n), make([]float64, T*H)
	for i := range xs {
		xs[i], ys[i] = 3*rng.NormFloat64(), rng.NormFloat64()
	}
	for i := range R {
		R[i] = rng.NormFloat64()
	}
	sbar := make([]float64, T*H)
	loss := func() float64 {
		s.forward(m.Params, xs, ys, T, n, sbar)
		var l float64
		for i, v := range sbar {
			l += v * R[i]
		}
		return l
	}
	loss()
	grads := make([][]float64, len(m.Params.List))
	s.backward(m.Params, xs, T, n, R, grads)
	checked := 0
	for _, idx := range append(append(append(append([]int{}, s.embedW...), s.embedB...), s.inferW...), s.inferB...) {
		p := m.Params.List[idx]
		for j := range p.Data {
			x := p.Data[j]
			const h = 1e-6
			p.Data[j] = x + h
			fp := loss()
			p.Data[j] = x - h
			fm := loss()
			p.Data[j] = x
			num := (fp - fm) / (2 * h)
			if an := grads[idx][j]; math.Abs(num-an) > 1e-6*math.Max(1, math.Abs(num)) {
				t.Errorf("%s[%d]: analytic %.9g, finite difference %.9g", p.Name, j, an, num)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}
