package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/testutil"
)

// oneLine fails t unless s is one line (a refusal's whole text).
func oneLine(t *testing.T, what, s string) {
	t.Helper()
	if strings.Count(strings.TrimRight(s, "\n"), "\n") != 0 || s == "" {
		t.Errorf("%s: want one line, got %q", what, s)
	}
}

// A bad --device, or $MKBENCH_DEVICE, is one line naming where it came
// from, the values taken and the nearest one, before anything is read.
func TestDeviceBadValue(t *testing.T) {
	runDir := filepath.Join(t.TempDir(), "never")
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"run", "--preset", "sine-5shot", "--device", "opnecl"}, "", `run: --device "opnecl" is not known: use cpu, opencl, opencl:N (N from mkbench devices) or auto; did you mean opencl?`},
		{[]string{"run", "--preset", "sine-5shot", "--device", "gpu"}, "", `run: --device "gpu" is not known: use cpu, opencl, opencl:N (N from mkbench devices) or auto; for a GPU use opencl (or auto)`},
		{[]string{"run", "--preset", "sine-5shot", "--device", "opencl:one"}, "", `run: --device "opencl:one": "one" is not a device number`},
		{[]string{"run", "--preset", "sine-5shot", "--out", runDir}, "autoo", `run: $MKBENCH_DEVICE "autoo" is not known: use cpu, opencl, opencl:N (N from mkbench devices) or auto; did you mean auto?`},
		{[]string{"run", "--resume", runDir, "--device", "cpuu"}, "", `run: --device "cpuu" is not known`},
		{[]string{"eval", "--run", runDir, "--device", "opencl:-1"}, "", `eval: --device "opencl:-1": "-1" is not a device number`},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--device", "cu"}, "", `experiment: --device "cu" is not known`},
		{[]string{"tui", "--device", "x"}, "", `tui: --device "x" is not known`},
		{[]string{"sweep", "run", "grid.yaml", "--device", "openlc"}, "", `sweep run: --device "openlc" is not known: use cpu, opencl, opencl:N (N from mkbench devices) or auto; did you mean opencl?`},
		{[]string{"sweep", "resume", runDir, "--device", "x"}, "", ""}, // the sweep's directory is read first: its own refusal
		{[]string{"sweep", "work", runDir, "--index", "0"}, "nope", `sweep work: $MKBENCH_DEVICE "nope" is not known`},
	}
	for _, c := range cases {
		t.Setenv(deviceEnv, c.env)
		so, se, code := mkbench(t, c.args...)
		if code != 1 || so != "" {
			t.Errorf("%v (MKBENCH_DEVICE=%q): exit %d, stdout %q", c.args, c.env, code, so)
		}
		oneLine(t, strings.Join(c.args, " "), se)
		if !strings.Contains(se, c.want) {
			t.Errorf("%v (MKBENCH_DEVICE=%q): stderr %q, want %q", c.args, c.env, se, c.want)
		}
	}
	if _, err := os.Stat(runDir); err == nil {
		t.Errorf("a refused --device made %s", runDir)
	}
}

// runBinary runs the built mkbench in a process of its own, with env added
// and $MKBENCH_RUNS a new folder: the OpenCL loader is loaded once per
// process, so a test of a missing one cannot run in this process once
// another test loaded PoCL.
func runBinary(t *testing.T, env []string, args ...string) (so, se string, code int, runs string) {
	t.Helper()
	runs = t.TempDir()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), append([]string{"MKBENCH_RUNS=" + runs}, env...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code, runs
}

