package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/testutil"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mkbench-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "mkbench")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	// Commands run in-process start their sweep workers from the built
	// binary: this process is the test binary.
	workerBinary = binary
	// The binary the tests run inherits the temporary data-set cache.
	code := testutil.TempCache(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// mkbench runs mkbench's command line in this process, as the mkbench
// binary would, and returns its stdout, stderr and exit status. The runs
// root ($MKBENCH_RUNS) is a new temporary folder for each call. In-process
// commands share this process's environment, working directory and
// signal handlers, so a test calling it is never parallel; the few that
// need a process of their own (signals, kills, a terminal, Slurm, the
// environment it starts in) run the built binary.
func mkbench(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return mkbenchRuns(t, t.TempDir(), args...)
}

// mkbenchRuns is mkbench with the runs root runs.
func mkbenchRuns(t *testing.T, runs string, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("MKBENCH_RUNS", runs)
	var so, se bytes.Buffer
	code := cli(args, &so, &se)
	return so.String(), se.String(), code
}

// Every bad input gives one clear line on stderr and a non-zero exit.
func TestBadInputIsOneClearError(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run", "--preset", "sine-7shot"}, `unknown preset "sine-7shot"`},
		{[]string{"run", "--preset", "sine-5shot", "--variant", "metakernal"}, `unknown variant "metakernal"`},
		{[]string{"run", "--preset", "sine-5shot", "--iters", "0"}, "--iters must be positive"},
		{[]string{"run", "--preset", "sine-5shot", "--iters", "-3"}, "--iters must be positive"},
		{[]string{"run", "--preset", "sine-5shot", "--eval-tasks", "0"}, "--eval-tasks must be positive"},
		{[]string{"run", "--preset", "sine-5shot", "--iters", "ten"}, `invalid value "ten"`},
		{[]string{"run", "--preset", "sine-5shot", "--minutes", "1e-12"}, "--minutes: 1e-12 minutes is less than a second of training"},
		{[]string{"run", "--preset", "sine-5shot", "--minutes", "1e300"}, "--minutes: 1e+300 minutes is beyond any training time"},
		{[]string{"run", "--preset", "sine-5shot", "--minutes", "NaN"}, "--minutes: NaN minutes is not a training time"},
		{[]string{"run", "--preset", "sine-5shot", "--minutes", "0"}, "--minutes: 0 is no limit"},
		{[]string{"run", "--preset", "sine-5shot", "--lr", "1"}, "unknown flag --lr (mkbench help run)"},
		{[]string{"run", "--prest", "sine-5shot"}, "unknown flag --prest; did you mean --preset? (mkbench help run)"},
		{[]string{"rnu", "--preset", "sine-5shot"}, `unknown command "rnu"; did you mean run? (mkbench help)`},
		{[]string{"run", "--preset", "omniglot-5ws1"}, `run: unknown preset "omniglot-5ws1"; did you mean omniglot-5w1s?`},
		{[]string{"run", "--preset", "sine-5shot", "--variant", "metakernal"}, `did you mean metakernel?`},
		{[]string{"run", "--preset", "sine-5shot", "--set", "clipnorm=1"}, `unknown setting "clipnorm"; did you mean clip_norm? (mkbench help settings lists them)`},
		{[]string{"eval", "--run", dir, "--eval-task", "3"}, "unknown flag --eval-task; did you mean --eval-tasks? (mkbench help eval)"},
		{[]string{"models", "export", dir, "--model-dir", dir}, "unknown flag --model-dir; did you mean --models-dir? (mkbench help models export)"},
		{[]string{"sweep", "stauts", dir}, `sweep: unknown command "stauts"; did you mean status? (mkbench help sweep)`},
		{[]string{"help", "experimnt"}, `unknown help topic "experimnt"; did you mean experiment?`},
		{[]string{"eval", "--model", "omniglot-5w1"}, `no such model "omniglot-5w1" in the models shipped in mkbench (mkbench models lists them); did you mean omniglot-5w1s?`},
		{[]string{"models", "--dir", dir, "--jsn"}, "unknown flag --jsn; did you mean --json? (mkbench help models)"},
		{[]string{"run", "--preset", "sine-5shot", "--iters"}, "flag needs an argument: --iters"},
		{[]string{"run", "--preset", "sine-5shot", "--xyzzy-plugh", "1"}, "unknown flag --xyzzy-plugh (mkbench help run)"},
		{[]string{"run"}, "--preset is required"},
		{[]string{"run", "--resume", dir}, "is not a run directory"},
		{[]string{"run", "--resume", dir, "--seed", "3"}, "cannot be changed when resuming"},
		{[]string{"eval"}, "give --run DIR (a run directory) or --model NAME"},
		{[]string{"eval", "--model", "omniglot-5w1s", "--eval-tasks", "100000000000"}, "eval_tasks must be at most 1048576"},
		{[]string{"eval", "--run", filepath.Join(dir, "nope")}, "no checkpoint"},
		// Flags that cannot go together are refused before the run is read.
		{[]string{"eval", "--run", filepath.Join(dir, "nope"), "--split", "test"}, "eval: --split applies to --folder DIR"},
		{[]string{"eval", "--run", filepath.Join(dir, "nope"), "--val", "--test-sources", "omniglot"}, "eval: --val evaluates on the run's own validation classes"},
		{[]string{"eval", "--run", filepath.Join(dir, "nope"), "--test-sources", ","}, "eval: --test-sources:"},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--model", "nosuch"}, "--model belongs to the versatility experiment"},
		{[]string{"experiment", "versatility", "--preset", "sine-5shot", "--model", "nosuch", "--seeds", "x"}, "experiment: --seeds"},
		{[]string{"tui", "--iters", "0"}, "--iters must be positive"},
		{[]string{"tui", "--preset", "sine-5shot", "--minutes", "1e-12"}, "tui: --minutes: 1e-12 minutes is less than a second"},
		{[]string{"tui", "--preset", "sine-7shot"}, `unknown preset "sine-7shot"`},
		{[]string{"tui", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		_, se, code := mkbench(t, tc.args...)
		if code == 0 || !strings.Contains(se, tc.want) || strings.Count(strings.TrimSpace(se), "\n") != 0 {
			t.Errorf("mkbench %s: exit %d, stderr %q; want one line containing %q", strings.Join(tc.args, " "), code, se, tc.want)
		}
	}
	// A damaged checkpoint is named as such.
	os.WriteFile(filepath.Join(dir, engine.FileCheckpoint), []byte("garbage"), 0o644)
	if _, se, code := mkbench(t, "eval", "--run", dir); code == 0 || !strings.Contains(se, "damaged") {
		t.Errorf("damaged checkpoint: exit %d, %q", code, se)
	}
}

// Without a terminal (a pipe here, or CI) mkbench does not try to draw
// the workbench: it says why and points at the headless command.
func TestNoTerminalPointsAtRun(t *testing.T) {
	for _, args := range [][]string{nil, {"tui"}, {"tui", "--preset", "sine-5shot"}} {
		so, se, code := mkbench(t, args...)
		if code == 0 || so != "" || !strings.Contains(se, "needs a terminal") || !strings.Contains(se, "mkbench run --preset") ||
			strings.Count(strings.TrimSpace(se), "\n") != 0 {
			t.Errorf("mkbench %v without a terminal: exit %d, stdout %q, stderr %q", args, code, so, se)
		}
	}
	runs := t.TempDir()
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), "CI=true", "MKBENCH_RUNS="+runs)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CI is set") {
		t.Errorf("with CI set: %v, %q", err, out)
	}
	if entries, _ := os.ReadDir(runs); len(entries) != 0 {
		t.Error("mkbench without a terminal wrote a run")
	}
}

