package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
)

// blobs is a synthetic few-shot classification family for the engine's
// tests (datasets imports engine): each task draws way random class
// templates on a tiny image; an example is its template plus noise.
type blobs struct{ way, side int }

func (s blobs) Name() string { return "blobs" }
func (s blobs) InDim() int   { return s.side * s.side }
func (s blobs) OutDim() int  { return s.way }
func (s blobs) Sample(rng *rand.Rand, b *task.Batch) {
	in := s.InDim()
	tmpl := make([]float64, s.way*in)
	fill := func(x, y []float64, rows int) {
		per := rows / s.way
		for r := 0; r < rows; r++ {
			c := r / per
			for k := 0; k < in; k++ {
				x[r*in+k] = tmpl[c*in+k] + 0.5*rng.NormFloat64()
			}
			row := y[r*s.way : (r+1)*s.way]
			clear(row)
			row[c] = 1
		}
	}
	for t := 0; t < b.T; t++ {
		for i := range tmpl {
			tmpl[i] = math.Max(0, rng.NormFloat64())
		}
		fill(b.XS[t*b.NS*in:(t+1)*b.NS*in], b.YS[t*b.NS*s.way:(t+1)*b.NS*s.way], b.NS)
		fill(b.XQ[t*b.NQ*in:(t+1)*b.NQ*in], b.YQ[t*b.NQ*s.way:(t+1)*b.NQ*s.way], b.NQ)
	}
}

// trainSteps trains m for n iterations of its task stream.
func trainSteps(t testing.TB, m *Model, n int) {
	t.Helper()
	opt := NewOptimizer(m.Cfg, m.Params.List)
	var grads [][]float64
	for i := range n {
		if _, err := m.trainStep(i, opt, &grads); err != nil {
			t.Fatal(err)
		}
	}
}

