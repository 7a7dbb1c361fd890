package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/testutil"
)

const deviceSweep = "presets: [sine-5shot]\nvariants: [rbf]\nseeds: [1, 2]\niters: 10\neval_tasks: 5\n"

// sweep plan shows each unit's device: the file's, else $MKBENCH_DEVICE,
// else the CPU; a device: that is none is one line with the forms taken
// and the nearest.
func TestSweepPlanShowsDevice(t *testing.T) {
	t.Setenv(deviceEnv, "")
	rows := func(out string) []string {
		var rs []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "sine-5shot-rbf-s") {
				rs = append(rs, l)
			}
		}
		return rs
	}
	so, se, code := mkbench(t, "sweep", "plan", writeSweepFile(t, deviceSweep+"device: opencl\nslurm: {gres: \"gpu:a100:1\"}\n"))
	if code != 0 || len(rows(so)) != 2 {
		t.Fatalf("plan: exit %d\n%s%s", code, so, se)
	}
	for _, r := range rows(so) {
		if !strings.Contains(r, " opencl ") {
			t.Errorf("plan row %q does not name the device", r)
		}
	}
	if !strings.Contains(so, "on Slurm each unit asks for --gres=gpu:a100:1") {
		t.Errorf("plan does not say what a unit asks Slurm for:\n%s", so)
	}
	so, _, _ = mkbench(t, "sweep", "plan", writeSweepFile(t, deviceSweep))
	for _, r := range rows(so) {
		if !strings.Contains(r, " cpu ") {
			t.Errorf("plan row %q does not say cpu", r)
		}
	}
	if strings.Contains(so, "--gres") {
		t.Errorf("a CPU sweep's plan mentions a GPU:\n%s", so)
	}
	t.Setenv(deviceEnv, "auto")
	so, _, _ = mkbench(t, "sweep", "plan", writeSweepFile(t, deviceSweep), "--json")
	var planned []sweep.Unit
	if err := json.Unmarshal([]byte(so), &planned); err != nil || len(planned) != 2 || planned[0].Device != "auto" {
		t.Errorf("plan --json under %s=auto: %v %+v", deviceEnv, err, planned)
	}

	_, se, code = mkbench(t, "sweep", "plan", writeSweepFile(t, deviceSweep+"device: openlc\n"))
	oneLine(t, "device: openlc", se)
	if code != 1 || !strings.Contains(se, `device: "openlc" is not a device: use cpu, opencl, opencl:N`) || !strings.HasSuffix(strings.TrimSpace(se), "did you mean opencl?") {
		t.Errorf("device: openlc: exit %d, %q", code, se)
	}
}

// On Slurm a unit on a device asks for a GPU and one on the CPU for
// none; sweep run's --device beats the file's device: and is recorded in
// sweep.json, whose units' devices the workers read.
func TestSweepSlurmAsksForGPU(t *testing.T) {
	t.Setenv(deviceEnv, "")
	script := func(file string, args ...string) (string, sweep.Manifest) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "sw")
		so, se, code := mkbench(t, append([]string{"sweep", "run", file, "--engine", "slurm", "--dry-run", "--out", dir}, args...)...)
		if code != 0 {
			t.Fatalf("sweep run %v: exit %d\n%s%s", args, code, so, se)
		}
		m, err := sweep.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return string(testutil.ReadFile(t, filepath.Join(dir, sweep.FileScript))), m
	}
	gpu := writeSweepFile(t, deviceSweep+"device: opencl\n")
	s, m := script(gpu)
	if !strings.Contains(s, "\n#SBATCH --gres=gpu:1\n") || m.Units[1].Device != "opencl" {
		t.Errorf("device: opencl: units on %q, script:\n%s", m.Units[1].Device, s)
	}
	s, m = script(gpu, "--device", "cpu")
	if strings.Contains(s, "--gres") || m.Units[0].Device != "cpu" {
		t.Errorf("--device cpu over device: opencl: units on %q, script:\n%s", m.Units[0].Device, s)
	}
	t.Setenv(deviceEnv, "opencl:1") // the file's device: beats the variable
	s, m = script(writeSweepFile(t, deviceSweep+"device: cpu\n"))
	if strings.Contains(s, "--gres") || m.Units[0].Device != "cpu" {
		t.Errorf("device: cpu under %s=opencl:1: units on %q, script:\n%s", deviceEnv, m.Units[0].Device, s)
	}
	s, m = script(writeSweepFile(t, deviceSweep))
	if !strings.Contains(s, "--gres=gpu:1") || m.Units[0].Device != "opencl:1" {
		t.Errorf("no device: under %s=opencl:1: units on %q, script:\n%s", deviceEnv, m.Units[0].Device, s)
	}
}