// An explicit opencl without its loader is one line naming the file and
// the package, exit 1, and nothing written; auto runs on the CPU, saying
// why in one line; cpu never loads the loader, so it cannot miss it.
func TestDeviceWithoutLoader(t *testing.T) {
	noLoader := []string{"MKBENCH_OPENCL_LIB=" + filepath.Join(t.TempDir(), "libOpenCL.so.1")}
	so, se, code, runs := runBinary(t, noLoader, "run", "--preset", "sine-5shot", "--iters", "5", "--device", "opencl")
	if code != 1 || so != "" || !strings.Contains(se, "run: device opencl: no OpenCL loader") || !strings.Contains(se, "apt-get install ocl-icd-libopencl1") {
		t.Errorf("run --device opencl without a loader: exit %d, stdout %q, stderr %q", code, so, se)
	}
	oneLine(t, "run --device opencl without a loader", se)
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("a refused device left %d entries in the runs root", len(ents))
	}
	_, se, code, _ = runBinary(t, append(noLoader, deviceEnv+"=opencl:0"), "eval", "--model", "sine-5shot")
	if code != 1 || !strings.Contains(se, "eval: device opencl:0: no OpenCL loader") {
		t.Errorf("eval with MKBENCH_DEVICE=opencl:0 without a loader: exit %d, stderr %q", code, se)
	}
	so, se, code, _ = runBinary(t, noLoader, "devices")
	if code != 1 || so != "" || !strings.Contains(se, "devices: no OpenCL loader") {
		t.Errorf("devices without a loader: exit %d, stdout %q, stderr %q", code, so, se)
	}
	oneLine(t, "devices without a loader", se)
	if so, _, code, _ = runBinary(t, noLoader, "devices", "--json"); code != 1 || strings.TrimSpace(so) != "[]" {
		t.Errorf("devices --json without a loader: exit %d, stdout %q, want []", code, so)
	}
	dir := "r"
	so, se, code, runs = runBinary(t, noLoader, "run", "--preset", "sine-5shot", "--iters", "5", "--eval-tasks", "5", "--device", "auto", "--out", dir)
	if code != 0 || !strings.Contains(se, "note: device auto: no OpenCL loader") || !strings.Contains(se, "running on the CPU") {
		t.Fatalf("run --device auto without a loader: exit %d, stdout %q, stderr %q", code, so, se)
	}
	oneLine(t, "auto without a loader", se)
	_, se, code, runs = runBinary(t, noLoader, "experiment", "ablation", "--preset", "sine-5shot", "--iters", "5", "--device", "opencl")
	if code != 1 || !strings.Contains(se, "experiment: device opencl: no OpenCL loader") {
		t.Errorf("experiment --device opencl without a loader: exit %d, stderr %q", code, se)
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("a refused experiment left %d entries in the runs root", len(ents))
	}
	if _, _, code, _ := runBinary(t, noLoader, "run", "--preset", "sine-5shot", "--iters", "5", "--eval-tasks", "5", "--device", "cpu"); code != 0 {
		t.Errorf("run --device cpu with a missing loader named: exit %d", code)
	}
}

// openCLDevices skips the test without an OpenCL platform (fails with
// CI=true).
func openCLDevices(t *testing.T) []opencl.DeviceInfo {
	t.Helper()
	devs, err := opencl.Devices()
	testutil.OpenCL(t, err)
	return devs
}

// mkbench devices lists the devices --device takes, in the table and as
// JSON, in opencl:N order.
func TestDevicesCommand(t *testing.T) {
	devs := openCLDevices(t)
	so, se, code := mkbench(t, "devices")
	if code != 0 || se != "" || !strings.HasPrefix(so, "DEVICE") {
		t.Fatalf("devices: exit %d, stdout %q, stderr %q", code, so, se)
	}
	if lines := strings.Split(strings.TrimSpace(so), "\n"); len(lines) != len(devs)+1 || !strings.Contains(lines[1], devs[0].Name) || !strings.HasPrefix(lines[1], "opencl:0") {
		t.Errorf("devices: want a heading and %d rows naming %s, got\n%s", len(devs), devs[0].Name, so)
	}
	so, _, code = mkbench(t, "devices", "--json")
	var rows []deviceRow
	if err := json.Unmarshal([]byte(so), &rows); err != nil || code != 0 {
		t.Fatalf("devices --json: exit %d, %v: %s", code, err, so)
	}
	if len(rows) != len(devs) || rows[0].Device != "opencl:0" || rows[0].Name != devs[0].Name || rows[0].ComputeUnits != devs[0].ComputeUnits || rows[0].Memory != devs[0].GlobalMem || rows[0].Memory == 0 {
		t.Errorf("devices --json: %+v, want the devices %+v", rows, devs)
	}
	if _, se, code := mkbench(t, "devices", "extra"); code != 1 || !strings.Contains(se, `unexpected argument "extra"`) {
		t.Errorf("devices extra: exit %d, %q", code, se)
	}
}

