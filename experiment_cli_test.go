package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/internal/testutil"
)

// Every bad experiment or report input gives one clear line on stderr and
// exit code 1, before anything is trained.
func TestExperimentBadInputIsOneClearError(t *testing.T) {
	done := filepath.Join(t.TempDir(), "run")
	if _, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--variant", "rbf", "--iters", "2", "--eval-tasks", "2", "--quiet", "--out", done); code != 0 {
		t.Fatal(se)
	}
	mine := t.TempDir() // a folder of the user's: results.json there is theirs
	os.WriteFile(filepath.Join(mine, "results.json"), []byte(`{"mine":1}`), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"experiment"}, "name the experiment (one of ablation, versatility, efficiency, shots)"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--out", mine}, "is not empty (results.json is in it) and holds no experiment"},
		{[]string{"experiment", "ablasion", "--preset", "sine-5shot"}, `unknown experiment "ablasion"; did you mean ablation?`},
		{[]string{"experiment", "ablation"}, "--preset is required"},
		{[]string{"experiment", "ablation", "--preset", "sine-4shot"}, `unknown preset "sine-4shot"`},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--variants", "vrf,metakernal"}, `unknown variant "metakernal"; did you mean metakernel?`},
		{[]string{"experiment", "versatility", "--model", "omniglot-5w1"}, `no such model "omniglot-5w1"`},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--seeds", "1,two"}, `--seeds: "two" is not a seed`},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--seeds", "1,1"}, "--seeds: 1 is listed twice"},
		{[]string{"experiment", "efficiency", "--preset", "sine-5shot", "--bases", "16,-32"}, `--bases: "-32" is not a positive integer`},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--bases", "16,32"}, "--bases takes one value here"},
		{[]string{"experiment", "versatility", "--preset", "sine-5shot", "--ways", "5,10"}, "--ways needs a classification preset"},
		{[]string{"experiment", "shots", "--preset", "omniglot-5w1s", "--variants", "vrf,maml"}, "maml runs on regression presets only"},
		{[]string{"experiment", "efficiency", "--preset", "sine-5shot", "--variants", "rff,maml"}, "variant maml is not an engine variant"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--iters", "0"}, "--iters must be positive"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--minutes", "-1"}, "--minutes: -1 minutes is not a training time"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--minutes", "1e-12"}, "--minutes: 1e-12 minutes is less than a second"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--minutes", "0"}, "--minutes: 0 is no limit"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--frobnicate"}, "unknown flag --frobnicate (mkbench help experiment)"},
		{[]string{"experiment", "versatility", "--preset", "sine-5shot", "--run", filepath.Join(t.TempDir(), "none")}, "no checkpoint"},
		{[]string{"experiment", "--resume", t.TempDir()}, "not an experiment directory"},
		{[]string{"experiment", "--resume", t.TempDir(), "--iters", "5"}, "--iters cannot be changed when resuming"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--out", done}, "holds a run, not an experiment"},
		{[]string{"report"}, "name the experiment directory"},
		{[]string{"report", t.TempDir()}, "not an experiment directory"},
		{[]string{"report", done}, "is a run directory, not an experiment"},
	}
	for _, c := range cases {
		so, se, code := mkbench(t, c.args...)
		if code != 1 || !strings.Contains(se, c.want) || strings.Count(se, "\n") != 1 || strings.Contains(so, "training") {
			t.Errorf("mkbench %s: exit %d, stderr %q, want one line containing %q", strings.Join(c.args, " "), code, se, c.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(mine, "results.json")); string(b) != `{"mine":1}` {
		t.Errorf("the user's results.json was replaced: %q", b)
	}
	if ents, _ := os.ReadDir(mine); len(ents) != 1 {
		t.Errorf("the refused --out kept a trace of the attempt: %v", ents)
	}
}

// One command runs the ablation and writes the tables and figures; report
// redraws them from the saved results.
func TestExperimentAblationThenReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exp")
	so, se, code := mkbench(t, "experiment", "ablation", "--preset", "sine-5shot", "--variants", "rbf,vrf", "--iters", "20", "--eval-tasks", "10", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, se)
	}
	for _, want := range []string{"[1/2] runs/rbf-s1: training", "[2/2] runs/vrf-s1: mse", "| method | variant | sine-5shot (5-shot): MSE |", "Variational RFFs", "files: " + dir} {
		if !strings.Contains(so, want) {
			t.Errorf("stdout lacks %q:\n%s", want, so)
		}
	}
	for _, f := range []string{experiments.FileResults, experiments.FileCSV, experiments.FileMarkdown, experiments.FileExperiment,
		"runs/vrf-s1/" + engine.FileSummary, "figures/learning-curves.png", "figures/learning-curves.svg", "figures/sine-fits.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	md := testutil.ReadFile(t, filepath.Join(dir, experiments.FileMarkdown))
	os.RemoveAll(filepath.Join(dir, "figures"))
	so, se, code = mkbench(t, "report", dir)
	if code != 0 || !strings.Contains(so, "| method |") {
		t.Fatalf("report: exit %d: %s %s", code, so, se)
	}
	if !bytes.Equal(md, testutil.ReadFile(t, filepath.Join(dir, experiments.FileMarkdown))) {
		t.Error("report changed results.md")
	}
	if _, err := os.Stat(filepath.Join(dir, "figures", "sine-fits.svg")); err != nil {
		t.Error(err)
	}
	// The same command again reuses every run.
	so, _, code = mkbench(t, "experiment", "ablation", "--preset", "sine-5shot", "--variants", "rbf,vrf", "--iters", "20", "--eval-tasks", "10", "--out", dir)
	if code != 0 || strings.Count(so, "finished earlier, reusing it") != 2 {
		t.Errorf("rerun: exit %d:\n%s", code, so)
	}
}

