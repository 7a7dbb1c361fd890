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