// A run without --out lands in $MKBENCH_RUNS under the shared naming
// scheme (preset-variant-sSEED-time), the same the workbench uses.
func TestRunDirNaming(t *testing.T) {
	root := t.TempDir()
	if so, se, code := mkbenchRuns(t, root, "run", "--preset", "sine-3shot", "--variant", "vrf+ctx", "--iters", "2", "--eval-tasks", "5", "--seed", "4", "--quiet"); code != 0 {
		t.Fatalf("exit %d: %s%s", code, so, se)
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "sine-3shot-vrf_ctx-s4-*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], engine.FileSummary)); err != nil {
		t.Fatal(err)
	}
}

func TestPresetsAndVersion(t *testing.T) {
	so, _, code := mkbench(t, "presets")
	for _, p := range []string{"sine-3shot", "sine-5shot", "sine-10shot"} {
		if code != 0 || !strings.Contains(so, p) {
			t.Errorf("presets output lacks %s: %q", p, so)
		}
	}
	if so, se, code := mkbench(t, "--version"); code != 0 || so != "mkbench "+version+"\n" || se != "" {
		t.Errorf("--version: %q", so)
	}
}

// The headless contract: run writes the files, eval reproduces the number,
// and a second run into the same directory is refused.
func TestRunThenEvalReproduces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	so, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--variant", "vrf+ctx", "--iters", "40", "--eval-tasks", "50", "--out", dir)
	if code != 0 {
		t.Fatalf("run failed: %s %s", so, se)
	}
	var sum map[string]any
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(dir, engine.FileSummary)), &sum); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"preset", "variant", "seed", "iters", "train_seconds", "ms_per_iter", "eval"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary.json lacks %q", k)
		}
	}
	ev := sum["eval"].(map[string]any)
	for _, k := range []string{"metric", "mean", "ci95", "tasks"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("summary.json eval lacks %q", k)
		}
	}
	lines := strings.Split(strings.TrimSpace(string(testutil.ReadFile(t, filepath.Join(dir, engine.FileMetrics)))), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 metrics rows for 40 iterations, got %d", len(lines))
	}
	var row map[string]any
	json.Unmarshal([]byte(lines[0]), &row)
	for _, k := range []string{"iter", "loss", "kl", "elbo", "lambda"} {
		if _, ok := row[k]; !ok {
			t.Errorf("metrics row lacks %q", k)
		}
	}
	so, se, code = mkbench(t, "eval", "--run", dir)
	if code != 0 || !strings.Contains(so, "matches summary.json") {
		t.Fatalf("eval did not reproduce the run's number: %s %s", so, se)
	}
	// While another process holds the run, eval is refused, naming it.
	lock, err := runfile.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, se, code = mkbench(t, "eval", "--run", dir)
	lock.Release()
	if code != 1 || !strings.Contains(se, "is in use by pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("eval of a locked run: exit %d, %q", code, se)
	}
	if _, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--iters", "5", "--out", dir); code == 0 || !strings.Contains(se, "already holds a run") {
		t.Fatalf("second run into the same directory: exit %d, %q", code, se)
	}
}