// A unit's device is in its row of sweep status (and --json) and of
// mkbench runs: where it ran once finished (summary.json's), what its
// worker was asked for before.
func TestSweepStatusAndRunsShowDevice(t *testing.T) {
	t.Setenv(deviceEnv, "")
	root := t.TempDir()
	dir := filepath.Join(root, "sw")
	so, se, code := mkbenchRuns(t, root, "sweep", "run", writeSweepFile(t, deviceSweep+"device: opencl\n"), "--engine", "slurm", "--dry-run", "--out", dir)
	if code != 0 {
		t.Fatalf("sweep run: exit %d\n%s%s", code, so, se)
	}
	// Unit 0 runs here on the CPU (a worker's --device beats the unit's);
	// unit 1 has begun (its config.json) and waits on its device.
	if so, se, code := mkbenchRuns(t, root, "sweep", "work", dir, "--index", "0", "--device", "cpu"); code != 0 {
		t.Fatalf("sweep work: exit %d\n%s%s", code, so, se)
	}
	m, _ := sweep.Load(dir)
	u0, u1 := filepath.Join(dir, m.Units[0].Dir), filepath.Join(dir, m.Units[1].Dir)
	if err := os.MkdirAll(u1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(u1, engine.FileConfig), testutil.ReadFile(t, filepath.Join(u0, engine.FileConfig)), 0o644); err != nil {
		t.Fatal(err)
	}
	so, se, code = mkbenchRuns(t, root, "sweep", "status", dir)
	lines := strings.Split(so, "\n")
	row := func(name string) string {
		for _, l := range lines {
			if strings.Contains(l, name) {
				return l
			}
		}
		return ""
	}
	if code != 0 || strings.Contains(row(m.Units[0].Name), "on opencl") || !strings.HasSuffix(row(m.Units[1].Name), "on opencl") {
		t.Errorf("status: exit %d\n%s%s", code, so, se)
	}
	so, _, _ = mkbenchRuns(t, root, "sweep", "status", dir, "--json")
	var st sweep.Status
	if err := json.Unmarshal([]byte(so), &st); err != nil || st.Units[0].Ran != "cpu" || st.Units[1].Device != "opencl" {
		t.Errorf("status --json: %v; units %+v", err, st.Units)
	}
	so, se, code = mkbenchRuns(t, root, "runs")
	if code != 0 || !strings.Contains(so, "DEVICE") {
		t.Fatalf("runs: exit %d\n%s%s", code, so, se)
	}
	lines = strings.Split(so, "\n")
	if r := strings.Fields(row(m.Units[0].Name)); len(r) < 2 || r[len(r)-2] != "cpu" {
		t.Errorf("runs row of the finished unit: %q\n%s", row(m.Units[0].Name), so)
	}
	if r := strings.Fields(row(m.Units[1].Name)); len(r) < 2 || r[len(r)-2] != "opencl" {
		t.Errorf("runs row of the waiting unit: %q\n%s", row(m.Units[1].Name), so)
	}
}

