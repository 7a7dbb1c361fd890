package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
)

// writeSweepFile writes a sweep file into a temporary folder.
func writeSweepFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameUnitFiles checks that every unit of sweep a has the metrics.jsonl
// and final evaluation of its namesake in sweep b, byte for byte.
func sameUnitFiles(t *testing.T, a, b string) {
	t.Helper()
	m, err := sweep.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range m.Units {
		ma, _ := os.ReadFile(filepath.Join(a, u.Dir, engine.FileMetrics))
		mb, _ := os.ReadFile(filepath.Join(b, u.Dir, engine.FileMetrics))
		if len(ma) == 0 || !bytes.Equal(ma, mb) {
			t.Errorf("%s: metrics.jsonl differ (%d and %d bytes)", u.Name, len(ma), len(mb))
		}
		var sa, sb engine.Summary
		readJSONFile(t, filepath.Join(a, u.Dir, engine.FileSummary), &sa)
		readJSONFile(t, filepath.Join(b, u.Dir, engine.FileSummary), &sb)
		if sa.Eval == nil || sb.Eval == nil || sa.Eval.Mean != sb.Eval.Mean || sa.Eval.CI95 != sb.Eval.CI95 {
			t.Errorf("%s: evaluations differ: %v and %v", u.Name, sa.Eval, sb.Eval)
		}
	}
}

func readJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

const cliSweep = `presets: [sine-5shot]
variants: [rbf, vrf]
seeds: [1, 2]
iters: 150
eval_tasks: 10
`

// TestSweepLocalEngine: the local engine's units, run two at a time as
// worker processes, are the runs `mkbench run` makes of the same settings;
// plan, status and report agree; running it again does nothing.
func TestSweepLocalEngine(t *testing.T) {
	file := writeSweepFile(t, cliSweep)
	out, errOut, code := mkbench(t, "sweep", "plan", file)
	if code != 0 || !strings.Contains(out, "4 units (1 presets × 2 variants × 1 grid points × 2 seeds)") || !strings.Contains(out, "sine-5shot-vrf-s2") {
		t.Fatalf("plan (exit %d):\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(t.TempDir(), "sw")
	out, errOut, code = mkbench(t, "sweep", "run", file, "--out", dir, "--jobs", "2")
	if code != 0 {
		t.Fatalf("sweep run (exit %d):\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"local engine: 4 units, 2 at a time", "4 of 4 units done", "| sine-5shot | vrf | – |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The unit is the run mkbench run makes with the same settings.
	run := filepath.Join(t.TempDir(), "run")
	if _, e, c := mkbench(t, "run", "--preset", "sine-5shot", "--variant", "vrf", "--seed", "2", "--iters", "150", "--eval-tasks", "10", "--out", run, "--quiet"); c != 0 {
		t.Fatal(e)
	}
	a, _ := os.ReadFile(filepath.Join(run, engine.FileMetrics))
	b, _ := os.ReadFile(filepath.Join(dir, "units", "sine-5shot-vrf-s2", engine.FileMetrics))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the unit's metrics.jsonl differs from mkbench run's (%d and %d bytes)", len(a), len(b))
	}
	out, _, code = mkbench(t, "sweep", "status", dir, "--json")
	var st sweep.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Counts[sweep.StateDone] != 4 {
		t.Fatalf("status (exit %d): %s", code, out)
	}
	// Again: nothing to do.
	out, _, code = mkbench(t, "sweep", "run", file, "--out", dir)
	if code != 0 || !strings.Contains(out, "every unit is finished") {
		t.Errorf("second run (exit %d):\n%s", code, out)
	}
	out, _, code = mkbench(t, "report", dir)
	if code != 0 || !strings.Contains(out, "4 of 4 units done") {
		t.Errorf("report (exit %d):\n%s", code, out)
	}
	// Another sweep file on the same directory is refused.
	other := writeSweepFile(t, "presets: [sine-3shot]\n")
	if _, e, c := mkbench(t, "sweep", "run", other, "--out", dir); c == 0 || !strings.Contains(e, "was started from another sweep file") {
		t.Errorf("other sweep file: exit %d: %s", c, e)
	}
}

// TestSweepWorkerKilled: a worker killed with SIGKILL mid-unit (a node
// that dies) leaves a unit that says its worker died, and that the next
// worker continues from its checkpoint to the metrics.jsonl of an
// uninterrupted run, byte for byte.
func TestSweepWorkerKilled(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [5]\niters: 2500\neval_tasks: 10\ngrid:\n  checkpoint_sec: [1]\n")
	whole := filepath.Join(t.TempDir(), "whole")
	if out, e, c := mkbench(t, "sweep", "run", file, "--out", whole, "--quiet"); c != 0 {
		t.Fatalf("%s%s", out, e)
	}
	cut := filepath.Join(t.TempDir(), "cut")
	if _, e, c := mkbench(t, "sweep", "run", file, "--out", cut, "--engine", "slurm", "--dry-run"); c != 0 && !strings.Contains(e, "slurm") {
		t.Fatal(e)
	}
	if _, err := sweep.Load(cut); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(cut, "units", "sine-5shot-vrf-checkpoint_sec1-s5")
	cmd := exec.Command(binary, "sweep", "work", cut, "--index", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ck, err := engine.LoadCheckpoint(filepath.Join(unit, engine.FileCheckpoint))
		if err == nil && ck.Iter > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no checkpoint past iteration 0 within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(unit, engine.FileSummary)); err == nil {
		t.Fatal("the unit finished before the kill; the test kills it too late")
	}
	// No coordinator saw it die: the unit's files say so.
	out, e, c := mkbench(t, "sweep", "status", cut)
	if c != 0 || !strings.Contains(out, "1 failed") || !strings.Contains(out, fmt.Sprintf("worker pid %d on", cmd.Process.Pid)) || !strings.Contains(out, "died") {
		t.Errorf("status after the kill (exit %d): %s%s", c, out, e)
	}
	if out, e, c := mkbench(t, "sweep", "work", cut, "--index", "0"); c != 0 || !strings.Contains(out, "resuming at iteration") {
		t.Fatalf("second worker (exit %d): %s%s", c, out, e)
	}
	sameUnitFiles(t, whole, cut)
}

func TestSweepBadInput(t *testing.T) {
	good := writeSweepFile(t, cliSweep)
	bad := writeSweepFile(t, "presets: [sine-5shot]\ngrid:\n  way: [5]\n")
	notSweep := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "frob"}, `sweep: unknown command "frob"`},
		{[]string{"sweep", "plan"}, "name the sweep file FILE"},
		{[]string{"sweep", "plan", "/nonexistent.yaml"}, "cannot read the sweep file"},
		{[]string{"sweep", "plan", bad}, "s.yaml:3: grid.way:"},
		{[]string{"sweep", "run", good, "--engine", "cloud"}, `--engine "cloud": want local or slurm`},
		{[]string{"sweep", "run", good, "--dry-run"}, "--dry-run applies to --engine slurm"},
		{[]string{"sweep", "run", good, "--jobs", "0"}, "--jobs must be positive"},
		{[]string{"sweep", "status", notSweep}, "is not a sweep directory"},
		{[]string{"sweep", "resume", notSweep}, "is not a sweep directory"},
		{[]string{"sweep", "work", notSweep}, "--index I (≥ 0) is required"},
		{[]string{"sweep", "work", notSweep, "--index", "0"}, "is not a sweep directory"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--engine", "cloud"}, `--engine "cloud"`},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--slurm", good}, "--slurm FILE applies to --engine slurm"},
	}
	for _, c := range cases {
		_, e, code := mkbench(t, c.args...)
		if code == 0 || !strings.Contains(e, c.want) || strings.Count(e, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", c.args, code, e, c.want)
		}
	}
}