// SIGTERM during a run checkpoints first; --resume then finishes it.
func TestSignalCheckpointsAndResumeFinishes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	ck := signalledRun(t, nil, dir, "--preset", "sine-5shot", "--variant", "vrf", "--iters", "100000")
	so, se2, code := mkbench(t, "run", "--resume", dir, "--iters", fmtInt(ck.Iter+20), "--quiet")
	if code != 0 || !strings.Contains(so, "done") {
		t.Fatalf("resume: exit %d: %s %s", code, so, se2)
	}
}

// signalledRun starts mkbench run with args (and env added) into dir in a
// process of its own, stops it with SIGTERM once it has logged metrics,
// fails t unless it exits 130 with the --resume hint, and returns the
// checkpoint the signal had it write.
func signalledRun(t *testing.T, env []string, dir string, args ...string) *engine.Checkpoint {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run", "--out", dir}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForRows(t, cmd, filepath.Join(dir, engine.FileMetrics))
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(se.String(), "--resume") {
		t.Fatalf("run %v: want exit 130 with a resume hint after SIGTERM, got %v, %q", args, err, se.String())
	}
	ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
	if err != nil {
		t.Fatalf("checkpoint after SIGTERM: %v", err)
	}
	if ck.Iter == 0 {
		t.Fatal("the checkpoint after SIGTERM is at iteration 0")
	}
	return ck
}