// readSummary is dir's summary.json.
func readSummary(t *testing.T, dir string) engine.Summary {
	t.Helper()
	var s engine.Summary
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(dir, engine.FileSummary)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A run on a device records it in summary.json and its checkpoint, not
// in config.json; resumed on another device, it says in one line that its
// bytes differ from there on, and on the same device says nothing.
func TestDeviceRecordedAndResumeElsewhere(t *testing.T) {
	devs := openCLDevices(t)
	cpuDir := filepath.Join(t.TempDir(), "cpu")
	if so, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--iters", "20", "--eval-tasks", "5", "--out", cpuDir, "--quiet"); code != 0 {
		t.Fatalf("cpu run: exit %d\n%s%s", code, so, se)
	}
	dir := filepath.Join(t.TempDir(), "run")
	so, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--iters", "20", "--eval-tasks", "5", "--out", dir, "--device", "opencl:0")
	if code != 0 {
		t.Fatalf("run --device opencl:0: exit %d\n%s%s", code, so, se)
	}
	if engine.DeviceLabel() != engine.CPU {
		t.Errorf("after the command the engine still builds models on %s", engine.DeviceLabel())
	}
	label := "opencl:0 " + devs[0].Name + " (" + devs[0].PlatformName + ")"
	if !strings.Contains(so, "20 iterations on "+label+" → ") {
		t.Errorf("the start line does not name the device %q:\n%s", label, so)
	}
	if s := readSummary(t, dir); s.Device != label {
		t.Errorf("summary.json device %q, want %q", s.Device, label)
	}
	if s := readSummary(t, cpuDir); s.Device != engine.CPU {
		t.Errorf("a CPU run's summary.json device %q, want cpu", s.Device)
	}
	if !bytes.Equal(testutil.ReadFile(t, filepath.Join(dir, engine.FileConfig)), testutil.ReadFile(t, filepath.Join(cpuDir, engine.FileConfig))) {
		t.Error("config.json differs between the CPU and the device: the device is no setting")
	}
	ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
	if err != nil || ck.Device != label {
		t.Fatalf("the checkpoint records device %q (%v), want %q", ck.Device, err, label)
	}
	// On the CPU from the device's checkpoint: one line, at the start.
	so, se, code = mkbench(t, "run", "--resume", dir, "--iters", "30")
	if code != 0 {
		t.Fatalf("resume on the CPU: exit %d\n%s%s", code, so, se)
	}
	want := "note: the checkpoint was written on " + label + " and the run continues on cpu: its numbers agree within tolerances, but its bytes differ from an uninterrupted run's from iteration 20 on"
	if strings.Count(se, "bytes differ") != 1 || !strings.Contains(se, want) {
		t.Errorf("resume on another device: stderr %q, want once %q", se, want)
	}
	if s := readSummary(t, dir); s.Device != engine.CPU {
		t.Errorf("summary.json after the CPU's part: device %q, want cpu", s.Device)
	}
	// On the CPU again, and with the device on a CPU run: the same device
	// says nothing; another says it again.
	if _, se, code = mkbench(t, "run", "--resume", dir, "--iters", "40"); code != 0 || strings.Contains(se, "bytes differ") {
		t.Errorf("resume on the same device: exit %d, stderr %q", code, se)
	}
	t.Setenv(deviceEnv, "opencl:0")
	if _, se, code = mkbench(t, "run", "--resume", dir, "--iters", "50"); code != 0 || !strings.Contains(se, "written on cpu and the run continues on "+label) {
		t.Errorf("resume with MKBENCH_DEVICE=opencl:0: exit %d, stderr %q", code, se)
	}
	if _, se, code = mkbench(t, "run", "--resume", dir, "--iters", "60", "--device", "opencl"); code != 0 || strings.Contains(se, "bytes differ") {
		t.Errorf("resume on the same device as opencl: exit %d, stderr %q", code, se)
	}
	// eval on a device says where it ran.
	so, se, code = mkbench(t, "eval", "--run", dir, "--eval-tasks", "5")
	if code != 0 || !strings.Contains(so, "checkpoint) on "+label) {
		t.Errorf("eval with MKBENCH_DEVICE=opencl:0: exit %d, stdout %q, stderr %q", code, so, se)
	}
}

