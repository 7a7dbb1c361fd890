package engine

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
)

func tinyConfig(variant string, iters int) Config {
	c := sineConfig(variant)
	c.Iters, c.LogEvery, c.SnapshotEvery = iters, 5, 7
	c.EvalTasks, c.EvalQuery, c.EvalSamples = 30, 20, 2
	return c
}

func runTo(t *testing.T, cfg Config, src task.Source, dir string, obs Observer) Result {
	t.Helper()
	res, err := Run(context.Background(), cfg, src, RunOptions{Preset: "test", Dir: dir}, obs)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// Same seed ⇒ byte-identical metrics.jsonl, whether one core or two do the
// work and whether or not an observer takes display snapshots.
func TestRunDeterministicAcrossCores(t *testing.T) {
	variants := []string{"vrf+ctx", "metakernel", "rbf"}
	if testing.Short() {
		variants = []string{"vrf+ctx"}
	}
	for _, v := range variants {
		t.Run(v, func(t *testing.T) {
			cfg := tinyConfig(v, 12)
			root := t.TempDir()
			prev := runtime.GOMAXPROCS(1)
			r1 := runTo(t, cfg, sineLike{}, filepath.Join(root, "one"), nil)
			runtime.GOMAXPROCS(2)
			r2 := runTo(t, cfg, sineLike{}, filepath.Join(root, "two"), ObserverFunc(func(Snapshot) error { return nil }))
			runtime.GOMAXPROCS(prev)
			a := testutil.ReadFile(t, filepath.Join(root, "one", FileMetrics))
			b := testutil.ReadFile(t, filepath.Join(root, "two", FileMetrics))
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Fatalf("metrics differ between GOMAXPROCS 1 and 2:\n%s\n---\n%s", a, b)
			}
			if r1.Eval.Mean != r2.Eval.Mean {
				t.Fatalf("evaluation differs: %v vs %v", r1.Eval.Mean, r2.Eval.Mean)
			}
			if n := bytes.Count(a, []byte("\n")); n != 12/5+1 {
				t.Fatalf("want %d metrics rows, got %d", 12/5+1, n)
			}
		})
	}
}

