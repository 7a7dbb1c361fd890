package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/runfile"
)

func cmdSweepStatus(dir string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sweep status")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if _, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr); !ok {
		return code
	}
	st, err := sweep.ReadStatus(dir)
	if err != nil {
		return fail(stderr, err)
	}
	sweep.AddQueue(context.Background(), &st)
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%s: %d units: %d finished, %d running, %d pending, %d failed", dir, len(st.Units),
		st.Counts[sweep.StateDone], st.Counts[sweep.StateRunning], st.Counts[sweep.StatePending], st.Counts[sweep.StateFailed])
	if st.Cancelled {
		fmt.Fprint(stdout, " (stopped by mkbench sweep cancel)")
	}
	fmt.Fprintln(stdout)
	for _, j := range st.Jobs {
		fmt.Fprintf(stdout, "slurm job %s: %d tasks, submitted %s\n", j.Job, len(j.Indices), j.Time.Local().Format("2006-01-02 15:04:05"))
	}
	if st.SlurmError != "" {
		fmt.Fprintf(stdout, "slurm: %s\n", st.SlurmError)
	}
	for _, u := range st.Units {
		fmt.Fprintf(stdout, "  %3d  %-44s %-8s %s\n", u.Index, u.Name, u.State, unitDetail(u))
	}
	return 0
}

// unitDetail is a status line's detail: progress and latest metric, the
// result when done, the error when failed, the owner and Slurm's state.
func unitDetail(u sweep.UnitStatus) string {
	var parts []string
	switch {
	case u.State == sweep.StateDone && u.Eval != nil:
		parts = append(parts, fmt.Sprintf("%d iters, %s", u.Iters, u.Eval))
	case u.Iters > 0:
		parts = append(parts, fmt.Sprintf("iter %d/%d", u.Iter, u.Iters))
	}
	if u.State != sweep.StateDone && u.Loss != nil {
		parts = append(parts, fmt.Sprintf("loss %.4f", *u.Loss))
	}
	if u.State != sweep.StateDone && u.Val != nil {
		parts = append(parts, fmt.Sprintf("val %.2f%%", 100**u.Val))
	}
	if u.Owner != nil {
		o := fmt.Sprintf("pid %d on %s", u.Owner.PID, u.Owner.Host)
		if u.Owner.Job != "" {
			o += ", job " + u.Owner.Job
		}
		parts = append(parts, o)
	}
	if d := u.DeviceText(); d != "" && d != engine.CPU {
		parts = append(parts, "on "+runs.DeviceText(d))
	}
	if u.Slurm != "" {
		parts = append(parts, "slurm "+strings.TrimSpace(u.Slurm+" "+u.Node))
	}
	if u.Error != "" {
		// failed.json is a file of the sweep directory, which someone may
		// have handed over.
		parts = append(parts, "error: "+runfile.Printable(u.Error))
	}
	return strings.Join(parts, "  ")
}

func cmdSweepResume(dir string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sweep resume")
	engineName, jobs, wait := engineFlags(fs)
	quiet := fs.Bool("quiet", false, "print only the results")
	retry := fs.Bool("retry-failed", false, "also run again the units that failed for good (bad settings, a diverged loss, no progress, a worker that died 3 times in a row), after fixing the cause")
	device := deviceFlag(fs)
	set, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr)
	if !ok {
		return code
	}
	if err := checkPositive(fs, set, "jobs"); err != nil {
		return fail(stderr, err)
	}
	m, err := sweep.Load(dir)
	if err != nil {
		return fail(stderr, err)
	}
	if *engineName == "" {
		*engineName = m.Engine
	}
	if err := checkEngine(*engineName); err != nil {
		return fail(stderr, fmt.Errorf("sweep resume: %w", err))
	}
	// The units keep the device they recorded unless --device says
	// another; units that recorded none (an experiment's) take
	// $MKBENCH_DEVICE, which their workers inherit.
	recorded := ""
	if len(m.Units) > 0 {
		recorded = m.Units[0].Device
	}
	dev, err := workersDevice("sweep resume", set, *device, recorded, *engineName, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	if set["device"] {
		if err := sweep.SetDevice(dir, dev); err != nil {
			return fail(stderr, err)
		}
	}
	st, err := sweep.ReadStatus(dir)
	if err != nil {
		return fail(stderr, err)
	}
	var only []int
	if *engineName == "slurm" {
		// Units Slurm still holds are not submitted twice; tasks Slurm is
		// still stopping (a cancel, a node failure) are waited for, since
		// they may yet be requeued.
		if st, err = settledQueue(dir, stdout); err != nil {
			return fail(stderr, err)
		}
	}
	// A unit that stopped, or whose worker died once or twice (a node
	// failure, a kill), continues from its checkpoint; one that failed for
	// good is run again only when asked, so a unit that fails each time
	// is not retried in a loop.
	cleared := 0
	var kept []string
	for _, u := range st.Units {
		if u.Queued && u.State != sweep.StateDone {
			say(stderr, "note: %s is still in Slurm's queue (%s); not submitted again", u.Name, u.Slurm)
			continue
		}
		if u.State == sweep.StateFailed {
			if u.Permanent && !*retry {
				kept = append(kept, u.Name)
				continue
			}
			if err := sweep.Retry(dir, u.Unit, u.Permanent); err != nil {
				return fail(stderr, err)
			}
			cleared++
		}
		only = append(only, u.Index)
	}
	if err := sweep.Uncancel(dir); err != nil {
		return fail(stderr, err)
	}
	if !*quiet && cleared > 0 {
		fmt.Fprintf(stdout, "%d failed units are tried again\n", cleared)
	}
	if len(kept) > 0 {
		say(stderr, "note: %d units that failed for good are not run again (%s; see mkbench sweep status %s); after fixing the cause: mkbench sweep resume %s --retry-failed",
			len(kept), strings.Join(kept, ", "), dir, dir)
	}
	if only == nil {
		only = []int{}
	}
	code, through := runUnits(dir, *engineName, *jobs, *wait, false, *quiet, only, stdout, stderr)
	if !through {
		return code
	}
	if m.Experiment != "" {
		fmt.Fprintf(stdout, "the experiment's runs are through; draw its results with: mkbench experiment --resume %s\n", dir)
		return code
	}
	return sweepReport(dir, *quiet, stdout, stderr, code)
}

