package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/testutil"
)

const mdFixtures = "datasets/testdata/metadataset"

// The metadataset preset on the committed records (written by an
// independent TFRecord implementation): variable ways and shots drawn by
// the reference's sampler, one episode a step, evaluated per test source;
// a run stopped and resumed draws the same episodes and ends with the same
// bytes. ψ is a small Conv-4 here (the preset's ResNet-18 trains the same
// way, at a CPU cost CI does not need to pay).
func TestMetaDatasetVaryingRunResumes(t *testing.T) {
	root := t.TempDir()
	ref, split := filepath.Join(root, "ref"), filepath.Join(root, "split")
	args := []string{"run", "--preset", "metadataset", "--data", mdFixtures, "--backbone", "conv4", "--image-size", "16",
		"--set", "conv_filters=4", "--set", "val_every=4", "--set", "val_tasks=3", "--set", "log_every=1", "--eval-tasks", "6", "--quiet"}
	if out, e, code := mkbench(t, append(args, "--iters", "8", "--out", ref)...); code != 0 {
		t.Fatalf("run (exit %d): %s%s", code, out, e)
	}
	if out, e, code := mkbench(t, append(args, "--iters", "4", "--out", split)...); code != 0 {
		t.Fatalf("first half (exit %d): %s%s", code, out, e)
	}
	if out, e, code := mkbench(t, "run", "--resume", split, "--iters", "8", "--quiet"); code != 0 {
		t.Fatalf("resume (exit %d): %s%s", code, out, e)
	}
	if a, b := testutil.ReadFile(t, filepath.Join(ref, engine.FileMetrics)), testutil.ReadFile(t, filepath.Join(split, engine.FileMetrics)); string(a) != string(b) {
		t.Errorf("metrics of the resumed run differ from the uninterrupted run's:\n%s\n%s", a, b)
	}
	// Read from the records as images are drawn (as ILSVRC is), the run
	// is the same, byte for byte.
	streamed := filepath.Join(root, "streamed")
	t.Setenv("MKBENCH_MD_STREAM", "1")
	if out, e, code := mkbench(t, append(args, "--iters", "8", "--out", streamed)...); code != 0 {
		t.Fatalf("streamed run (exit %d): %s%s", code, out, e)
	}
	os.Unsetenv("MKBENCH_MD_STREAM")
	if a, b := testutil.ReadFile(t, filepath.Join(ref, engine.FileMetrics)), testutil.ReadFile(t, filepath.Join(streamed, engine.FileMetrics)); string(a) != string(b) {
		t.Errorf("metrics of the streamed run differ:\n%s\n%s", a, b)
	}
	var sum struct {
		Eval     engine.EvalResult             `json:"eval"`
		BySource map[string]*engine.EvalResult `json:"eval_by_source"`
		Config   engine.Config                 `json:"config"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(ref, engine.FileSummary)), &sum); err != nil {
		t.Fatal(err)
	}
	// tiny_plain's test split has 3 classes, fewer than the 5 ways an
	// episode draws at least: it has no row.
	if len(sum.BySource) != 2 || sum.BySource["tiny_hier"] == nil || sum.BySource["tiny_bilevel"] == nil {
		t.Fatalf("eval_by_source %v", sum.BySource)
	}
	if !sum.Config.Varying || sum.Config.Way != 50 || sum.Config.MetaBatch != 1 || sum.Eval.Query != 0 || sum.Eval.Tasks != 12 {
		t.Errorf("config varying %v way %d batch %d, eval %+v", sum.Config.Varying, sum.Config.Way, sum.Config.MetaBatch, sum.Eval)
	}
	var ssum struct {
		Eval engine.EvalResult `json:"eval"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(streamed, engine.FileSummary)), &ssum); err != nil || ssum.Eval.Mean != sum.Eval.Mean {
		t.Errorf("streamed run's evaluation %+v (%v), the decoded run's %+v", ssum.Eval, err, sum.Eval)
	}
	// Re-evaluation reads the recorded sources and draws the same episodes.
	out, e, code := mkbench(t, "eval", "--run", ref, "--eval-tasks", "6", "--json")
	if code != 0 {
		t.Fatalf("eval (exit %d): %s%s", code, out, e)
	}
	var ev struct {
		Eval     engine.EvalResult             `json:"eval"`
		BySource map[string]*engine.EvalResult `json:"eval_by_source"`
	}
	if err := json.Unmarshal([]byte(out), &ev); err != nil || ev.Eval.Mean != sum.Eval.Mean || ev.BySource["tiny_hier"] == nil || ev.BySource["tiny_hier"].Mean != sum.BySource["tiny_hier"].Mean {
		t.Errorf("eval --json (%v): %s, the summary's mean %v", err, out, sum.Eval.Mean)
	}

	// Bounds of the episodes are settings; a fixed shot is not one.
	if _, e, code := mkbench(t, append(args, "--shot", "5", "--iters", "1", "--out", filepath.Join(root, "x"))...); code == 0 || !strings.Contains(e, "shot") {
		t.Errorf("--shot on variable episodes (exit %d): %s", code, e)
	}
	small := filepath.Join(root, "small")
	if out, e, code := mkbench(t, append(args, "--way", "5", "--set", "max_support=10", "--query", "2", "--iters", "2", "--out", small)...); code != 0 {
		t.Fatalf("bounded run (exit %d): %s%s", code, out, e)
	}
	if _, err := os.Stat(filepath.Join(small, engine.FileSummary)); err != nil {
		t.Error(err)
	}
}
