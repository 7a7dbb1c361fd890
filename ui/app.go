package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/ui/session"
)

// Run shows the workbench on the terminal until the user quits, then
// makes sure every run has stopped with a checkpoint and writes to out
// where each run is. The terminal is restored even when the UI panics.
//
// SIGHUP (the terminal closed, tmux kill-session, a dropped ssh), SIGTERM
// and SIGINT quit as q does: every run stops with a checkpoint and the
// program ends; a second signal ends the UI at once and a third stops
// waiting for the checkpoints.
//
// Run returns an error when a run or an experiment failed (or the UI
// did), so that the command's exit status says so.
func Run(opts Options, out io.Writer) error {
	m := New(opts)
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithFPS(20), tea.WithoutSignalHandler())
	ended := make(chan struct{})
	var signaled atomic.Bool
	go func() {
		for n := 1; ; n++ {
			select {
			case <-ended:
				return
			case s := <-sig:
				signaled.Store(true)
				if n == 1 {
					p.Send(signalMsg{s}) // q: stop the runs with a checkpoint, then quit
				} else {
					p.Kill()
				}
			}
		}
	}()
	_, err := p.Run()
	close(ended)
	// Signals from here on (one of the above, or ^C in the restored
	// terminal) stop the wait for the checkpoints, not the process.
	return finish(m, err, signaled.Load(), sig, out)
}

// signalMsg is a signal that ends the workbench.
type signalMsg struct{ os.Signal }

// finish stops what the program left running, writes the summary and
// says how the workbench ended: an error when a run or an experiment
// failed, or when the UI did other than by a signal.
func finish(m Model, err error, signaled bool, sig <-chan os.Signal, out io.Writer) error {
	sess := m.Session()
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
	const grace = 2 * time.Minute
	deadline := time.Now().Add(grace)
	waited := make(chan bool, 1)
	go func() {
		ok := sess.Wait(grace)
		for _, w := range exps {
			ok = w.Wait(time.Until(deadline)) && ok
		}
		waited <- ok
	}()
	select {
	case ok := <-waited:
		if !ok {
			fmt.Fprintln(out, "mkbench: some runs did not stop within 2 minutes; their last checkpoints are kept")
		}
	case <-sig:
		fmt.Fprintln(out, "mkbench: not waiting for the checkpoints; the last ones saved are kept")
		signaled = true
	}
	summarize(out, sess.Runs())
	for _, w := range exps {
		if _, ended, _ := w.Outcome(); !ended {
			fmt.Fprintf(out, "experiment %s did not stop; its last checkpoints are kept\n", w.Dir)
			continue
		}
		summarizeExperiment(out, w)
	}
	if ferr := failures(sess.Runs(), exps); ferr != nil {
		return ferr
	}
	if signaled || errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, tea.ErrInterrupted) {
		return nil // a signal: the runs are checkpointed above
	}
	return err
}

// failures is the error of the runs and experiments that failed (each
// run directory counted by its latest run), or nil.
func failures(runs []*session.Run, exps []*expWorker) error {
	latest := map[string]*session.Run{}
	for _, r := range runs {
		latest[r.Dir] = r
	}
	var failed []string
	for _, r := range runs {
		if latest[r.Dir] != r {
			continue
		}
		if o, ended := r.Outcome(); ended && runFailed(o) {
			failed = append(failed, r.Variant)
		}
	}
	for _, w := range exps {
		if _, ended, err := w.Outcome(); ended && err != nil && !errors.Is(err, context.Canceled) {
			failed = append(failed, "experiment "+filepath.Base(w.Dir))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%s failed (see above)", strings.Join(failed, ", "))
}

// runFailed reports whether a run ended other than finished or stopped
// with its checkpoint.
func runFailed(o session.Outcome) bool {
	return o.Err != nil && !(o.Result.Interrupted && (errors.Is(o.Err, context.Canceled) || errors.Is(o.Err, engine.ErrStopped)))
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
		case !runFailed(o):
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
