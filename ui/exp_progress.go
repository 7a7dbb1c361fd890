package ui

import (
	"fmt"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The experiment's progress lines, over its results: where it is (run,
// phase, iteration, ETAs) and a bar of the runs done.

// expProgressData is the progress line's content.
type expProgressData struct {
	Kind, Preset string
	Job, Jobs    int
	Name, Phase  string
	Iter, Iters  int
	ItPerSec     float64
	RunETA       time.Duration  // < 0: unknown
	AllETA       time.Duration  // < 0: unknown
	State        runstate.State // running, stopping, finished, stopped or failed
	Failures     bool           // finished, some runs failed
	// Points and PointsDone count the experiment's points (rows); the
	// versatility grid measures its progress by them.
	Points, PointsDone int
}

// expProgress draws two lines: where the experiment is, and a bar of the
// runs done.
func expProgress(t Theme, d expProgressData, w int) string {
	l1 := fmt.Sprintf(" run %d/%d", d.Job, d.Jobs)
	if d.Name != "" {
		l1 += " " + t.Bold.Render(d.Name)
	}
	if d.Phase != "" {
		l1 += " · " + d.Phase
	}
	if d.Iters > 0 && (d.Phase == "training" || d.Phase == "resuming") {
		l1 += fmt.Sprintf(" · iter %s/%s · %s · run ETA %s", count(d.Iter), count(d.Iters), engine.FormatRate(d.ItPerSec), eta(d.RunETA))
	}
	switch {
	case d.State == runstate.Running:
		l1 += " · experiment ETA " + eta(d.AllETA)
	case d.State == runstate.Stopping:
		l1 += " · " + t.Warn.Render(string(d.State)+" (checkpointing)")
	case d.Failures:
		l1 += " · " + t.Warn.Render(string(d.State)+" with failures")
	default:
		l1 += " · " + t.Warn.Render(string(d.State))
	}
	frac := 0.0
	if d.Jobs > 0 {
		done := d.Job - 1
		if d.State == runstate.Finished {
			done = d.Jobs
		}
		frac = float64(done) / float64(d.Jobs)
		if d.Iters > 0 && d.State == runstate.Running {
			frac += float64(d.Iter) / float64(d.Iters) / float64(d.Jobs)
		}
	}
	if d.Kind == experiments.Versatility && d.Points > 0 && d.State != runstate.Finished {
		frac = float64(d.PointsDone) / float64(d.Points)
	}
	l2 := " "
	if bw := min(w-10, 60); bw >= 5 {
		l2 += t.bar(bw, min(frac, 1))
	}
	l2 += fmt.Sprintf(" %3.0f%%", 100*min(frac, 1))
	return block(l1+"\n"+l2, w, 2)
}