// settledQueue reads the sweep's status with Slurm's states once no task
// of it is COMPLETING (ending, and maybe about to be requeued), waiting up
// to five minutes (Slurm's KillWait is 30 s by default).
func settledQueue(dir string, stdout io.Writer) (sweep.Status, error) {
	deadline := time.Now().Add(5 * time.Minute)
	noted := false
	for {
		st, err := sweep.ReadStatus(dir)
		if err != nil {
			return st, err
		}
		sweep.AddQueue(context.Background(), &st)
		if st.SlurmError != "" {
			return st, fmt.Errorf("sweep: cannot ask Slurm which units it still holds: %s", st.SlurmError)
		}
		ending := 0
		for _, u := range st.Units {
			if u.Slurm == "COMPLETING" {
				ending++
			}
		}
		if ending == 0 || time.Now().After(deadline) {
			return st, nil
		}
		if !noted {
			fmt.Fprintf(stdout, "waiting for Slurm to finish stopping %d tasks\n", ending)
			noted = true
		}
		time.Sleep(sweepPoll / 5)
	}
}

func cmdSweepCancel(dir string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sweep cancel")
	if _, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr); !ok {
		return code
	}
	jobs, stopped, err := sweep.CancelAll(context.Background(), dir)
	for _, j := range jobs {
		fmt.Fprintf(stdout, "cancelled slurm job %s\n", j)
	}
	for _, s := range stopped {
		fmt.Fprintf(stdout, "stopped %s\n", s)
	}
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "units save a checkpoint as they stop; continue with: mkbench sweep resume %s\n", dir)
	return 0
}

func cmdSweepWork(dir string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sweep work")
	index := fs.Int("index", -1, "the unit's index, from 0 (required; a Slurm array task passes $SLURM_ARRAY_TASK_ID)")
	lockWait := fs.Duration("lock-wait", 10*time.Minute, "how long to wait for a unit another live worker holds")
	device := deviceFlag(fs)
	set, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr)
	if !ok {
		return code
	}
	if !set["index"] || *index < 0 {
		return fail(stderr, errors.New("sweep work: --index I (≥ 0) is required"))
	}
	sel, err := deviceSelection("sweep work", set, *device)
	if err != nil {
		return fail(stderr, err)
	}
	// The engines start workers without --device: the unit's device is
	// in sweep.json (workersDevice settled it); a unit that recorded none
	// takes $MKBENCH_DEVICE. A sweep.json that cannot be read is Work's
	// to report.
	if m, lerr := sweep.Load(dir); lerr == nil && !set["device"] && *index < len(m.Units) && m.Units[*index].Device != "" {
		if sel, err = opencl.ParseSelection(m.Units[*index].Device); err != nil {
			return fail(stderr, err)
		}
	}
	label, release, err := useDevice("sweep work", sel, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer release()
	if label != engine.CPU {
		fmt.Fprintf(stdout, "unit %d runs on %s\n", *index, label)
	}
	ctx, cancel := stopContext()
	defer cancel()
	// Started by the local engine, it ends when its coordinator does.
	ctx, cancelOrphan := sweep.WithParent(ctx)
	defer cancelOrphan()
	w := &sweep.Worker{Dir: dir, LockWait: *lockWait, Log: stdout, Baselines: map[string]sweep.BaselineFunc{}}
	for name, bf := range experiments.DefaultBaselines() {
		w.Baselines[name] = func(ctx context.Context, m sweep.Manifest, u sweep.Unit, unitDir string) error {
			return experiments.TrainBaseline(ctx, u.TrainingRun(), bf, unitDir, m.Data)
		}
	}
	err = w.Work(ctx, *index)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, sweep.ErrInterrupted):
		say(stderr, "%v", err)
		if ok, rerr := sweep.RequeueSelf(context.Background(), dir); rerr != nil {
			say(stderr, "could not requeue the job for its time limit: %v", rerr)
		} else if ok {
			say(stderr, "its time limit is near: requeued the job; it continues from the checkpoint")
		}
		return 130
	case errors.Is(err, sweep.ErrCancelled):
		say(stderr, "%v", err)
		return 3
	}
	return fail(stderr, err)
}
