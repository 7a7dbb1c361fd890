package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// runUnits runs the sweep's units that are not finished with an engine.
// only, when set, limits them to those indices. through says the units
// are through (run by the local engine, or followed with --wait to their
// end), so the caller draws the results; code is the exit status so far.
func runUnits(dir, engineName string, jobs int, wait, dry, quiet bool, only []int, stdout, stderr io.Writer) (code int, through bool) {
	st, err := sweep.ReadStatus(dir)
	if err != nil {
		return fail(stderr, err), false
	}
	var todo []int
	var failed []string
	for _, u := range st.Units {
		if u.State == sweep.StateDone || only != nil && !slices.Contains(only, u.Index) {
			continue
		}
		if u.State == sweep.StateRunning {
			say(stderr, "note: %s is running (pid %d on %s); it is left to that worker", u.Name, u.Owner.PID, runfile.Printable(u.Owner.Host))
			continue
		}
		if u.State == sweep.StateFailed && u.Permanent {
			failed = append(failed, u.Name) // its worker would refuse it
			continue
		}
		todo = append(todo, u.Index)
	}
	if len(failed) > 0 && !quiet {
		say(stderr, "note: %d units failed for good and are not run again (%s); after fixing the cause: mkbench sweep resume %s --retry-failed",
			len(failed), strings.Join(failed, ", "), dir)
	}
	if m, err := sweep.Load(dir); err != nil {
		return fail(stderr, err), false
	} else if err := checkUnits(m, engineName, todo); err != nil {
		return fail(stderr, err), false
	}
	// The workers run this build, wherever the sweep was started from.
	bin, err := selfPath()
	if err == nil {
		err = sweep.SetBinary(dir, bin)
	}
	if err != nil {
		return fail(stderr, err), false
	}
	ctx, cancel := stopContext()
	defer cancel()
	if len(todo) == 0 && !dry {
		if !quiet {
			fmt.Fprintln(stdout, "every unit is finished or running elsewhere")
		}
		if engineName == "slurm" && wait {
			// Still followed: units of an earlier submission may be queued.
			return followSlurm(ctx, dir, quiet, stdout, stderr)
		}
		return 0, true
	}
	if engineName == "slurm" {
		return runSlurm(ctx, dir, todo, wait, dry, quiet, stdout, stderr)
	}
	l := &sweep.Local{Dir: dir, Binary: bin, Jobs: jobs}
	if !quiet {
		l.Event = func(e sweep.LocalEvent) {
			switch {
			case !e.Done:
				fmt.Fprintf(stdout, "%s: started (log %s)\n", e.Unit.Name, e.Log)
			case e.Err != nil:
				fmt.Fprintf(stdout, "%s: not finished after %s: %v\n", e.Unit.Name, e.Elapsed.Round(time.Second), e.Err)
			default:
				fmt.Fprintf(stdout, "%s: done in %s\n", e.Unit.Name, e.Elapsed.Round(time.Second))
			}
		}
	}
	if !quiet {
		fmt.Fprintf(stdout, "local engine: %d units, %d at a time\n", len(todo), max(min(jobsOrCores(jobs), len(todo)), 1))
	}
	unfinished, err := l.Run(ctx, todo)
	if errors.Is(err, sweep.ErrInterrupted) {
		say(stderr, "sweep interrupted; units saved checkpoints; continue with: mkbench sweep resume %s", dir)
		return 130, false
	}
	if err != nil {
		return fail(stderr, err), false
	}
	if len(unfinished) > 0 {
		why := "failed or were stopped"
		if st, err := sweep.ReadStatus(dir); err == nil && st.Cancelled {
			why = "were cancelled"
		}
		say(stderr, "%d of %d units %s (see mkbench sweep status %s; continue with mkbench sweep resume %s)", len(unfinished), len(todo), why, dir, dir)
		return 1, true
	}
	return 0, true
}

// checkUnits refuses, before any unit starts, a unit whose settings are
// invalid (engine.Config.Validate bounds every size) or, on the local
// engine, need more memory than this machine has: one line naming the
// unit, rather than a failure per unit after others have run. A Slurm
// node's memory is the cluster's, so there only the settings are checked
// here; each worker checks its memory as it starts.
func checkUnits(m sweep.Manifest, engineName string, todo []int) error {
	baselines := experiments.DefaultBaselines()
	for _, i := range todo {
		u := m.Units[i]
		if _, ok := baselines[u.Variant]; ok {
			continue
		}
		check := presets.CheckedConfig
		if engineName != "local" {
			check = func(sp presets.Spec) (presets.Preset, engine.Config, error) { return sp.Config() }
		}
		if _, _, err := check(u.Spec()); err != nil {
			return fmt.Errorf("sweep: unit %s: %w; no unit was started", u.Name, err)
		}
	}
	return nil
}