// Ctrl-C (SIGINT) stops an experiment with its checkpoint saved; --resume
// finishes it.
func TestExperimentInterruptAndResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exp")
	// The budget ends training after 4 s however many iterations that is.
	cmd := exec.Command(binary, "experiment", "ablation", "--preset", "sine-5shot", "--variants", "vrf", "--iters", "1000000",
		"--minutes", "0.067", "--eval-tasks", "10", "--out", dir)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(dir, "runs", "vrf-s1", engine.FileMetrics)
	waitForRows(t, cmd, metrics)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(se.String(), "mkbench experiment --resume "+dir) {
		t.Fatalf("want exit 130 with a resume hint, got %v, %q", err, se.String())
	}
	if _, err := engine.LoadCheckpoint(filepath.Join(dir, "runs", "vrf-s1", engine.FileCheckpoint)); err != nil {
		t.Fatalf("checkpoint after Ctrl-C: %v", err)
	}
	so, se2, code := mkbench(t, "experiment", "--resume", dir)
	if code != 0 || !strings.Contains(so, "resuming from its checkpoint") || !strings.Contains(so, "| Variational RFFs |") {
		t.Fatalf("resume: exit %d: %s %s", code, so, se2)
	}
}

// SIGHUP stops an experiment as Ctrl-C does: checkpoint kept, resume hint.
func TestExperimentHangupCheckpoints(t *testing.T) {
	hangupDefault()
	dir := filepath.Join(t.TempDir(), "exp")
	cmd := exec.Command(binary, "experiment", "ablation", "--preset", "sine-5shot", "--variants", "vrf", "--iters", "1000000",
		"--eval-tasks", "10", "--out", dir)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(dir, "runs", "vrf-s1", engine.FileMetrics)
	waitForRows(t, cmd, metrics)
	cmd.Process.Signal(syscall.SIGHUP)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(se.String(), "mkbench experiment --resume "+dir) {
		t.Fatalf("want exit 130 with a resume hint, got %v, %q", err, se.String())
	}
	if ck, err := engine.LoadCheckpoint(filepath.Join(dir, "runs", "vrf-s1", engine.FileCheckpoint)); err != nil || ck.Iter == 0 {
		t.Fatalf("checkpoint after SIGHUP: %v", err)
	}
}

// An experiment's --set overrides are part of it: recorded in
// experiment.json, used again by --resume, and a rerun on the same --out
// with other settings is refused.
func TestExperimentKeepsItsOverrides(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "abl")
	args := []string{"experiment", "ablation", "--preset", "sine-5shot", "--variants", "rbf,vrf", "--iters", "20", "--eval-tasks", "5", "--quiet", "--out", dir}
	if _, stderr, code := mkbench(t, append(args, "--set", "lr=0.0005", "--set", "embed_hidden=16,16")...); code != 0 {
		t.Fatalf("experiment: %d %s", code, stderr)
	}
	var m experiments.Manifest
	data := testutil.ReadFile(t, filepath.Join(dir, experiments.FileExperiment))
	if err := json.Unmarshal(data, &m); err != nil || m.Overrides["lr"] != 0.0005 {
		t.Fatalf("experiment.json overrides %v (%v)", m.Overrides, err)
	}
	cfg := testutil.ReadFile(t, filepath.Join(dir, experiments.DirRuns, "vrf-s1", engine.FileConfig))
	if !strings.Contains(string(cfg), `"lr": 0.0005`) {
		t.Fatalf("the run's config.json does not have the override:\n%s", cfg)
	}
	if _, stderr, code := mkbench(t, "experiment", "--resume", dir, "--quiet"); code != 0 {
		t.Fatalf("resume: %d %s", code, stderr)
	}
	if _, stderr, code := mkbench(t, args...); code == 0 || !strings.Contains(stderr, "--set settings") {
		t.Fatalf("rerun without the overrides: %d %q", code, stderr)
	}
}
