package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/ui/session"
)

// Run shows the workbench on the terminal until the user quits, then
// makes sure every run has stopped with a checkpoint and writes to out
// where each run is. The terminal is restored even when the UI panics.
func Run(opts Options, out io.Writer) error {
	m := New(opts)
	sess := m.Session()
	_, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithFPS(20)).Run()
	// Whatever ended the program (quit, a signal, a panic), the runs stop
	// here with their checkpoints; training goroutines never print.
	sess.Close()
	// Experiments likewise: the current run checkpoints and the directory
	// can be resumed from the command line.
	exps := m.Experiments()
	for _, w := range exps {
		w.Stop()
	}
	alive := 0
	for _, r := range sess.Runs() {
		if r.Alive() {
			alive++
		}
	}
	if alive > 0 {
		fmt.Fprintf(out, "waiting for %d run(s) to save their checkpoints…\n", alive)
	}
	if !sess.Wait(2 * time.Minute) {
		fmt.Fprintln(out, "mkbench: some runs did not stop within 2 minutes; their last checkpoints are kept")
	}
	summarize(out, sess.Runs())
	for _, w := range exps {
		if !w.Wait(2 * time.Minute) {
			fmt.Fprintf(out, "experiment %s did not stop within 2 minutes; its last checkpoints are kept\n", w.Dir)
			continue
		}
		summarizeExperiment(out, w)
	}
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, tea.ErrInterrupted) {
		return nil // a signal: the runs are checkpointed above
	}
	return err
}

// summarize writes one line per run: how it ended and where it is.
func summarize(out io.Writer, runs []*session.Run) {
	// A resumed run shares its directory with the run it continues; the
	// latest one tells how it ended.
	latest := map[string]*session.Run{}
	for _, r := range runs {
		latest[r.Dir] = r
	}
	stopped := false
	for _, r := range runs {
		if latest[r.Dir] != r {
			continue
		}
		o, ended := r.Outcome()
		res := o.Result
		switch {
		case !ended:
			fmt.Fprintf(out, "%-10s still stopping → %s\n", r.Variant, r.Dir)
		case o.Err == nil:
			ev := ""
			if res.Eval != nil {
				ev = ", eval " + res.Eval.String()
			}
			fmt.Fprintf(out, "%-10s finished %d iterations%s → %s\n", r.Variant, res.Iters, ev, r.Dir)
		case res.Interrupted && (errors.Is(o.Err, context.Canceled) || errors.Is(o.Err, engine.ErrStopped)):
			fmt.Fprintf(out, "%-10s stopped at iteration %d, checkpointed → %s\n", r.Variant, res.Iters, r.Dir)
			stopped = true
		default:
			fmt.Fprintf(out, "%-10s failed: %v\n", r.Variant, firstLine(o.Err.Error()))
		}
	}
	if stopped {
		fmt.Fprintln(out, "continue a stopped run with: mkbench run --resume DIR")
	}
}

// summarizeExperiment writes how an experiment ended and where it is.
func summarizeExperiment(out io.Writer, w *expWorker) {
	_, _, err := w.Outcome()
	switch {
	case err == nil:
		fmt.Fprintf(out, "experiment finished → %s (results.md, figures/)\n", w.Dir)
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(out, "experiment stopped, runs checkpointed → %s\ncontinue it with: mkbench experiment --resume %s\n", w.Dir, w.Dir)
	default:
		fmt.Fprintf(out, "experiment %s: %v\n", w.Dir, firstLine(err.Error()))
	}
}