// blobsRun runs cfg on 3-way blobs tasks, validating and testing on the
// same family, into a fresh directory.
func blobsRun(t *testing.T, cfg Config) (dir string, res Result) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "run")
	src := blobs{way: 3, side: 7}
	res, err := Run(context.Background(), cfg, src, RunOptions{Dir: dir, Val: src, Test: src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return dir, res
}

// classConfig is a tiny convolutional classifier for blobs tasks.
func classConfig(variant string, keep float64) Config {
	c := sineConfig(variant)
	c.Conv = &ConvSpec{Channels: 1, Height: 7, Width: 7, Blocks: 2, Filters: 4, Keep: keep}
	c.EmbedHidden = nil
	c.Way, c.Shot, c.Query = 3, 2, 2
	c.InferHidden, c.PriorHidden, c.FlowHidden, c.Bases = 5, 5, 6, 12
	c.InferLayers = 3
	c.MetaBatch = 3
	c.KLWeight = 0.3
	if c.FlowLayers > 0 {
		c.FlowLayers = 2
	}
	return c
}

// The whole classification model (Conv ψ with dropout, prototypes, prior
// over prototypes, logits, cross-entropy) against finite differences.
func TestClassifierGradientMatchesFiniteDifferences(t *testing.T) {
	for _, v := range Variants {
		t.Run(v, func(t *testing.T) {
			cfg := classConfig(v, 0.8)
			m, err := NewModel(cfg, blobs{way: 3, side: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkModelFD(t, m, rand.New(rand.NewPCG(12, 0)))
		})
	}
}

// Training on blobs lifts held-out accuracy well above where it starts
// (chance is 1/3; random features already separate some templates).
func TestClassifierLearns(t *testing.T) {
	cfg := classConfig("metakernel", 0.9)
	cfg.Bases, cfg.InferHidden, cfg.PriorHidden = 32, 16, 16
	cfg.KLWeight = 0.01
	cfg.Iters = 400
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 60, 5, 2
	m, err := NewModel(cfg, blobs{way: 3, side: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	trainSteps(t, m, cfg.Iters)
	after, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("accuracy before %v, after %v", before, after)
	if after.Metric != "accuracy" || after.Mean < before.Mean+0.15 || after.Mean < 0.8 {
		t.Fatalf("accuracy after training %v (before %v), want ≥ 80%% and 15 points better", after, before)
	}
}

// A classification run validates every ValEvery iterations, writes the
// learning curve, keeps the best parameters and tests those.
func TestRunValidatesAndTestsBest(t *testing.T) {
	cfg := classConfig("vrf", 0.9)
	cfg.Iters, cfg.ValEvery, cfg.ValTasks, cfg.LogEvery = 60, 20, 12, 10
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 12, 3, 1
	src := blobs{way: 3, side: 7}
	dir, res := blobsRun(t, cfg)
	data, err := os.ReadFile(filepath.Join(dir, FileVal))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 {
		t.Fatalf("val.jsonl has %d rows, want 3:\n%s", len(lines), data)
	}
	var sum Summary
	b, err := os.ReadFile(filepath.Join(dir, FileSummary))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.EvalCheckpoint != "best" || sum.BestIter == 0 || sum.BestVal == nil || sum.Eval.Metric != "accuracy" {
		t.Fatalf("summary: checkpoint %q, best iter %d, best %v, eval %v", sum.EvalCheckpoint, sum.BestIter, sum.BestVal, sum.Eval)
	}
	best, err := LoadCheckpoint(filepath.Join(dir, FileBest))
	if err != nil {
		t.Fatal(err)
	}
	if best.Iter != sum.BestIter {
		t.Fatalf("best.gob is iteration %d, summary says %d", best.Iter, sum.BestIter)
	}
	// The best checkpoint reproduces the summary's test accuracy.
	m, err := best.Model(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ev, err := m.EvaluateOn(src, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Mean != res.Eval.Mean {
		t.Fatalf("re-evaluated %v, run said %v", ev, res.Eval)
	}
}

// A time budget ends training early; the run then finishes normally.
func TestRunTimeBudget(t *testing.T) {
	cfg := smallConfig("vrf")
	cfg.Iters, cfg.LogEvery, cfg.EvalTasks = 1000, 5, 5
	dir := filepath.Join(t.TempDir(), "run")
	res, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Dir: dir, Budget: time.Nanosecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Iters != 1 || res.Eval == nil || res.Interrupted {
		t.Fatalf("budget run: %d iterations, eval %v, interrupted %v; want 1, an evaluation, not interrupted", res.Iters, res.Eval, res.Interrupted)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Iter != 1 {
		t.Fatalf("checkpoint at %d, want 1", ck.Iter)
	}
	rows, _ := os.ReadFile(filepath.Join(dir, FileMetrics))
	if !strings.Contains(string(rows), `"iter":1,`) {
		t.Fatalf("metrics.jsonl lacks the last iteration:\n%s", rows)
	}
}

// A task source that panics in the prefetch goroutine gives an error, not
// a crash.
type panickySource struct {
	sineLike
	after int
	calls *int
}

func (p panickySource) Sample(rng *rand.Rand, b *task.Batch) {
	*p.calls++
	if *p.calls > p.after {
		panic("broken source")
	}
	p.sineLike.Sample(rng, b)
}

func TestPrefetchPanicIsAnError(t *testing.T) {
	cfg := smallConfig("vrf")
	cfg.Iters, cfg.EvalTasks = 20, 4
	calls := 0
	_, err := Run(context.Background(), cfg, panickySource{after: 3, calls: &calls}, RunOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "broken source") {
		t.Fatalf("err = %v, want the source's panic as an error", err)
	}
}

// Cancelling during the final evaluation stops it promptly; training is
// already checkpointed and the run reports itself interrupted.
func TestFinalEvaluationIsCancellable(t *testing.T) {
	cfg := smallConfig("vrf")
	cfg.Iters, cfg.EvalTasks = 5, 100000
	ctx, cancel := context.WithCancel(context.Background())
	dir := filepath.Join(t.TempDir(), "run")
	obs := ObserverFunc(func(s Snapshot) error {
		if s.Iter == cfg.Iters {
			cancel()
		}
		return nil
	})
	t0 := time.Now()
	res, err := Run(ctx, cfg, sineLike{}, RunOptions{Dir: dir, ReportEvery: time.Nanosecond}, obs)
	if !errors.Is(err, context.Canceled) || !res.Interrupted {
		t.Fatalf("err = %v, interrupted %v; want a cancelled, interrupted run", err, res.Interrupted)
	}
	if time.Since(t0) > 20*time.Second {
		t.Fatalf("cancelling took %v", time.Since(t0))
	}
	if ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint)); err != nil || ck.Iter != cfg.Iters {
		t.Fatalf("checkpoint %v, %v; want iteration %d", ck, err, cfg.Iters)
	}
}

// Classification runs show their bases too: one draw per snapshot, each
// flow step, the same numbers for the same iteration and task, and a
// different task gives different bases (q depends on the support set).
func TestClassificationDisplayHasBases(t *testing.T) {
	for _, tc := range []struct {
		variant string
		steps   int
	}{{"rbf", 0}, {"rff", 1}, {"vrf", 1}, {"metakernel", 3}} {
		t.Run(tc.variant, func(t *testing.T) {
			cfg := classConfig(tc.variant, 0.9)
			m, err := NewModel(cfg, blobs{way: 3, side: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			d, err := m.Display(7, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			if d == nil || d.Iter != 7 || len(d.OmegaSteps) != tc.steps || len(d.GridX) != 0 {
				t.Fatalf("display %+v, want iteration 7, %d ω steps and no curve", d, tc.steps)
			}
			for _, w := range d.OmegaSteps {
				if len(w) != cfg.Bases*cfg.FeatureDim() {
					t.Fatalf("ω step has %d values, want D·d = %d", len(w), cfg.Bases*cfg.FeatureDim())
				}
			}
			again, err := m.Display(7, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			other, err := m.Display(7, 1, 4)
			if err != nil {
				t.Fatal(err)
			}
			for k := range d.OmegaSteps {
				if !slices.Equal(d.OmegaSteps[k], again.OmegaSteps[k]) {
					t.Fatalf("step %d differs between two displays of the same task", k)
				}
				if tc.variant != "rff" && slices.Equal(d.OmegaSteps[k], other.OmegaSteps[k]) {
					t.Fatalf("step %d: tasks 0 and 1 have the same bases", k)
				}
			}
		})
	}
}

// summary.json's best_val is the best validation, also when the final one
// (off the ValEvery grid) came out worse than an earlier one.
func TestSummaryBestValIsTheBest(t *testing.T) {
	src := blobs{way: 3, side: 7}
	for seed := uint64(1); seed <= 8; seed++ {
		cfg := classConfig("vrf", 0.9)
		cfg.Seed = seed
		cfg.Iters, cfg.ValEvery, cfg.ValTasks, cfg.LogEvery = 50, 20, 12, 10
		cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 6, 3, 1
		dir := filepath.Join(t.TempDir(), "run")
		if _, err := Run(context.Background(), cfg, src, RunOptions{Dir: dir, Val: src, Test: src}, nil); err != nil {
			t.Fatal(err)
		}
		var rows []ValRow
		for _, l := range strings.Split(strings.TrimSpace(string(testutil.ReadFile(t, filepath.Join(dir, FileVal)))), "\n") {
			var r ValRow
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		if len(rows) != 3 || rows[2].Iter != 50 || rows[2].Best {
			continue // the final validation was the best: nothing to tell apart
		}
		var best ValRow
		for _, r := range rows {
			if r.Best {
				best = r
			}
		}
		var sum Summary
		if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(dir, FileSummary)), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.BestIter != best.Iter || sum.BestVal == nil || sum.BestVal.Mean != best.Mean || sum.BestVal.CI95 != best.CI95 {
			t.Fatalf("seed %d: summary best iteration %d, %+v; val.jsonl's best is iteration %d, %v ± %v (last %v)",
				seed, sum.BestIter, sum.BestVal, best.Iter, best.Mean, best.CI95, rows[2].Mean)
		}
		return
	}
	t.Fatal("in no seed was the final validation worse than an earlier one: pick other settings")
}

// gamma_init sets where γ starts and nothing else: every other parameter
// is the same draw, an unset gamma_init is the authors' γ = 1 and leaves
// config.json as it was; a bad value, or one on a regression task, is an
// error naming the key.
func TestGammaInit(t *testing.T) {
	build := func(g float64) *Model {
		cfg := classConfig("metakernel", 0.9)
		cfg.GammaInit = g
		m, err := NewModel(cfg, blobs{way: 3, side: 7})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	ref, scaled := build(0), build(8)
	if g := ref.Params.byName["gamma"].Data[0]; g != 1 {
		t.Errorf("gamma_init unset: γ starts at %v, want 1", g)
	}
	if g := scaled.Params.byName["gamma"].Data[0]; g != 8 {
		t.Errorf("gamma_init 8: γ starts at %v, want 8", g)
	}
	for i, p := range ref.Params.List {
		if p.Name != "gamma" && !slices.Equal(p.Data, scaled.Params.List[i].Data) {
			t.Errorf("gamma_init changed %s", p.Name)
		}
	}
	js, err := json.Marshal(classConfig("metakernel", 0.9))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(js), "gamma_init") {
		t.Errorf("an unset gamma_init is written: %s", js)
	}
	for _, g := range []float64{-1, math.NaN(), math.Inf(1), 2e4} {
		c := classConfig("metakernel", 0.9)
		c.GammaInit = g
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "gamma_init") {
			t.Errorf("gamma_init %v: %v", g, err)
		}
	}
	c := sineConfig("metakernel")
	c.GammaInit = 5
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "gamma_init") {
		t.Errorf("gamma_init on a regression task: %v", err)
	}
}

// An evaluation averaging several draws of ω runs ψ once per batch
// (evalMemo) and gives, task by task, the bits of one that runs ψ every
// draw: for the Conv ψ with dropout in training, and for the ResNet ψ with
// each batch-norm evaluation mode, after training steps so that the
// parameters and running statistics are not the initial ones.
func TestEvaluateDrawsShareFeatures(t *testing.T) {
	cfgs := map[string]Config{
		"conv":           classConfig("metakernel", 0.8),
		"resnet episode": resnetConfig("metakernel", ""),
		"resnet running": resnetConfig("metakernel", BNEvalRunning),
	}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			m, err := NewModel(cfg, blobs{way: 3, side: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			trainSteps(t, m, 5)
			hits := func() int {
				h := 0
				for _, gr := range m.graphs {
					h += gr.memoHits()
				}
				return h
			}
			// eval returns an evaluation of 7 tasks (3 batches of up to
			// 3) and the passes of ψ it skipped.
			eval := func(memo bool, samples int) (EvalResult, int) {
				t.Helper()
				defer func(old bool) { evalMemo = old }(evalMemo)
				evalMemo = memo
				h := hits()
				ev, err := m.Evaluate(7, 3, samples, 5)
				if err != nil {
					t.Fatal(err)
				}
				return ev, hits() - h
			}
			for _, samples := range []int{1, 3} {
				with, skipped := eval(true, samples)
				without, none := eval(false, samples)
				if !slices.Equal(with.PerTask, without.PerTask) || with.Mean != without.Mean {
					t.Errorf("%d draws: %v with the shared ψ, %v without", samples, with.PerTask, without.PerTask)
				}
				if want := 3 * (samples - 1); skipped != want || none != 0 {
					t.Errorf("%d draws: ψ skipped %d passes with the memo (want %d: every draw after a batch's first), %d without", samples, skipped, want, none)
				}
			}
		})
	}
}