// --device cpu, given or in $MKBENCH_DEVICE, is the CPU engine as before:
// the same bytes as a run without it.
func TestDeviceCPUChangesNoByte(t *testing.T) {
	run := func(env string, extra ...string) string {
		t.Setenv(deviceEnv, env)
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"run", "--preset", "sine-5shot", "--iters", "20", "--eval-tasks", "5", "--out", dir, "--quiet"}, extra...)
		if so, se, code := mkbench(t, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, so, se)
		}
		return dir
	}
	base := run("")
	for _, dir := range []string{run("", "--device", "cpu"), run("cpu"), run("auto", "--device", "cpu")} {
		for _, f := range []string{engine.FileMetrics, engine.FileConfig} {
			if !bytes.Equal(testutil.ReadFile(t, filepath.Join(base, f)), testutil.ReadFile(t, filepath.Join(dir, f))) {
				t.Errorf("%s differs with the CPU device named", f)
			}
		}
		a, b := readSummary(t, base), readSummary(t, dir)
		if a.Eval.Mean != b.Eval.Mean || a.Eval.CI95 != b.Eval.CI95 || a.Final != b.Final || a.Device != engine.CPU || b.Device != engine.CPU {
			t.Errorf("summary.json differs with the CPU device named: eval %v / %v, final %+v / %+v, device %q / %q", a.Eval, b.Eval, a.Final, b.Final, a.Device, b.Device)
		}
		ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
		if err != nil || ck.Device != "" {
			t.Errorf("a CPU checkpoint records device %q (%v), want none", ck.Device, err)
		}
	}
}

// deviceRunEnv gates TestOmniglotDeviceMatchesCPU: its two 100-iteration
// Omniglot runs took 9.4 minutes on the 2-core machine (282 ms an
// iteration on the CPU, 3.3 s with the backbone on PoCL, which shares the
// same cores), too long for every go test ./...
const deviceRunEnv = "MKBENCH_DEVICE_RUN"

// lossCurveTol bounds the relative difference of each metrics.jsonl loss
// (a mean over 10 iterations) between the device's run and the CPU's: at
// iteration 10 they differ by ~1e-5; the drift grows with the steps but
// stays far below what a wrong gradient gives (tens of percent).
const lossCurveTol = 0.02

