package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
)

// startSweepRun starts `mkbench sweep run` on file and waits until each
// of units has a worker that saved a checkpoint past iteration 0; it
// returns the coordinator, its output, and the workers' pids. Workers
// still alive when the test ends are killed.
func startSweepRun(t *testing.T, file, dir string, jobs string, units ...string) (*exec.Cmd, *strings.Builder, []int) {
	t.Helper()
	run := exec.Command(binary, "sweep", "run", file, "--out", dir, "--jobs", jobs)
	out := &strings.Builder{}
	run.Stdout, run.Stderr = out, out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		run.Process.Kill()
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(time.Minute)
	for _, u := range units {
		unit := filepath.Join(dir, "units", u)
		for {
			ck, err := engine.LoadCheckpoint(filepath.Join(unit, engine.FileCheckpoint))
			held, owner, _ := runfile.Held(unit)
			if err == nil && ck.Iter > 0 && held && owner.PID > 0 {
				pids = append(pids, owner.PID)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never checkpointed under a worker:\n%s", u, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return run, out, pids
}

// TestSweepRunKilledStopsWorkers: a coordinator killed with SIGKILL takes
// its local workers with it (each saves a checkpoint), so no orphan goes
// on training unseen while the sweep's files say otherwise; the units are
// pending, to be continued by sweep resume.
func TestSweepRunKilledStopsWorkers(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [1, 2]\niters: 1000000\neval_tasks: 10\ngrid:\n  checkpoint_sec: [1]\n")
	dir := filepath.Join(t.TempDir(), "sw")
	units := []string{"sine-5shot-vrf-checkpoint_sec1-s1", "sine-5shot-vrf-checkpoint_sec1-s2"}
	run, out, _ := startSweepRun(t, file, dir, "2", units...)
	run.Process.Signal(syscall.SIGKILL)
	run.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range units {
		for {
			held, owner, _ := runfile.Held(filepath.Join(dir, "units", u))
			if !held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: its worker (pid %d) still runs 30 s after its coordinator was killed:\n%s", u, owner.PID, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	o, e, _ := mkbench(t, "sweep", "status", dir)
	if !strings.Contains(o, "2 units: 0 finished, 0 running, 2 pending, 0 failed") {
		t.Errorf("status after the coordinator's kill:\n%s%s", o, e)
	}
}

// TestSweepLocalWorkerDiedSaysWhy: a local worker killed with SIGKILL (as
// the out-of-memory killer does) leaves a unit that says failed, with the
// signal, and sweep run says so.
func TestSweepLocalWorkerDiedSaysWhy(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [3]\niters: 1000000\neval_tasks: 10\ngrid:\n  checkpoint_sec: [1]\n")
	dir := filepath.Join(t.TempDir(), "sw")
	run, out, pids := startSweepRun(t, file, dir, "1", "sine-5shot-vrf-checkpoint_sec1-s3")
	syscall.Kill(pids[0], syscall.SIGKILL)
	err := run.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(out.String(), "died (signal: killed)") {
		t.Errorf("sweep run after its worker's kill: %v\n%s", err, out.String())
	}
	o, e, _ := mkbench(t, "sweep", "status", dir)
	if !strings.Contains(o, "0 pending, 1 failed") || !strings.Contains(o, "died (signal: killed) at iteration") {
		t.Errorf("status:\n%s%s", o, e)
	}
}

// TestSweepResumeRetriesFailedOnlyWhenAsked: sweep resume continues what
// was stopped but does not run a failed unit again unless told to
// (--retry-failed), so a unit that fails each time is not retried in a loop.
func TestSweepResumeRetriesFailedOnlyWhenAsked(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [rff]\nseeds: [1]\niters: 200\neval_tasks: 10\ngrid:\n  lr: [1e12]\n")
	dir := filepath.Join(t.TempDir(), "sw")
	if o, e, c := mkbench(t, "sweep", "run", file, "--out", dir); c != 1 || !strings.Contains(e, "1 of 1 units failed") {
		t.Fatalf("run (exit %d): %s%s", c, o, e)
	}
	starts := func() int {
		rows, _ := runfile.Read[sweep.Start](filepath.Join(dir, "units", "sine-5shot-rff-lr1e12-s1", sweep.FileStarts))
		n := 0
		for _, r := range rows {
			if !r.Retry {
				n++
			}
		}
		return n
	}
	n := starts()
	o, e, c := mkbench(t, "sweep", "resume", dir)
	if c != 1 || starts() != n || !strings.Contains(o+e, "--retry-failed") {
		t.Errorf("resume (exit %d) started the failed unit %d times: %s%s", c, starts()-n, o, e)
	}
	o, e, c = mkbench(t, "sweep", "resume", dir, "--retry-failed")
	if c != 1 || starts() != n+1 {
		t.Errorf("resume --retry-failed (exit %d) started the failed unit %d times: %s%s", c, starts()-n, o, e)
	}
}

// TestSweepRunRefusesUnitOverMemory: a sweep whose unit needs more memory
// than this machine has is refused in one line before any unit starts and
// before a sweep directory is made, rather than unit by unit as each
// worker starts.
func TestSweepRunRefusesUnitOverMemory(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [vrf]\niters: 100\ngrid:\n  bases: [64, 65536]\n  meta_batch: [65536]\n  query: [1000]\n")
	dir := filepath.Join(t.TempDir(), "sw")
	o, e, c := mkbench(t, "sweep", "run", file, "--out", dir)
	if c != 1 || !strings.Contains(e, "needs about") || !strings.Contains(e, "no unit was started") || strings.Count(e, "\n") != 1 {
		t.Errorf("exit %d: %s%s", c, o, e)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a refused sweep left its directory")
	}
}