// TestExperimentOnLocalEngine: an experiment whose runs go to the local
// engine gives the results of the one-after-another experiment.
func TestExperimentOnLocalEngine(t *testing.T) {
	args := []string{"experiment", "ablation", "--preset", "sine-5shot", "--variants", "rbf,vrf", "--seeds", "1,2", "--iters", "120", "--eval-tasks", "10", "--quiet"}
	seq := filepath.Join(t.TempDir(), "seq")
	if out, e, c := mkbench(t, append(args, "--out", seq)...); c != 0 {
		t.Fatalf("%s%s", out, e)
	}
	par := filepath.Join(t.TempDir(), "par")
	if out, e, c := mkbench(t, append(args, "--out", par, "--engine", "local", "--jobs", "2")...); c != 0 {
		t.Fatalf("%s%s", out, e)
	}
	sameUnitFiles(t, par, seq)
	a, b := resultColumns(t, seq), resultColumns(t, par)
	if a != b {
		t.Errorf("results.csv differ beyond the timings:\n%s\n---\n%s", a, b)
	}
}

// resultColumns is an experiment's results.csv without its timing columns.
func resultColumns(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("results.csv: %v", err)
	}
	var out strings.Builder
	for _, r := range rows {
		for i, v := range r {
			if h := rows[0][i]; h != "train_seconds" && h != "ms_per_iter" {
				out.WriteString(v + ",")
			}
		}
		out.WriteString("\n")
	}
	return out.String()
}

// TestSweepCancelLocal: sweep cancel stops a local sweep's running unit
// (it saves a checkpoint) and the units not started; resume finishes them.
func TestSweepCancelLocal(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [1, 2]\niters: 100000\neval_tasks: 10\n")
	dir := filepath.Join(t.TempDir(), "sw")
	run := exec.Command(binary, "sweep", "run", file, "--out", dir, "--jobs", "1")
	var out strings.Builder
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "units", "sine-5shot-vrf-s1")
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(unit, engine.FileCheckpoint)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			run.Process.Kill()
			t.Fatalf("the first unit never checkpointed:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	o, e, c := mkbench(t, "sweep", "cancel", dir)
	if c != 0 || !strings.Contains(o, "stopped sine-5shot-vrf-s1 (pid") {
		t.Fatalf("cancel (exit %d): %s%s", c, o, e)
	}
	err := run.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out.String(), "2 of 2 units were cancelled") {
		t.Fatalf("sweep run after cancel: %v\n%s", err, out.String())
	}
	o, _, _ = mkbench(t, "sweep", "status", dir)
	if !strings.Contains(o, "2 pending, 0 failed (stopped by mkbench sweep cancel)") {
		t.Errorf("status:\n%s", o)
	}
	if _, err := os.Stat(filepath.Join(dir, "units", "sine-5shot-vrf-s2")); err == nil {
		t.Error("a unit started after the cancel")
	}
	// Resumed with fewer iterations it would differ; the units keep theirs,
	// so only check that the cancel left a resumable checkpoint.
	if _, err := engine.LoadCheckpoint(filepath.Join(unit, engine.FileCheckpoint)); err != nil {
		t.Fatal(err)
	}
}
