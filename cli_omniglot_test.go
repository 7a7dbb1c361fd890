package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// An Omniglot run from the command line: trains, validates, keeps the best
// parameters and tests them on the test split; eval reproduces the number
// and evaluates at another way and shot.
func TestOmniglotRunAndEval(t *testing.T) {
	data := testutil.Data(t, "omniglot")
	dir := filepath.Join(t.TempDir(), "run")
	so, se, code := mkbench(t, "run", "--preset", "omniglot-5w1s", "--variant", "rbf", "--iters", "4", "--val-every", "2",
		"--val-tasks", "6", "--eval-tasks", "6", "--data", data, "--out", dir, "--quiet")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, so, se)
	}
	for _, f := range []string{"best.gob", "val.jsonl", "summary.json", "checkpoint.gob"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	if !strings.Contains(so, "eval accuracy") {
		t.Errorf("run output lacks the accuracy:\n%s", so)
	}
	so, se, code = mkbench(t, "eval", "--run", dir, "--data", data)
	if code != 0 || !strings.Contains(so, "matches summary.json") {
		t.Fatalf("eval: exit %d\n%s%s", code, so, se)
	}
	so, se, code = mkbench(t, "eval", "--run", dir, "--data", data, "--way", "10", "--shot", "10", "--query", "10", "--eval-tasks", "6")
	if code != 0 || !strings.Contains(so, "accuracy") {
		t.Fatalf("eval at 10-way 10-shot, 10 queries: exit %d\n%s%s", code, so, se)
	}
	// A 1-way task is always right: refused, not reported as 100%.
	if so, se, code := mkbench(t, "eval", "--run", dir, "--data", data, "--way", "1"); code != 1 || so != "" || !strings.Contains(se, "way must be at least 2") {
		t.Errorf("eval --way 1: exit %d, stdout %q, stderr %q", code, so, se)
	}
	// Without best.gob the last checkpoint stands in, and eval says so.
	if err := os.Remove(filepath.Join(dir, "best.gob")); err != nil {
		t.Fatal(err)
	}
	so, se, code = mkbench(t, "eval", "--run", dir, "--data", data)
	if code != 0 || !strings.Contains(se, "evaluating the last checkpoint (iteration 4)") || !strings.Contains(so, "last checkpoint") {
		t.Errorf("eval without best.gob: exit %d, stdout %q, stderr %q", code, so, se)
	}
}

func TestOmniglotBadInput(t *testing.T) {
	sine := filepath.Join(t.TempDir(), "sine")
	if _, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--iters", "2", "--eval-tasks", "2", "--out", sine, "--quiet"); code != 0 {
		t.Fatalf("sine run: %s", se)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--preset", "omniglot-5w1s", "--data", filepath.Join(t.TempDir(), "nothing")}, "--data"},
		{[]string{"run", "--preset", "omniglot-5w1s", "--val-tasks", "0"}, "--val-tasks must be positive"},
		{[]string{"run", "--preset", "sine-5shot", "--minutes", "-1"}, "--minutes: -1 minutes is not a training time"},
		{[]string{"eval", "--run", sine, "--way", "5"}, "classification runs only"},
		{[]string{"eval", "--run", sine, "--shot", "0"}, "--shot must be positive"},
		{[]string{"eval", "--run", sine, "--query", "-1"}, "--query must be positive"},
	} {
		_, se, code := mkbench(t, tc.args...)
		if code == 0 || !strings.Contains(se, tc.want) || strings.Count(strings.TrimSpace(se), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", tc.args, code, se, tc.want)
		}
	}
}

// train_way and train_shot train on episodes of more classes and shots
// than the model is validated and tested on; a train_way below the way,
// a negative train_shot and a train_shot for regression are refused.
func TestTrainWayRun(t *testing.T) {
	for _, c := range []struct{ preset, set, want string }{
		{"omniglot-5w1s", "train_way=3", "train_way must be at least way (5)"},
		{"omniglot-5w1s", "train_shot=-1", "train_shot must be ≥ 1"},
		{"sine-5shot", "train_shot=2", `not used by this preset: "train_shot"`},
	} {
		if _, e, code := mkbench(t, "run", "--preset", c.preset, "--set", c.set, "--iters", "1", "--out", filepath.Join(t.TempDir(), "x")); code == 0 || !strings.Contains(e, c.want) {
			t.Errorf("%s %s (exit %d): %s", c.preset, c.set, code, e)
		}
	}
	data := testutil.Data(t, "omniglot")
	dir := filepath.Join(t.TempDir(), "tw")
	out, e, code := mkbench(t, "run", "--preset", "omniglot-5w1s", "--data", data, "--set", "train_way=10", "--set", "train_shot=3", "--iters", "3", "--set", "conv_filters=4",
		"--eval-tasks", "3", "--set", "val_every=2", "--set", "val_tasks=2", "--out", dir, "--quiet")
	if code != 0 {
		t.Fatalf("run (exit %d): %s%s", code, out, e)
	}
	if cfg := string(testutil.ReadFile(t, filepath.Join(dir, "config.json"))); !strings.Contains(cfg, `"train_way": 10`) || !strings.Contains(cfg, `"way": 5`) ||
		!strings.Contains(cfg, `"train_shot": 3`) || !strings.Contains(cfg, `"shot": 1`) {
		t.Errorf("config.json: %s", cfg)
	}
}
