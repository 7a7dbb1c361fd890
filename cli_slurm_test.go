package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
)

// needSlurm skips a test unless a real Slurm cluster answers: .ci/run
// starts one on this machine with .ci/slurm-cluster and sets
// MKBENCH_SLURM=1 and SLURM_CONF.
func needSlurm(t *testing.T) {
	t.Helper()
	if os.Getenv("MKBENCH_SLURM") == "" {
		t.Skip("no Slurm cluster: start one with `eval $(.ci/slurm-cluster start | tail -n 1)` and set MKBENCH_SLURM=1 (.ci/run does)")
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%N").CombinedOutput(); err != nil {
		t.Fatalf("MKBENCH_SLURM is set but sinfo fails: %v: %s", err, out)
	}
}

func scontrol(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("scontrol", args...).CombinedOutput(); err != nil {
		t.Fatalf("scontrol %v: %v: %s", args, err, out)
	}
}

// sweepStatus is `mkbench sweep status DIR --json`.
func sweepStatus(t *testing.T, dir string) sweep.Status {
	t.Helper()
	out, e, code := mkbench(t, "sweep", "status", dir, "--json")
	var st sweep.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status (exit %d): %s%s", code, out, e)
	}
	return st
}

// waitFor polls cond every half second for up to limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

const slurmSweep = `presets: [sine-5shot]
variants: [vrf]
seeds: [1, 2, 3]
iters: 3000
eval_tasks: 20
grid:
  checkpoint_sec: [1]
slurm:
  max_parallel: 3
  time: "00:30:00"
`

// TestSlurmSweepSurvivesNodeFailure submits a sweep to a real Slurm
// cluster with --wait, takes the node of a running unit down (Slurm kills
// its task and requeues it), brings the node back, and checks that every
// unit finishes and that each unit's metrics.jsonl and evaluation equal
// those of the same sweep on the local engine, byte for byte.
func TestSlurmSweepSurvivesNodeFailure(t *testing.T) {
	needSlurm(t)
	file := writeSweepFile(t, slurmSweep)
	dir := filepath.Join(t.TempDir(), "slurm")
	run := exec.Command(binary, "sweep", "run", file, "--out", dir, "--engine", "slurm", "--wait")
	var out strings.Builder
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	t.Cleanup(func() {
		exec.Command("scontrol", "update", "nodename=n2", "state=resume").Run()
		if run.ProcessState == nil {
			run.Process.Kill()
		}
		exec.Command("scancel", "--name=mkbench-slurm").Run()
	})

	// A unit running on n2 with a checkpoint past iteration 0.
	var victim sweep.UnitStatus
	waitFor(t, 2*time.Minute, "a unit running on n2 with a checkpoint", func() bool {
		if _, err := os.Stat(filepath.Join(dir, sweep.FileJobs)); err != nil {
			return false
		}
		for _, u := range sweepStatus(t, dir).Units {
			if u.Node != "n2" || u.Slurm != "RUNNING" {
				continue
			}
			if ck, err := engine.LoadCheckpoint(filepath.Join(dir, u.Dir, engine.FileCheckpoint)); err == nil && ck.Iter > 0 {
				victim = u
				return true
			}
		}
		return false
	})
	scontrol(t, "update", "nodename=n2", "state=down", "reason=mkbench-test")
	starts := filepath.Join(dir, victim.Dir, sweep.FileStarts)
	waitFor(t, 2*time.Minute, victim.Name+" to be requeued and started again", func() bool {
		s, _ := runfile.Read[sweep.Start](starts)
		return len(s) >= 2
	})
	scontrol(t, "update", "nodename=n2", "state=resume")

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sweep run --wait: %v\n%s", err, out.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("sweep run --wait did not end within 5 minutes:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "3 of 3 units done") || !regexp.MustCompile(`submitted job array \d+`).MatchString(out.String()) {
		t.Errorf("output:\n%s", out.String())
	}
	s, _ := runfile.Read[sweep.Start](starts)
	if len(s) < 2 || s[0].Iter != 0 || s[len(s)-1].Iter == 0 || s[len(s)-1].Restart < 1 || !strings.Contains(s[len(s)-1].Job, "_") {
		t.Errorf("%s's starts: %+v; want a first start at 0 and a requeued one (SLURM_RESTART_COUNT ≥ 1) from a later checkpoint", victim.Name, s)
	}
	// The same units on the local engine.
	local := filepath.Join(t.TempDir(), "local")
	if o, e, c := mkbench(t, "sweep", "run", file, "--out", local, "--quiet"); c != 0 {
		t.Fatalf("local sweep: %s%s", o, e)
	}
	sameUnitFiles(t, dir, local)
}

