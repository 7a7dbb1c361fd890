package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/testutil"
)

// envWorker makes the test binary a worker process of the sweep it names
// (unit 0), for the tests that kill one.
const envWorker = "MKBENCH_SWEEP_TEST_WORKER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envWorker); dir != "" {
		// The baseline variant maml stands for a unit whose training
		// crashes the process.
		w := &Worker{Dir: dir, Baselines: map[string]BaselineFunc{"maml": func(context.Context, Manifest, Unit, string) error {
			panic("boom: index out of range [7] with length 7")
		}}}
		if err := w.Work(context.Background(), 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Workers, started as this binary, inherit the temporary data-set cache.
	os.Exit(testutil.TempCache(m))
}

// startWorker starts a real worker process on unit 0 of the sweep in dir
// and waits until it has saved a checkpoint past iteration 0.
func startWorker(t *testing.T, dir string, m Manifest) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	unit := filepath.Join(dir, m.Units[0].Dir)
	deadline := time.Now().Add(time.Minute)
	for {
		if ck, err := engine.LoadCheckpoint(filepath.Join(unit, engine.FileCheckpoint)); err == nil && ck.Iter > 0 {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker saved no checkpoint past iteration 0 within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const longSweep = "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [4]\niters: 1000000\neval_tasks: 10\ngrid:\n  checkpoint_sec: [1]\n"

// TestKilledWorkerIsFailed: a worker process killed with SIGKILL (what the
// kernel's out-of-memory killer sends) leaves a unit that says failed, with
// the worker and the iteration it reached, not pending.
func TestKilledWorkerIsFailed(t *testing.T) {
	dir, m := newSweep(t, longSweep)
	cmd := startWorker(t, dir, m)
	st, _ := ReadStatus(dir)
	if st.Units[0].State != StateRunning {
		t.Fatalf("a live worker's unit is %s", st.Units[0].State)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	st, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	u := st.Units[0]
	host, _ := os.Hostname()
	if u.State != StateFailed || st.Counts[StateFailed] != 1 || st.Counts[StatePending] != 0 {
		t.Fatalf("after the kill the unit is %s (counts %v), want failed", u.State, st.Counts)
	}
	want := fmt.Sprintf("worker pid %d on %s died", cmd.Process.Pid, host)
	if !strings.Contains(u.Error, want) || !strings.Contains(u.Error, "at iteration") {
		t.Errorf("reason %q, want it to say %q and the iteration", u.Error, want)
	}
	// A worker started again (a requeue) continues it from its checkpoint.
	starts, _ := runfile.Read[Start](filepath.Join(dir, m.Units[0].Dir, FileStarts))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w := &Worker{Dir: dir}
	if err := w.Work(ctx, 0); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("second worker: %v", err)
	}
	again, _ := runfile.Read[Start](filepath.Join(dir, m.Units[0].Dir, FileStarts))
	if len(again) != len(starts)+1 || again[len(again)-1].Iter == 0 {
		t.Errorf("the second worker did not continue the checkpoint: starts %+v", again)
	}
	// Stopped in order, it is pending again.
	if st, _ := ReadStatus(dir); st.Units[0].State != StatePending {
		t.Errorf("a unit stopped in order is %s: %s", st.Units[0].State, st.Units[0].Error)
	}
}

// died appends to unit's starts.jsonl n starts at iteration iter whose
// workers recorded no end: workers that died.
func died(t *testing.T, unit string, n, iter int) {
	t.Helper()
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		s := Start{Time: time.Now().UTC(), Host: "node7", PID: 1000 + i, Iter: iter, Ends: true}
		if err := runfile.Append(filepath.Join(unit, FileStarts), s, runfile.Shared); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnitThatKeepsDyingFailsForGood: a unit whose worker died maxDeaths
// times in a row is not started again, however often it is resumed or
// requeued; its failure says why; Retry with permanent (sweep resume
// --retry-failed) counts afresh and runs it.
func TestUnitThatKeepsDyingFailsForGood(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	unit := filepath.Join(dir, m.Units[0].Dir)
	died(t, unit, maxDeaths-1, 0)
	st, _ := ReadStatus(dir)
	if u := st.Units[0]; u.State != StateFailed || !u.Died || u.Deaths != maxDeaths-1 || u.Permanent || !strings.Contains(u.Error, "worker pid 1001 on node7 died") {
		t.Fatalf("status %+v", u)
	}
	died(t, unit, 1, 0)
	err := (&Worker{Dir: dir}).Work(context.Background(), 0)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), fmt.Sprintf("died %d times in a row", maxDeaths)) {
		t.Fatalf("error %v", err)
	}
	f, ok := engine.ReadFailure(unit)
	if !ok || !f.Permanent {
		t.Fatalf("failed.json %+v", f)
	}
	st, _ = ReadStatus(dir)
	if u := st.Units[0]; u.State != StateFailed || !u.Permanent || u.Starts != maxDeaths {
		t.Errorf("a unit that kept dying: %+v", u)
	}
	if err := Retry(dir, m.Units[0], true); err != nil {
		t.Fatal(err)
	}
	if err := (&Worker{Dir: dir}).Work(context.Background(), 0); err != nil {
		t.Fatalf("after a retry: %v", err)
	}
	if st, _ := ReadStatus(dir); st.Units[0].State != StateDone {
		t.Errorf("after a retry the unit is %s", st.Units[0].State)
	}
}

// TestOlderStartsAreNotDeaths: the starts of a build that recorded no ends
// say nothing of how its workers ended; such a unit is pending.
func TestOlderStartsAreNotDeaths(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	unit := filepath.Join(dir, m.Units[0].Dir)
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unit, FileStarts), []byte(`{"time":"2026-01-02T03:04:05Z","host":"n1","pid":7,"iter":0}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := ReadStatus(dir); st.Units[0].State != StatePending || st.Units[0].Starts != 1 {
		t.Errorf("status %+v", st.Units[0])
	}
}

// TestQueuedDeadUnitIsPending: a unit whose worker died on a failed node
// and which Slurm holds again (a requeue) is pending, not failed, so that
// --wait follows it on.
func TestQueuedDeadUnitIsPending(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	died(t, filepath.Join(dir, m.Units[0].Dir), 1, 0)
	st, _ := ReadStatus(dir)
	st.applyQueue(map[int]QueueTask{0: {State: "PENDING"}})
	if u := st.Units[0]; u.State != StatePending || st.Counts[StatePending] != 1 || st.Counts[StateFailed] != 0 || !st.Units[0].Queued {
		t.Errorf("a requeued unit whose worker died: %s, counts %v", u.State, st.Counts)
	}
	st, _ = ReadStatus(dir)
	st.applyQueue(map[int]QueueTask{0: {State: "OUT_OF_MEMORY", Node: "n2"}})
	if u := st.Units[0]; u.State != StateFailed || u.Slurm != "OUT_OF_MEMORY" {
		t.Errorf("a unit Slurm no longer holds, whose worker died: %s (slurm %s)", u.State, u.Slurm)
	}
}

// TestWorkerEndsWithItsCoordinator: a worker whose coordinator is gone
// (its parent is no longer the pid it was given) stops; one whose
// coordinator lives goes on.
func TestWorkerEndsWithItsCoordinator(t *testing.T) {
	t.Setenv(EnvParent, fmt.Sprint(os.Getppid()))
	ctx, cancel := WithParent(context.Background())
	select {
	case <-ctx.Done():
		t.Fatal("a worker whose coordinator lives was stopped")
	case <-time.After(1500 * time.Millisecond):
	}
	cancel()
	t.Setenv(EnvParent, "999999999")
	ctx, cancel = WithParent(context.Background())
	defer cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a worker whose coordinator is gone was not stopped")
	}
}

// TestLocalWorkerCrashSaysWhy: a worker process the Go runtime ends with
// a panic is recorded by the local engine as died, with the panic's line.
func TestLocalWorkerCrashSaysWhy(t *testing.T) {
	f, err := ParseFile("t.yaml", []byte("presets: [sine-5shot]\nvariants: [maml]\n"), []string{"maml"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Create(dir, Manifest{File: f, Units: f.Units(), Engine: "local"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envWorker, dir)
	var ended LocalEvent
	l := &Local{Dir: dir, Binary: os.Args[0], Jobs: 1, Event: func(e LocalEvent) {
		if e.Done {
			ended = e
		}
	}}
	unfinished, err := l.Run(context.Background(), []int{0})
	if err != nil || len(unfinished) != 1 {
		t.Fatalf("unfinished %v, error %v", unfinished, err)
	}
	const why = "died (exit status 2: panic: boom: index out of range [7] with length 7) at iteration 0"
	if ended.Err == nil || !strings.Contains(ended.Err.Error(), why) {
		t.Errorf("the engine's event: %v", ended.Err)
	}
	st, _ := ReadStatus(dir)
	if u := st.Units[0]; u.State != StateFailed || u.Permanent || !strings.Contains(u.Error, why) {
		t.Errorf("status %+v", u)
	}
}
