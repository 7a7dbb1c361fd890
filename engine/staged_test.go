package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
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
			cfg, src := stepCase(v, classify)
			if mut != nil {
				mut(&cfg)
			}
			m, err := NewModel(cfg, src)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			randomizeModel(m, rand.New(rand.NewPCG(21, 0)))
			one, st := trainGraphs(t, m)
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

// stepCase is a five-task meta-batch of the variant, sine-like or 3-way
// classification (without dropout: the stages' nets draw their own masks).
func stepCase(variant string, classify bool) (Config, task.Source) {
	cfg := smallConfig(variant)
	var src task.Source = sineLike{}
	if classify {
		cfg = classConfig(variant, 1)
		src = blobs{way: 3, side: 7}
	}
	cfg.MetaBatch = 5
	return cfg, src
}

// trainGraphs builds m's training step both as one graph and staged.
func trainGraphs(t *testing.T, m *Model) (*graph, *staged) {
	t.Helper()
	c := m.Cfg
	sh := shape{T: c.MetaBatch, NS: c.SupportPoints(), NQ: c.QueryPoints(), train: true}
	one, err := m.graph(sh)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.staged(sh)
	if err != nil {
		t.Fatal(err)
	}
	return one, st
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
			num := testutil.CentralDiff(p.Data, j, loss)
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

// Ops hand out op-owned output storage that the next run overwrites
// (ownedTensor). A run on batch B must give bit for bit what a fresh model
// gives on B, whatever ran before it, in both the one-graph and the staged
// form: a kernel that relied on freshly zeroed output, or a stale cache,
// would differ here.
func TestRunsDoNotReadStaleOutputs(t *testing.T) {
	for _, classify := range []bool{false, true} {
		for _, v := range Variants {
			name := v
			if classify {
				name = "classify/" + v
			}
			t.Run(name, func(t *testing.T) {
				cfg, src := stepCase(v, classify)
				type result struct {
					stats StepStats
					grads [][]float64
					loss  float64
					one   [][]float64
				}
				runB := func(m *Model, warm bool) result {
					one, st := trainGraphs(t, m)
					a, b := &m.bufs[0], &m.bufs[1]
					m.prepare(1, a, nil)
					m.prepare(3, b, nil)
					if warm {
						s := m.State.clone()
						var g [][]float64
						if _, err := st.run(m.Params, &a.batch, &a.noise, &s, nil, &g); err != nil {
							t.Fatal(err)
						}
						s = m.State.clone()
						if err := m.run(one, &a.batch, &a.noise, &s, nil); err != nil {
							t.Fatal(err)
						}
						if _, err := one.grads(nil, len(m.Params.List)); err != nil { // zeroes the accumulators
							t.Fatal(err)
						}
					}
					var r result
					s := m.State.clone()
					if err := m.run(one, &b.batch, &b.noise, &s, nil); err != nil {
						t.Fatal(err)
					}
					r.loss = scalarOf(one.r.lossV)
					var err error
					if r.one, err = one.grads(nil, len(m.Params.List)); err != nil {
						t.Fatal(err)
					}
					s = m.State.clone()
					if r.stats, err = st.run(m.Params, &b.batch, &b.noise, &s, nil, &r.grads); err != nil {
						t.Fatal(err)
					}
					return r
				}
				models := make([]*Model, 2)
				for i := range models {
					m, err := NewModel(cfg, src)
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					randomizeModel(m, rand.New(rand.NewPCG(21, 0)))
					models[i] = m
				}
				want, got := runB(models[0], false), runB(models[1], true)
				if got.loss != want.loss || got.stats != want.stats {
					t.Fatalf("after another run: loss %v, stats %+v; fresh: %v, %+v", got.loss, got.stats, want.loss, want.stats)
				}
				for i, p := range models[0].Params.List {
					for j := range want.grads[i] {
						if got.grads[i][j] != want.grads[i][j] || got.one[i][j] != want.one[i][j] {
							t.Fatalf("%s[%d]: gradient after another run %v (one graph %v), fresh %v (%v)",
								p.Name, j, got.grads[i][j], got.one[i][j], want.grads[i][j], want.one[i][j])
						}
					}
				}
			})
		}
	}
}
