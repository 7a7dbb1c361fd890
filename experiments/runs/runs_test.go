package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/runstate"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// small keeps a real run to a fraction of a second.
var small = presets.Overrides{"embed_hidden": []int{8, 8}, "infer_hidden": 8, "prior_hidden": 8, "flow_hidden": 8, "bases": 16,
	"meta_batch": 2, "iters": 12, "log_every": 4, "checkpoint_sec": 0, "eval_tasks": 4, "eval_query": 10, "eval_samples": 1}

// train makes a finished sine run in dir with seed.
func train(t testing.TB, dir string, seed int) {
	t.Helper()
	p, cfg, err := presets.Spec{Preset: "sine-5shot", Overrides: small.With("seed", seed)}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := presets.NewSources(p.Source, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), cfg, srcs.Train, engine.RunOptions{Preset: p.Name, Dir: dir}, nil); err != nil {
		t.Fatal(err)
	}
}

// copyRun copies run directory src's files into dst.
func copyRun(t testing.TB, src, dst string) {
	t.Helper()
	os.MkdirAll(dst, 0o755)
	list, _ := os.ReadDir(src)
	for _, e := range list {
		if b, err := os.ReadFile(filepath.Join(src, e.Name())); err == nil {
			os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
	}
}

// A runs root holding each kind of run in each state: Find groups them by
// the experiment or sweep they belong to, and Read tells their states.
func TestScanStatesAndGroups(t *testing.T) {
	root := t.TempDir()
	done := filepath.Join(root, "done")
	train(t, done, 1)
	copyRun(t, done, filepath.Join(root, "stopped"))
	os.Remove(filepath.Join(root, "stopped", engine.FileSummary))
	copyRun(t, done, filepath.Join(root, "broke"))
	os.Remove(filepath.Join(root, "broke", engine.FileSummary))
	engine.WriteFailure(filepath.Join(root, "broke"), errors.New("training diverged at iteration 7 (loss NaN)"), 6, true)
	copyRun(t, done, filepath.Join(root, "live"))
	os.Remove(filepath.Join(root, "live", engine.FileSummary))
	lock, err := runfile.Lock(filepath.Join(root, "live"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	os.MkdirAll(filepath.Join(root, "damaged"), 0o755)
	os.WriteFile(filepath.Join(root, "damaged", engine.FileConfig), []byte("{"), 0o644)

	exp := filepath.Join(root, "exp-ablation")
	os.MkdirAll(exp, 0o755)
	os.WriteFile(filepath.Join(exp, experiments.FileExperiment), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(exp, sweep.FileManifest), []byte("{}"), 0o644) // its runs as a sweep's units
	train(t, filepath.Join(exp, "runs", "rff-s2"), 2)
	sw := filepath.Join(root, "sw")
	os.MkdirAll(sw, 0o755)
	os.WriteFile(filepath.Join(sw, sweep.FileManifest), []byte("{}"), 0o644)
	copyRun(t, done, filepath.Join(sw, "units", "u1"))
	copyRun(t, done, filepath.Join(root, "models", "m"))
	os.WriteFile(filepath.Join(root, "models", "m", models.FileModel), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(root, "empty", "deeper"), 0o755)
	os.MkdirAll(filepath.Join(root, ".hidden", "r"), 0o755)
	os.WriteFile(filepath.Join(root, ".hidden", "r", engine.FileConfig), []byte("{}"), 0o644)

	rs, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Run{}
	for _, r := range rs {
		got[r.Rel] = r
	}
	want := map[string]struct{ state, group, kind string }{
		"done":                     {runstate.Finished, "", KindRun},
		"stopped":                  {runstate.Stopped, "", KindRun},
		"broke":                    {runstate.Failed, "", KindRun},
		"live":                     {runstate.Running, "", KindRun},
		"damaged":                  {"", "", KindRun},
		"exp-ablation/runs/rff-s2": {runstate.Finished, "exp-ablation", KindExperiment},
		"sw/units/u1":              {runstate.Finished, "sw", KindSweep},
		"models/m":                 {runstate.Finished, "", KindModel},
	}
	if len(got) != len(want) {
		t.Errorf("found %d runs, want %d: %v", len(got), len(want), slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		}))
	}
	for rel, w := range want {
		r, ok := got[rel]
		if !ok {
			t.Errorf("%s not found", rel)
			continue
		}
		if r.State != w.state || r.Group != w.group || r.Kind != w.kind {
			t.Errorf("%s: state %q group %q kind %q, want %q %q %q (error %q)", rel, r.State, r.Group, r.Kind, w.state, w.group, w.kind, r.Error)
		}
	}
	d := got["done"]
	if d.Preset != "sine-5shot" || d.Variant != "metakernel" || d.Seed != 1 || d.Iter != 12 || d.Iters != 12 || d.Eval == nil || d.Val || d.TrainSeconds <= 0 || d.Modified.IsZero() {
		t.Errorf("a finished run reads as %+v", d)
	}
	if s := got["stopped"]; s.Iter != 12 || s.Eval != nil {
		t.Errorf("an interrupted run: iter %d eval %v", s.Iter, s.Eval)
	}
	if b := got["broke"]; !strings.Contains(b.Error, "diverged") {
		t.Errorf("a failed run's error: %q", b.Error)
	}
	if dm := got["damaged"]; !strings.Contains(dm.Error, "config.json") {
		t.Errorf("a damaged run's error: %q", dm.Error)
	}
	if g := Groups(rs); len(g) != 3 || g[0] != "" {
		t.Errorf("groups %q", g)
	}

	if _, err := Find(filepath.Join(root, "nope")); err == nil || !strings.Contains(err.Error(), "MKBENCH_RUNS") {
		t.Errorf("a missing root: %v", err)
	}
}

// Sorting keeps groups together and orders within them; the filter
// matches every word; an unknown key is an error naming the keys.
func TestSortFilter(t *testing.T) {
	now := time.Now()
	rs := []Run{
		{Entry: Entry{Rel: "b", Group: "g"}, Preset: "omniglot-5w1s", Seed: 2, Iter: 5, Modified: now},
		{Entry: Entry{Rel: "a"}, Preset: "sine-5shot", Seed: 3, Iter: 9, Eval: &engine.EvalResult{Mean: 0.5}, Modified: now.Add(-time.Hour)},
		{Entry: Entry{Rel: "c"}, Preset: "sine-5shot", Seed: 1, Iter: 1, Eval: &engine.EvalResult{Mean: 0.2}, Modified: now.Add(-time.Minute)},
		{Entry: Entry{Rel: "d", Group: "g"}, Preset: "omniglot-5w1s", Seed: 1, Iter: 7, Modified: now},
	}
	order := func() string {
		var s []string
		for _, r := range rs {
			s = append(s, r.Rel)
		}
		return strings.Join(s, "")
	}
	for _, c := range []struct {
		key  string
		desc bool
		want string
	}{{"seed", false, "cadb"}, {"seed", true, "acbd"}, {"metric", true, "acbd"}, {"iter", false, "cabd"}, {"age", false, "cabd"}, {"run", true, "cadb"}} {
		if err := Sort(rs, c.key, c.desc); err != nil {
			t.Fatal(err)
		}
		if got := order(); got != c.want {
			t.Errorf("sort %s desc=%v: %s, want %s", c.key, c.desc, got, c.want)
		}
	}
	if err := Sort(rs, "colour", false); err == nil || !strings.Contains(err.Error(), "preset, variant") {
		t.Errorf("an unknown key: %v", err)
	}
	if f := Filter(rs, "SINE 3"); len(f) != 1 || f[0].Rel != "a" {
		t.Errorf("filter: %+v", f)
	}
	// A state filters by its word and by the words it had before.
	rs[1].State, rs[2].State = runstate.Stopped, runstate.Finished
	for _, word := range []string{"stopped", "interrupted"} {
		if f := Filter(rs, word); len(f) != 1 || f[0].State != runstate.Stopped {
			t.Errorf("filter %s: %+v", word, f)
		}
	}
	if f := Filter(rs, "done"); len(f) != 1 || f[0].State != runstate.Finished {
		t.Errorf("filter done: %+v", f)
	}
}

// BenchmarkScan1000 scans a root of 1,000 finished runs (the runs screen's
// target): Find alone, then Find and Read.
func BenchmarkScan1000(b *testing.B) {
	root := b.TempDir()
	seed := filepath.Join(root, "seed")
	train(b, seed, 1)
	for i := range 1000 {
		group := fmt.Sprintf("exp%02d", i/50)
		dst := filepath.Join(root, group, "runs", fmt.Sprintf("r%04d", i))
		copyRun(b, seed, dst)
		os.WriteFile(filepath.Join(root, group, experiments.FileExperiment), []byte("{}"), 0o644)
	}
	os.RemoveAll(seed)
	b.Run("find", func(b *testing.B) {
		for b.Loop() {
			if f, err := Find(root); err != nil || len(f) != 1000 {
				b.Fatal(len(f), err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if rs, err := Scan(root); err != nil || len(rs) != 1000 || rs[999].State != runstate.Finished {
				b.Fatal(len(rs), err)
			}
		}
	})
}

// A run whose lock was last taken on another host (a cluster node: its
// lock may not show here) counts as running while it checkpoints
// recently; one last locked here is running only while the lock is held.
func TestRunningElsewhere(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "r")
	train(t, dir, 1)
	os.Remove(filepath.Join(dir, engine.FileSummary))
	rc, err := engine.ReadRunConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	rc.Config.CheckpointSec = 60
	runfile.WriteJSON(filepath.Join(dir, engine.FileConfig), rc, 0o644)
	host, _ := os.Hostname()
	for _, c := range []struct {
		host string
		age  time.Duration
		want string
	}{{"node7", 0, runstate.Running}, {"node7", 10 * time.Minute, runstate.Stopped}, {host, 0, runstate.Stopped}} {
		runfile.WriteJSON(filepath.Join(dir, runfile.FileLock), runfile.Owner{Host: c.host, PID: 1}, 0o644)
		now := time.Now().Add(c.age)
		if got := Read(Entry{Dir: dir, Rel: "r"}, now).State; got != c.want {
			t.Errorf("owner %s, %v after the checkpoint: %s, want %s", c.host, c.age, got, c.want)
		}
	}
}

// A finished run's curves: every metrics row, its validations, and a
// training time per row that rises to the summary's.
func TestReadCurves(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	train(t, dir, 1)
	c, err := ReadCurves(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := engine.ReadSummary(dir)
	if len(c.Metrics) != 3 || len(c.Seconds) != 3 || c.Metrics[2].Iter != 12 {
		t.Fatalf("curves %+v", c)
	}
	if c.Seconds[0] <= 0 || c.Seconds[0] >= c.Seconds[1] || c.Seconds[2] != sum.TrainSeconds {
		t.Errorf("times %v, summary %v", c.Seconds, sum.TrainSeconds)
	}
	if got := interpolate([]float64{0, 10, 20}, []float64{0, 5, 7}, 15); got != 6 {
		t.Errorf("interpolate: %v", got)
	}
}

// The diff of three configs: only the keys that differ, each config's
// value of each.
func TestDiff(t *testing.T) {
	_, a, _ := presets.Spec{Preset: "sine-5shot"}.Config()
	b, c := a, a
	b.LR, c.Bases = 0.005, 64
	keys, vals := Diff([]engine.Config{a, b, c})
	if strings.Join(keys, ",") != "bases,lr" {
		t.Fatalf("keys %v", keys)
	}
	if vals[0][0] != vals[1][0] || vals[2][0] != "64" || vals[1][1] != "0.005" || vals[0][1] != vals[2][1] {
		t.Errorf("values %v", vals)
	}
	if k, _ := Diff([]engine.Config{a}); k != nil {
		t.Error("one config has no diff")
	}
}