// TestSlurmSweepCancelAndResume: sweep cancel stops the running units
// (each saves a checkpoint) and leaves them pending; sweep resume submits
// only the unfinished ones, which continue to the end.
func TestSlurmSweepCancelAndResume(t *testing.T) {
	needSlurm(t)
	file := writeSweepFile(t, strings.Replace(slurmSweep, "seeds: [1, 2, 3]", "seeds: [7, 8]", 1))
	dir := filepath.Join(t.TempDir(), "cancel")
	if o, e, c := mkbench(t, "sweep", "run", file, "--out", dir, "--engine", "slurm"); c != 0 || !strings.Contains(o, "submitted job array") {
		t.Fatalf("submit (exit %d): %s%s", c, o, e)
	}
	t.Cleanup(func() { exec.Command("scancel", "--name=mkbench-cancel").Run() })
	waitFor(t, 2*time.Minute, "both units to run with a checkpoint", func() bool {
		n := 0
		for _, u := range sweepStatus(t, dir).Units {
			if ck, err := engine.LoadCheckpoint(filepath.Join(dir, u.Dir, engine.FileCheckpoint)); err == nil && ck.Iter > 0 && u.State == sweep.StateRunning {
				n++
			}
		}
		return n == 2
	})
	if o, e, c := mkbench(t, "sweep", "cancel", dir); c != 0 || !strings.Contains(o, "cancelled slurm job") {
		t.Fatalf("cancel (exit %d): %s%s", c, o, e)
	}
	waitFor(t, time.Minute, "the cancelled units to stop", func() bool {
		st := sweepStatus(t, dir)
		return st.Counts[sweep.StateRunning] == 0
	})
	st := sweepStatus(t, dir)
	if !st.Cancelled || st.Counts[sweep.StatePending] != 2 {
		t.Fatalf("after cancel: %+v", st.Counts)
	}
	o, e, c := mkbench(t, "sweep", "resume", dir, "--wait")
	if c != 0 || !strings.Contains(o, "2 of 2 units done") {
		t.Fatalf("resume --wait (exit %d): %s%s", c, o, e)
	}
	for _, u := range sweepStatus(t, dir).Units {
		s, _ := runfile.Read[sweep.Start](filepath.Join(dir, u.Dir, sweep.FileStarts))
		if len(s) != 2 || s[1].Iter == 0 {
			t.Errorf("%s: starts %+v; want the resumed start from its checkpoint", u.Name, s)
		}
	}
	local := filepath.Join(t.TempDir(), "local")
	if o, e, c := mkbench(t, "sweep", "run", file, "--out", local, "--quiet"); c != 0 {
		t.Fatalf("local sweep: %s%s", o, e)
	}
	sameUnitFiles(t, dir, local)
}

// TestSlurmTimeLimitRequeues: a unit longer than its Slurm time limit gets
// SIGTERM before the limit (--signal=B:TERM@120), saves a checkpoint,
// requeues itself (Slurm does not requeue a time-out), and continues from
// the checkpoint until it is done, with the metrics.jsonl of a run never
// stopped.
func TestSlurmTimeLimitRequeues(t *testing.T) {
	needSlurm(t)
	if testing.Short() {
		t.Skip("about four minutes: the time limit is three")
	}
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [rbf]\nseeds: [4]\niters: 60000\neval_tasks: 20\nslurm:\n  time: \"3\"\n")
	dir := filepath.Join(t.TempDir(), "limit")
	t.Cleanup(func() { exec.Command("scancel", "--name=mkbench-limit").Run() })
	o, e, c := mkbench(t, "sweep", "run", file, "--out", dir, "--engine", "slurm", "--wait")
	if c != 0 || !strings.Contains(o, "1 of 1 units done") {
		t.Fatalf("sweep run --wait (exit %d): %s%s", c, o, e)
	}
	m, _ := sweep.Load(dir)
	unit := filepath.Join(dir, m.Units[0].Dir)
	s, _ := runfile.Read[sweep.Start](filepath.Join(unit, sweep.FileStarts))
	if len(s) < 2 || s[1].Iter == 0 || s[1].Restart < 1 {
		t.Errorf("starts %+v; want a requeued start from a later checkpoint", s)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, sweep.DirLogs, "*.out"))
	var all strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		all.Write(b)
	}
	if !strings.Contains(all.String(), "requeued the job") {
		t.Errorf("no self-requeue in the logs:\n%s", all.String())
	}
	local := filepath.Join(t.TempDir(), "local")
	if o, e, c := mkbench(t, "sweep", "run", file, "--out", local, "--quiet"); c != 0 {
		t.Fatalf("local sweep: %s%s", o, e)
	}
	sameUnitFiles(t, dir, local)
}

// TestSlurmWorkerKilledIsFailed: an array task's worker killed with
// SIGKILL (as the out-of-memory killer does) leaves a unit that says
// failed, naming the worker, its Slurm job and the iteration, beside
// Slurm's own state of the task; not pending.
func TestSlurmWorkerKilledIsFailed(t *testing.T) {
	needSlurm(t)
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [6]\niters: 1000000\neval_tasks: 10\ngrid:\n  checkpoint_sec: [1]\n")
	dir := filepath.Join(t.TempDir(), "slurmkill")
	if o, e, c := mkbench(t, "sweep", "run", file, "--out", dir, "--engine", "slurm"); c != 0 {
		t.Fatalf("sweep run (exit %d): %s%s", c, o, e)
	}
	t.Cleanup(func() { exec.Command("scancel", "--name=mkbench-slurmkill").Run() })
	var pid int
	waitFor(t, 2*time.Minute, "the unit running with a checkpoint", func() bool {
		u := sweepStatus(t, dir).Units[0]
		ck, err := engine.LoadCheckpoint(filepath.Join(dir, u.Dir, engine.FileCheckpoint))
		if u.State == sweep.StateRunning && u.Owner != nil && err == nil && ck.Iter > 0 {
			pid = u.Owner.PID
			return true
		}
		return false
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var u sweep.UnitStatus
	waitFor(t, time.Minute, "the unit to leave Slurm's hold", func() bool {
		u = sweepStatus(t, dir).Units[0]
		return !u.Queued && u.State != sweep.StateRunning
	})
	if u.State != sweep.StateFailed || !u.Died || !strings.Contains(u.Error, fmt.Sprintf("worker pid %d", pid)) || !strings.Contains(u.Error, "(Slurm job ") || !strings.Contains(u.Error, "at iteration") {
		t.Errorf("after the kill: state %s, slurm %q, error %q", u.State, u.Slurm, u.Error)
	}
	o, _, _ := mkbench(t, "sweep", "status", dir)
	if !strings.Contains(o, "0 pending, 1 failed") || !strings.Contains(o, "died") {
		t.Errorf("status:\n%s", o)
	}
}