// The whole short run: omniglot-5w1s for 100 iterations on an
// OpenCL device (PoCL here) ends within 2 points of the CPU run's accuracy
// on the same 100 test tasks, and its loss curve stays close to the CPU's.
// The device sums in other orders, so the runs agree in numbers, not bytes.
func TestOmniglotDeviceMatchesCPU(t *testing.T) {
	if os.Getenv(deviceRunEnv) != "1" {
		t.Skipf("two 100-iteration Omniglot runs take minutes: set %s=1 to run them", deviceRunEnv)
	}
	data := testutil.Data(t, "omniglot")
	openCLDevices(t)
	run := func(device string) string {
		dir := filepath.Join(t.TempDir(), device)
		so, se, code := mkbench(t, "run", "--preset", "omniglot-5w1s", "--iters", "100", "--eval-tasks", "100", "--data", data,
			"--out", dir, "--quiet", "--device", device)
		if code != 0 {
			t.Fatalf("run --device %s: exit %d\n%s%s", device, code, so, se)
		}
		return dir
	}
	cpu, dev := run("cpu"), run("opencl")
	a, b := readSummary(t, cpu), readSummary(t, dev)
	if a.Device != engine.CPU || !strings.HasPrefix(b.Device, "opencl:") {
		t.Fatalf("devices recorded: %q and %q", a.Device, b.Device)
	}
	t.Logf("accuracy: cpu %.4f ± %.4f (%.0f ms/iter), %s %.4f ± %.4f (%.0f ms/iter)",
		a.Eval.Mean, a.Eval.CI95, a.MsPerIter, b.Device, b.Eval.Mean, b.Eval.CI95, b.MsPerIter)
	if d := b.Eval.Mean - a.Eval.Mean; d > 0.02 || d < -0.02 {
		t.Errorf("the device's accuracy %.4f is %.2f points from the CPU's %.4f (want within 2)", b.Eval.Mean, 100*d, a.Eval.Mean)
	}
	rows := func(dir string) []engine.MetricsRow {
		var out []engine.MetricsRow
		for _, l := range strings.Split(strings.TrimSpace(string(testutil.ReadFile(t, filepath.Join(dir, engine.FileMetrics)))), "\n") {
			var r engine.MetricsRow
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	ra, rb := rows(cpu), rows(dev)
	if len(ra) != len(rb) || len(ra) == 0 {
		t.Fatalf("metrics rows: cpu %d, device %d", len(ra), len(rb))
	}
	same := true
	for i := range ra {
		rel := (rb[i].Loss - ra[i].Loss) / ra[i].Loss
		t.Logf("iter %3d  loss cpu %.5f  device %.5f  (%+.2e)", ra[i].Iter, ra[i].Loss, rb[i].Loss, rel)
		if rel > lossCurveTol || rel < -lossCurveTol || rb[i].Iter != ra[i].Iter {
			t.Errorf("iteration %d: the device's loss %.5f is %.1f%% from the CPU's %.5f (want within %.0f%%)",
				ra[i].Iter, rb[i].Loss, 100*rel, ra[i].Loss, 100*lossCurveTol)
		}
		same = same && rb[i] == ra[i]
	}
	if same {
		t.Log("the device's loss curve is the CPU's to the bit: its backbone ran on the CPU")
	}
}

// sweep run --device reaches the units' workers (as $MKBENCH_DEVICE), and
// the coordinator's environment is as it was afterwards; a device that
// cannot open is refused before the sweep directory is made.
func TestSweepForwardsDevice(t *testing.T) {
	devs := openCLDevices(t)
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [rbf]\nseeds: [1]\niters: 10\neval_tasks: 5\n")
	dir := filepath.Join(t.TempDir(), "sweep")
	t.Setenv(deviceEnv, "")
	so, se, code := mkbench(t, "sweep", "run", file, "--out", dir, "--device", "opencl:0", "--quiet")
	if code != 0 {
		t.Fatalf("sweep run --device opencl:0: exit %d\n%s%s", code, so, se)
	}
	if v := os.Getenv(deviceEnv); v != "" {
		t.Errorf("after the sweep %s is %q, want it as it was", deviceEnv, v)
	}
	m, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "opencl:0 " + devs[0].Name + " (" + devs[0].PlatformName + ")"
	if s := readSummary(t, filepath.Join(dir, m.Units[0].Dir)); s.Device != want {
		t.Errorf("the unit's summary.json device %q, want %q", s.Device, want)
	}
	if _, se, code := mkbench(t, "sweep", "run", file, "--out", filepath.Join(t.TempDir(), "s2"), "--device", "opencl:99"); code != 1 || !strings.Contains(se, "sweep run: device opencl:99: no OpenCL device 99") {
		t.Errorf("sweep run --device opencl:99: exit %d, %q", code, se)
	}
}

// The other half of "same results": an Omniglot run on the device
// (the backbone's parameters and Adam's moments kept there, the flows run
// there) killed mid-training checkpoints what the device holds, and
// resumed on the CPU it finishes and evaluates, saying once that its
// bytes differ from there on.
func TestOmniglotDeviceKilledResumesOnCPU(t *testing.T) {
	data := testutil.Data(t, "omniglot")
	devs := openCLDevices(t)
	dir := filepath.Join(t.TempDir(), "run")
	ck := signalledRun(t, []string{deviceEnv + "="}, dir, "--preset", "omniglot-5w1s", "--iters", "100000", "--set", "meta_batch=2",
		"--set", "log_every=1", "--eval-tasks", "10", "--data", data, "--device", "opencl:0")
	label := "opencl:0 " + devs[0].Name + " (" + devs[0].PlatformName + ")"
	if ck.Device != label {
		t.Fatalf("the device's checkpoint records device %q, want %q", ck.Device, label)
	}
	so, se2, code := mkbench(t, "run", "--resume", dir, "--device", "cpu", "--iters", fmtInt(ck.Iter+3), "--quiet")
	if code != 0 || !strings.Contains(so, "eval accuracy") {
		t.Fatalf("resume on the CPU: exit %d\n%s%s", code, so, se2)
	}
	if strings.Count(se2, "bytes differ") != 1 || !strings.Contains(se2, "written on "+label+" and the run continues on cpu") {
		t.Errorf("resume on the CPU: stderr %q, want the one note that the device changed", se2)
	}
	s := readSummary(t, dir)
	if s.Device != engine.CPU || s.Iters != ck.Iter+3 || math.IsNaN(s.Eval.Mean) || s.Eval.Mean <= 0.2 {
		t.Errorf("summary.json after the CPU's part: device %q, iterations %d (want %d), accuracy %v", s.Device, s.Iters, ck.Iter+3, s.Eval.Mean)
	}
}
