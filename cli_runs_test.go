package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/experiments/runs"
)

// mkbench runs lists the runs under a root, a heading per experiment,
// with their state and metric; --sort, --filter and --json work on the
// same rows; a wrong root or sort key is one error line.
func TestRunsCommand(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"a", "b"} {
		args := []string{"run", "--preset", "sine-5shot", "--iters", "6", "--eval-tasks", "4", "--set", "bases=16", "--set", "meta_batch=2",
			"--set", "seed=" + map[string]string{"a": "1", "b": "2"}[name], "--out", filepath.Join(root, name), "--quiet"}
		if out, e, code := mkbench(t, args...); code != 0 {
			t.Fatalf("run (exit %d): %s%s", code, out, e)
		}
	}
	exp := filepath.Join(root, "exp")
	os.MkdirAll(filepath.Join(exp, "runs"), 0o755)
	os.WriteFile(filepath.Join(exp, "experiment.json"), []byte("{}"), 0o644)
	os.Rename(filepath.Join(root, "b"), filepath.Join(exp, "runs", "b"))
	os.Remove(filepath.Join(exp, "runs", "b", "summary.json")) // as if stopped

	out, e, code := mkbench(t, "runs", root)
	if code != 0 {
		t.Fatalf("runs (exit %d): %s", code, e)
	}
	for _, want := range []string{"sine-5shot", "finished", "stopped", "6/6", "experiment exp: 1 run", "runs/b"} {
		if !strings.Contains(out, want) {
			t.Errorf("runs lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = mkbench(t, "runs", root, "--filter", "interrupted", "--json")
	var rs []runs.Run
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 1 || rs[0].Rel != "exp/runs/b" || rs[0].Seed != 2 || rs[0].Config.Bases != 16 {
		t.Errorf("runs --json --filter: %v %+v", err, rs)
	}
	if out, _, _ := mkbench(t, "runs", root, "--filter", "nothing-like-it"); !strings.Contains(out, "no runs under") {
		t.Errorf("an empty filter result: %s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"runs", filepath.Join(root, "nope")}, "is not a folder"},
		{[]string{"runs", root, "--sort", "colour"}, "the keys are run, preset"},
		{[]string{"runs", root, "--frobnicate"}, "unknown flag --frobnicate (mkbench help runs)"},
		{[]string{"tui", "--runs", filepath.Join(root, "nope")}, "tui: --runs: runs: "},
		{[]string{"tui", "--runs", root, "--preset", "sine-5shot"}, "cannot start a --preset"},
	} {
		if _, e, code := mkbench(t, c.args...); code == 0 || !strings.Contains(e, c.want) || strings.Count(strings.TrimSpace(e), "\n") > 0 {
			t.Errorf("%v (exit %d): %q, want one line with %q", c.args, code, e, c.want)
		}
	}
}