// On a real cluster without GPUs (the test cluster defines no gres), a
// sweep on a device asks for one and sbatch refuses it in its own words,
// with what to change; nothing is submitted. Resumed with --device cpu it
// asks for none and finishes there.
func TestSlurmDeviceSweepAsksForGPU(t *testing.T) {
	needSlurm(t)
	t.Setenv(deviceEnv, "")
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, fmt.Sprintf("mkbench-test-gres-%d", os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [rbf]\nseeds: [1]\niters: 10\neval_tasks: 5\ndevice: opencl\nslurm:\n  time: \"00:05:00\"\n")
	_, se, code := mkbench(t, "sweep", "run", file, "--engine", "slurm", "--out", dir)
	oneLine(t, "sweep run on a device", se)
	if code != 1 || !strings.Contains(se, "gres") || !strings.Contains(se, "units on a device ask for --gres=gpu:1") || !strings.Contains(se, "--device cpu") {
		t.Fatalf("a GPU asked of a cluster without one: exit %d, %q", code, se)
	}
	if _, err := os.Stat(filepath.Join(dir, sweep.FileJobs)); err == nil {
		t.Error("a refused submission was recorded in jobs.jsonl")
	}
	so, se, code := mkbench(t, "sweep", "resume", dir, "--engine", "slurm", "--device", "cpu", "--wait", "--quiet")
	if code != 0 {
		t.Fatalf("resume --device cpu: exit %d\n%s%s", code, so, se)
	}
	if s := string(testutil.ReadFile(t, filepath.Join(dir, sweep.FileScript))); strings.Contains(s, "--gres") {
		t.Errorf("a CPU unit asked for a GPU:\n%s", s)
	}
	if st := sweepStatus(t, dir); st.Units[0].Ran != "cpu" || st.Units[0].Device != "cpu" {
		t.Errorf("the unit: asked for %q, ran on %q", st.Units[0].Device, st.Units[0].Ran)
	}
}

// An experiment's training runs are units of a sweep: they record the
// experiment's device as a sweep's units do (so its workers run there and,
// on Slurm, ask for a GPU), and a resume with another --device records
// that one.
func TestExperimentUnitsRecordDevice(t *testing.T) {
	t.Setenv(deviceEnv, "")
	sel, err := opencl.ParseSelection("opencl")
	if err != nil {
		t.Fatal(err)
	}
	dev, _, err := opencl.Open(sel)
	if err != nil {
		testutil.OpenCL(t, err)
	}
	dev.Close()
	dir := filepath.Join(t.TempDir(), "exp")
	devices := func() []string {
		t.Helper()
		m, err := sweep.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		var ds []string
		for _, u := range m.Units {
			ds = append(ds, u.Device)
		}
		return ds
	}
	so, se, code := mkbench(t, "experiment", "ablation", "--preset", "sine-5shot", "--variants", "rbf", "--seeds", "1",
		"--iters", "3", "--eval-tasks", "5", "--engine", "local", "--jobs", "1", "--wait", "--quiet", "--device", "opencl", "--out", dir)
	if code != 0 {
		t.Fatalf("experiment --device opencl: exit %d\n%s%s", code, so, se)
	}
	if ds := devices(); len(ds) != 1 || ds[0] != "opencl" {
		t.Fatalf("units on %q, want [opencl]", ds)
	}
	if so, se, code = mkbench(t, "experiment", "--resume", dir, "--device", "cpu", "--quiet"); code != 0 {
		t.Fatalf("experiment --resume --device cpu: exit %d\n%s%s", code, so, se)
	}
	if ds := devices(); ds[0] != "cpu" {
		t.Errorf("after a resume with --device cpu, units on %q", ds)
	}
	if so, se, code = mkbench(t, "experiment", "--resume", dir, "--quiet"); code != 0 {
		t.Fatalf("experiment --resume: exit %d\n%s%s", code, so, se)
	}
	if ds := devices(); ds[0] != "cpu" {
		t.Errorf("a resume without --device changed the units' device to %q", ds)
	}
}