func jobsOrCores(jobs int) int {
	if jobs > 0 {
		return jobs
	}
	return runtime.NumCPU()
}

// runSlurm submits the units (or with dry only writes the script) and
// with wait follows them (see runUnits).
func runSlurm(ctx context.Context, dir string, todo []int, wait, dry, quiet bool, stdout, stderr io.Writer) (int, bool) {
	if dry {
		m, err := sweep.Load(dir)
		if err != nil {
			return fail(stderr, err), false
		}
		path, err := sweep.WriteScript(m, dir, todo)
		if err != nil {
			return fail(stderr, err), false
		}
		fmt.Fprintf(stdout, "wrote %s (%d array tasks); nothing submitted. Submit with: mkbench sweep resume %s --engine slurm\n", path, len(todo), dir)
		return 0, false
	}
	sub, err := sweep.Submit(ctx, dir, todo)
	if err != nil {
		return fail(stderr, err), false
	}
	if !quiet {
		fmt.Fprintf(stdout, "submitted job array %s (%d tasks; script %s)\n", sub.Job, len(todo), filepath.Join(dir, sweep.FileScript))
	}
	if !wait {
		fmt.Fprintf(stdout, "follow it with: mkbench sweep status %s (or mkbench tui --sweep %s); results: mkbench report %s\n", dir, dir, dir)
		return 0, false
	}
	return followSlurm(ctx, dir, quiet, stdout, stderr)
}

// followSlurm follows a submitted sweep to its end (see runUnits).
func followSlurm(ctx context.Context, dir string, quiet bool, stdout, stderr io.Writer) (int, bool) {
	st, err := follow(ctx, dir, quiet, stdout)
	if errors.Is(err, context.Canceled) {
		say(stderr, "stopped waiting; the sweep's Slurm jobs go on (cancel them with mkbench sweep cancel %s)", dir)
		return 130, false
	}
	if err != nil {
		return fail(stderr, err), false
	}
	if n := len(st.Units) - st.Counts[sweep.StateDone] - st.Counts[sweep.StateFailed]; n > 0 {
		say(stderr, "%d of %d units stopped without finishing (Slurm no longer holds them; see mkbench sweep status %s; run them again with mkbench sweep resume %s)", n, len(st.Units), dir, dir)
		return 1, true
	}
	return 0, true
}

// follow waits until every unit is done or failed, or no longer held by
// Slurm, printing each unit's change of state.
func follow(ctx context.Context, dir string, quiet bool, w io.Writer) (sweep.Status, error) {
	last := map[string]string{}
	for {
		st, err := sweep.ReadStatus(dir)
		if err != nil {
			return st, err
		}
		sweep.AddQueue(ctx, &st)
		queued := 0
		for _, u := range st.Units {
			state := u.State
			if u.Queued {
				queued++
				if u.State != sweep.StateDone {
					state = fmt.Sprintf("%s (slurm %s %s)", u.State, u.Slurm, u.Node)
				}
			}
			if !quiet && last[u.Name] != state {
				fmt.Fprintf(w, "%s  %s: %s\n", time.Now().Format("15:04:05"), u.Name, strings.TrimSpace(state))
			}
			last[u.Name] = state
		}
		if st.SlurmError == "" && (st.Finished() || queued == 0) && st.Counts[sweep.StateRunning] == 0 {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(sweepPoll):
		}
	}
}

// sweepReport writes and prints the sweep's results; the exit status is
// code, or 1 when units failed.
func sweepReport(dir string, quiet bool, stdout, stderr io.Writer, code int) int {
	res, err := sweep.Report(dir)
	if err != nil {
		return fail(stderr, err)
	}
	printSweepResults(stdout, dir, res)
	if res.Failed > 0 {
		return fail(stderr, fmt.Errorf("sweep: %d of %d units failed (see mkbench sweep status %s; after fixing the cause: mkbench sweep resume %s --retry-failed)", res.Failed, res.Units, dir, dir))
	}
	return code
}

func printSweepResults(w io.Writer, dir string, res *sweep.Results) {
	fmt.Fprintf(w, "\n%s", res.Markdown())
	fmt.Fprintf(w, "files: %s (%s, %s, %s", dir, experiments.FileResults, experiments.FileCSV, experiments.FileMarkdown)
	if len(res.Figures) > 0 {
		fmt.Fprintf(w, ", %d figures in %s/", len(res.Figures), experiments.DirFigures)
	}
	fmt.Fprintln(w, ")")
}