// An interrupted and resumed run writes exactly the metrics and reaches
// exactly the parameters of an uninterrupted one.
func TestResumeMatchesUninterrupted(t *testing.T) {
	cfg := tinyConfig("metakernel", 16)
	if testing.Short() {
		cfg = tinyConfig("vrf+ctx", 16)
	}
	cfg.PsiWeightDecay = 0.5 // its state is the checkpoint's too
	root := t.TempDir()
	full, part := filepath.Join(root, "full"), filepath.Join(root, "part")
	want := runTo(t, cfg, sineLike{}, full, nil)

	stopAt := 8
	res, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: part},
		ObserverFunc(func(s Snapshot) error {
			if s.Iter >= stopAt {
				return ErrStopped
			}
			return nil
		}))
	if !errors.Is(err, ErrStopped) || !res.Interrupted {
		t.Fatalf("want a stopped run, got %v (interrupted %v)", err, res.Interrupted)
	}
	ck, err := LoadCheckpoint(filepath.Join(part, FileCheckpoint))
	if err != nil || ck.Iter != res.Iters {
		t.Fatalf("checkpoint after stop: iter %v, err %v (run stopped at %d)", ck, err, res.Iters)
	}
	// A process killed after its checkpoint may have logged further rows;
	// the resumed run must drop them.
	f, _ := os.OpenFile(filepath.Join(part, FileMetrics), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"iter":15,"loss":99}` + "\n")
	f.Close()

	got, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: part, Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := testutil.ReadFile(t, filepath.Join(full, FileMetrics)), testutil.ReadFile(t, filepath.Join(part, FileMetrics)); !bytes.Equal(a, b) {
		t.Fatalf("resumed metrics differ:\n%s\n---\n%s", a, b)
	}
	if want.Eval.Mean != got.Eval.Mean {
		t.Fatalf("resumed eval %v, uninterrupted %v", got.Eval.Mean, want.Eval.Mean)
	}
	ca, _ := LoadCheckpoint(filepath.Join(full, FileCheckpoint))
	cb, _ := LoadCheckpoint(filepath.Join(part, FileCheckpoint))
	for i := range ca.Params {
		for j := range ca.Params[i].Data {
			if ca.Params[i].Data[j] != cb.Params[i].Data[j] {
				t.Fatalf("parameter %s[%d] differs after resume", ca.Params[i].Name, j)
			}
		}
	}
}

func TestEvalFromCheckpointReproducesRun(t *testing.T) {
	cfg := tinyConfig("vrf+ctx", 6)
	dir := t.TempDir()
	res := runTo(t, cfg, sineLike{}, dir, nil)
	ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ck.Model(sineLike{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ev, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Mean != res.Eval.Mean || ev.CI95 != res.Eval.CI95 {
		t.Fatalf("eval from checkpoint %v, run reported %v", ev, res.Eval)
	}

	// EvalProgress sees every meta-batch, counting across sources, and
	// changes no number.
	var seen [][2]int
	m.EvalProgress = func(done, total int) { seen = append(seen, [2]int{done, total}) }
	again, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil || again.Mean != ev.Mean {
		t.Fatalf("with EvalProgress: %v, %v; without: %v", again, err, ev)
	}
	batches := (cfg.EvalTasks + cfg.MetaBatch - 1) / cfg.MetaBatch
	if len(seen) != batches || seen[0] != [2]int{min(cfg.MetaBatch, cfg.EvalTasks), cfg.EvalTasks} || seen[len(seen)-1] != [2]int{cfg.EvalTasks, cfg.EvalTasks} {
		t.Errorf("progress %v for %d tasks in batches of %d", seen, cfg.EvalTasks, cfg.MetaBatch)
	}
	seen = nil
	srcs := []NamedSource{{Name: "a", Source: sineLike{}}, {Name: "b", Source: sineLike{}}}
	if _, _, err := m.EvaluateSources(srcs, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2*batches || seen[batches] != [2]int{cfg.EvalTasks + min(cfg.MetaBatch, cfg.EvalTasks), 2 * cfg.EvalTasks} || seen[len(seen)-1] != [2]int{2 * cfg.EvalTasks, 2 * cfg.EvalTasks} {
		t.Errorf("progress over two sources %v", seen)
	}
	if m.EvalProgress == nil {
		t.Error("EvaluateSources did not restore EvalProgress")
	}
}

// nanAfter yields NaN targets from its n-th batch on.
type nanAfter struct {
	sineLike
	n, calls int
}

func (s *nanAfter) Sample(rng *rand.Rand, b *task.Batch) {
	s.sineLike.Sample(rng, b)
	if s.calls++; s.calls > s.n {
		b.YQ[0] = math.NaN()
	}
}

func TestNaNLossStopsAndKeepsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig("vrf", 20)
	cfg.CheckpointSec = 0
	// First a clean run of 5 iterations leaves a checkpoint.
	c5 := cfg
	c5.Iters = 5
	if _, err := Run(context.Background(), c5, sineLike{}, RunOptions{Dir: dir, SkipEval: true}, nil); err != nil {
		t.Fatal(err)
	}
	before := testutil.ReadFile(t, filepath.Join(dir, FileCheckpoint))
	// Resuming to 20 with data that turns NaN after 3 more batches.
	_, err := Run(context.Background(), cfg, &nanAfter{n: 3}, RunOptions{Dir: dir, Resume: true}, nil)
	if err == nil || !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "iteration 9") {
		t.Fatalf("want a divergence error at iteration 9, got %v", err)
	}
	if !bytes.Equal(before, testutil.ReadFile(t, filepath.Join(dir, FileCheckpoint))) {
		t.Fatal("the last good checkpoint was overwritten")
	}
	// The failure is recorded for whoever lists the runs, and cleared
	// when the run is taken up again.
	if f, ok := ReadFailure(dir); !ok || !f.Permanent || f.Iter != 8 || !strings.Contains(f.Error, "iteration 9") {
		t.Errorf("failed.json: %+v, %v", f, ok)
	}
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Dir: dir, Resume: true, SkipEval: true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := ReadFailure(dir); ok {
		t.Error("failed.json outlived a resume that finished")
	}
	// The run started with 5 iterations and was resumed to 20: its
	// config.json says 20, as its checkpoint does.
	rc, err := ReadRunConfig(dir)
	ck, _ := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
	if err != nil || ck == nil || rc.Config.Iters != 20 || ck.Config.Iters != 20 {
		t.Fatalf("after a resume to 20 iterations: config.json %d (%v), checkpoint %v", rc.Config.Iters, err, ck != nil && ck.Config.Iters == 20)
	}
}

func TestRunRefusesExistingRunDir(t *testing.T) {
	dir := t.TempDir()
	cfg := tinyConfig("rff", 2)
	runTo(t, cfg, sineLike{}, dir, nil)
	before := testutil.ReadFile(t, filepath.Join(dir, FileCheckpoint))
	_, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Dir: dir}, nil)
	if err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if !bytes.Equal(before, testutil.ReadFile(t, filepath.Join(dir, FileCheckpoint))) {
		t.Fatal("existing checkpoint changed")
	}
}

func TestCorruptCheckpointIsAClearError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileCheckpoint)
	os.WriteFile(path, []byte("not a checkpoint"), 0o644)
	if _, err := LoadCheckpoint(path); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("want ErrBadCheckpoint, got %v", err)
	}
	if _, err := LoadCheckpoint(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no checkpoint") {
		t.Fatalf("want a missing-checkpoint error, got %v", err)
	}
}

func TestObserverPanicBecomesError(t *testing.T) {
	cfg := tinyConfig("rff", 3)
	_, err := Run(context.Background(), cfg, sineLike{}, RunOptions{}, ObserverFunc(func(Snapshot) error { panic("boom") }))
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("want the panic as an error, got %v", err)
	}
}

func TestCancelledContextCheckpoints(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := tinyConfig("vrf", 50)
	res, err := Run(ctx, cfg, sineLike{}, RunOptions{Dir: dir}, ObserverFunc(func(s Snapshot) error {
		if s.Iter >= 3 {
			cancel()
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) || !res.Interrupted {
		t.Fatalf("want a cancelled, interrupted run; got %v", err)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
	if err != nil || ck.Iter != res.Iters || ck.Iter < 3 || ck.Iter >= 50 {
		t.Fatalf("checkpoint %+v, err %v", ck, err)
	}
}

func TestValidateNamesTheProblem(t *testing.T) {
	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Bases = 0 }, "bases"},
		{func(c *Config) { c.Shot = -1 }, "shot"},
		{func(c *Config) { c.LR = math.NaN() }, "learning rate"},
		{func(c *Config) { c.Optimizer = "rmsprop" }, "optimizer"},
		{func(c *Config) { c.Kernel = KernelRFF }, "need the variational kernel"},
	}
	for _, tc := range cases {
		c := sineConfig("metakernel")
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
	var c Config
	if err := c.ApplyVariant("metakernal", 4); err == nil || !strings.Contains(err.Error(), "unknown variant") {
		t.Errorf("misspelled variant: %v", err)
	}
	for _, v := range Variants {
		c := sineConfig(v)
		if c.Variant() != v {
			t.Errorf("variant %s round-trips as %s", v, c.Variant())
		}
	}
}