// waitForRows waits up to a minute for the child cmd to write its first
// metrics rows to path, killing it and failing t if it never does.
func waitForRows(t *testing.T, cmd *exec.Cmd, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s: no metrics after a minute", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fmtInt(n int) string { return strconv.Itoa(n) }

// --set overrides any preset setting on run, tui and experiment; a bad
// key or value, or a flag and a --set of the same key, is one error line
// naming each.
func TestSetOverrides(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--preset", "sine-5shot", "--set", "lrr=1"}, []string{`--set: unknown setting "lrr"; did you mean lr? (mkbench help settings lists them)`}},
		{[]string{"run", "--preset", "sine-5shot", "--set", "lr=fast", "--set", "bases=many"}, []string{"--set lr=fast: want a number", "--set bases=many: want a whole number"}},
		{[]string{"run", "--preset", "sine-5shot", "--set", "embed_hidden=64,x"}, []string{"--set embed_hidden=64,x: want a comma-separated list"}},
		{[]string{"run", "--preset", "sine-5shot", "--set", "lr"}, []string{`--set: "lr" is not key=value`}},
		{[]string{"run", "--preset", "sine-5shot", "--iters", "5", "--set", "iters=6"}, []string{"--iters and --set iters are the same setting"}},
		{[]string{"run", "--preset", "sine-5shot", "--set", "lr=1", "--set", "lr=2"}, []string{"--set: lr is set twice"}},
		{[]string{"run", "--preset", "sine-5shot", "--set", "way=5"}, []string{`setting not used by this preset: "way"`}},
		{[]string{"run", "--preset", "sine-5shot", "--set", "bases=0"}, []string{"bases must be positive"}},
		{[]string{"run", "--preset", "omniglot-5w1s", "--set", "way=1"}, []string{"way must be at least 2"}},
		{[]string{"run", "--resume", t.TempDir(), "--set", "lr=1"}, []string{"--set cannot be changed when resuming"}},
		{[]string{"run", "--preset", "sine-5shot", "--repair"}, []string{"--repair applies to --resume DIR only"}},
		{[]string{"tui", "--preset", "sine-5shot", "--set", "lrr=1"}, []string{`--set: unknown setting "lrr"`}},
		{[]string{"tui", "--preset", "sine-5shot", "--seed", "2", "--set", "seed=3"}, []string{"--seed and --set seed are the same setting"}},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--set", "lr=fast"}, []string{"--set lr=fast: want a number"}},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--iters", "3", "--set", "iters=4"}, []string{"--iters and --set iters are the same setting"}},
		{[]string{"experiment", "ablation", "--preset", "sine-5shot", "--set", "seed=4"}, []string{"--set seed: give it as --seeds"}},
	} {
		_, se, code := mkbench(t, tc.args...)
		bad := code != 1 || strings.Count(strings.TrimSpace(se), "\n") != 0
		for _, w := range tc.want {
			bad = bad || !strings.Contains(se, w)
		}
		if bad {
			t.Errorf("mkbench %s: exit %d, stderr %q; want one line containing %q", strings.Join(tc.args, " "), code, se, tc.want)
		}
	}

	// The divergence advice's command works, and config.json records the
	// settings ("-" standing for "_").
	dir := filepath.Join(t.TempDir(), "run")
	if so, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--set", "lr=0.0005", "--set", "clip_norm=1",
		"--set", "embed-hidden=32,32", "--iters", "20", "--eval-tasks", "5", "--out", dir); code != 0 {
		t.Fatalf("run with --set: exit %d: %s %s", code, so, se)
	}
	var cfg struct {
		Config engine.Config `json:"config"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(dir, engine.FileConfig)), &cfg); err != nil {
		t.Fatal(err)
	}
	if c := cfg.Config; c.LR != 0.0005 || c.ClipNorm != 1 || c.Iters != 20 || c.EvalTasks != 5 || !slices.Equal(c.EmbedHidden, []int{32, 32}) {
		t.Errorf("config.json: lr %g, clip_norm %g, iters %d, eval_tasks %d, embed_hidden %v", c.LR, c.ClipNorm, c.Iters, c.EvalTasks, c.EmbedHidden)
	}

	// The experiment's runs get the settings too.
	exp := filepath.Join(t.TempDir(), "exp")
	if so, se, code := mkbench(t, "experiment", "ablation", "--preset", "sine-5shot", "--variants", "rbf", "--iters", "2",
		"--eval-tasks", "2", "--set", "lr=0.0005", "--quiet", "--out", exp); code != 0 {
		t.Fatalf("experiment with --set: exit %d: %s %s", code, so, se)
	}
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(exp, "runs", "rbf-s1", engine.FileConfig)), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.LR != 0.0005 {
		t.Errorf("experiment run's lr %g, want 0.0005", cfg.Config.LR)
	}
}

// A run too large for the machine is refused before anything is
// allocated or written: one line with the estimate, the machine's memory
// and the largest size that fits (these used to end in "fatal error:
// runtime: out of memory" or the OOM killer).
func TestTooLargeIsRefused(t *testing.T) {
	for _, args := range [][]string{
		// Each size within its ceiling (Config.Validate's), together far
		// past any machine.
		{"run", "--preset", "sine-5shot", "--set", "bases=65536", "--set", "meta_batch=4096"},
		{"run", "--preset", "sine-5shot", "--set", "bases=40000", "--set", "meta_batch=2048"},
		{"run", "--preset", "omniglot-5w1s", "--set", "bases=65536", "--set", "meta_batch=64"},
		{"experiment", "efficiency", "--preset", "sine-5shot", "--bases", "16,65536", "--set", "meta_batch=4096"},
	} {
		root := t.TempDir()
		out := filepath.Join(root, "out")
		so, line, code := mkbenchRuns(t, root, append(args, "--out", out)...)
		if code != 1 || strings.Count(line, "\n") != 1 || !strings.Contains(line, "needs about") ||
			!strings.Contains(line, "this machine has available") || !regexp.MustCompile(`bases \d+`).MatchString(line) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, so, line)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("%v wrote %v", args, entries)
		}
	}
}

// SIGHUP (a closed terminal, tmux kill-session, a dropped ssh) saves like
// SIGTERM, and a run whose stdout is gone (the terminal's pipe closed)
// does not die writing its progress lines.
func TestHangupCheckpoints(t *testing.T) {
	hangupDefault()
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--preset", "sine-5shot", "--variant", "vrf", "--iters", "100000", "--out", dir)
	var se strings.Builder
	cmd.Stderr = &se
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	stdout.Read(buf) // the first line has begun
	stdout.Close()   // the terminal is gone
	waitForRows(t, cmd, filepath.Join(dir, engine.FileMetrics))
	time.Sleep(2500 * time.Millisecond) // a progress line goes to the closed pipe
	cmd.Process.Signal(syscall.SIGHUP)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(se.String(), "mkbench run --resume "+dir) {
		t.Fatalf("want exit 130 with a resume hint, got %v, %q", err, se.String())
	}
	ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
	if err != nil || ck.Iter == 0 {
		t.Fatalf("checkpoint after SIGHUP: %v", err)
	}
}

// hangupDefault makes the commands a test starts get SIGHUP's default
// action. A test run under nohup passes SIGHUP's "ignored" on to them, and
// mkbench, as it should under nohup, then trains on through the SIGHUP the
// test sends (the hangup tests ran to their 100,000 iterations and the
// package timed out). exec resets a signal the parent handles to its
// default in the child. The handling stays for the test process's life:
// signal.Stop would put SIG_IGN back without signal.Ignored saying so, and
// the next test would pass the ignoring on again.
func hangupDefault() {
	hangupOnce.Do(func() {
		if signal.Ignored(syscall.SIGHUP) {
			signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
		}
	})
}

var hangupOnce sync.Once

// Under nohup a run trains on when its terminal closes, as nohup promises;
// Ctrl-C and SIGTERM still stop it with a checkpoint.
func TestNohupRunTrainsThroughHangup(t *testing.T) {
	nohup, err := exec.LookPath("nohup")
	if err != nil {
		t.Skip("no nohup here")
	}
	dir := filepath.Join(t.TempDir(), "run")
	metrics := filepath.Join(dir, engine.FileMetrics)
	cmd := exec.Command(nohup, binary, "run", "--preset", "sine-5shot", "--variant", "rbf", "--iters", "1000000", "--quiet", "--out", dir)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitForRows(t, cmd, metrics)
	cmd.Process.Signal(syscall.SIGHUP) // nohup has exec'd mkbench: same process
	before := len(testutil.ReadFile(t, metrics))
	time.Sleep(1500 * time.Millisecond)
	if after := len(testutil.ReadFile(t, metrics)); after <= before {
		t.Fatalf("the run stopped logging after SIGHUP under nohup (%d → %d bytes); stderr %q", before, after, se.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(se.String(), "mkbench run --resume "+dir) {
		t.Fatalf("SIGTERM under nohup: want exit 130 with a resume hint, got %v, %q", err, se.String())
	}
}

// A run stopped before its first checkpoint is not a dead end: --resume
// starts its config over and gives an uninterrupted run's bytes; resuming
// a finished run changes nothing and says so.
func TestResumeBeforeFirstCheckpointAndAfterTheEnd(t *testing.T) {
	root := t.TempDir()
	dir, ref := filepath.Join(root, "stopped"), filepath.Join(root, "ref")
	args := []string{"run", "--preset", "sine-5shot", "--variant", "rbf", "--iters", "30", "--eval-tasks", "5", "--quiet", "--out"}
	for _, d := range []string{dir, ref} {
		if _, stderr, code := mkbench(t, append(args, d)...); code != 0 {
			t.Fatalf("run: %d %s", code, stderr)
		}
	}
	// What a kill within the first seconds leaves: config.json and a few
	// metrics rows, no checkpoint.
	for _, f := range []string{engine.FileCheckpoint, engine.FileSummary} {
		os.Remove(filepath.Join(dir, f))
	}
	os.WriteFile(filepath.Join(dir, engine.FileMetrics), testutil.ReadFile(t, filepath.Join(ref, engine.FileMetrics))[:40], 0o644)
	_, stderr, code := mkbench(t, "run", "--resume", dir, "--quiet")
	if code != 0 || !strings.Contains(stderr, "no checkpoint") {
		t.Fatalf("resume without a checkpoint: %d %q", code, stderr)
	}
	if a, b := testutil.ReadFile(t, filepath.Join(dir, engine.FileMetrics)), testutil.ReadFile(t, filepath.Join(ref, engine.FileMetrics)); string(a) != string(b) {
		t.Fatalf("restarted run's metrics differ from an uninterrupted run's")
	}
	sum := testutil.ReadFile(t, filepath.Join(dir, engine.FileSummary))
	stdout, stderr, code := mkbench(t, "run", "--resume", dir)
	if code != 0 || !strings.Contains(stdout, "already finished") {
		t.Fatalf("resume of a finished run: %d %q %q", code, stdout, stderr)
	}
	if string(testutil.ReadFile(t, filepath.Join(dir, engine.FileSummary))) != string(sum) {
		t.Fatal("resuming a finished run rewrote summary.json")
	}
}

// An evaluation's progress line comes once an interval has passed, never
// for the last batch (the result follows at once).
func TestEvalProgressLine(t *testing.T) {
	defer func(d time.Duration) { evalProgressEvery = d }(evalProgressEvery)
	var b strings.Builder
	evalProgressEvery = time.Hour
	p := evalProgress(&b, "")
	p(6, 3000)
	if b.Len() != 0 {
		t.Fatalf("a line before the interval: %q", b.String())
	}
	evalProgressEvery = 0
	p = evalProgress(&b, "")
	p(1200, 3000)
	p(3000, 3000)
	if !regexp.MustCompile(`^evaluating: 1200/3000 tasks  eta [0-9.µnmsh]+\n$`).MatchString(b.String()) {
		t.Errorf("progress lines %q", b.String())
	}
}
