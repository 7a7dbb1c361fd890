package ui

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/experiments"
)

// The experiment's worker: the Runner in its own goroutine, writing the
// same directory as `mkbench experiment`, and its mailbox, from which
// Update takes the progress at most 20 times a second.

// expWorker runs one experiment. The Runner's Progress callback appends
// to pending under the lock and wakes the reading command; it never
// waits for the UI.
type expWorker struct {
	Dir    string
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{} // one slot: "something is pending"
	last   time.Time     // the reading command's, one at a time

	mu      sync.Mutex
	pending []experiments.Progress
	ended   bool
	res     *experiments.Results
	err     error
}

// expInterval is the shortest time between two batches: 20 a second.
const expInterval = time.Second / 20

// maxExpPending bounds the undrained reports should nobody read them.
const maxExpPending = 1 << 14

func startExperiment(r *experiments.Runner) *expWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &expWorker{Dir: r.Dir, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	r.Progress = w.progress
	r.Snapshots = true
	r.ReportEvery = 250 * time.Millisecond
	go func() {
		defer close(w.done)
		var res *experiments.Results
		var err error
		func() {
			// A panic must not take the terminal with it: it becomes the
			// experiment's error.
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("experiments: internal error: %v", p)
				}
			}()
			res, err = r.Run(ctx)
		}()
		w.mu.Lock()
		w.ended, w.res, w.err = true, res, err
		w.mu.Unlock()
		w.wake()
	}()
	return w
}

func (w *expWorker) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *expWorker) progress(p experiments.Progress) {
	w.mu.Lock()
	if len(w.pending) >= maxExpPending {
		w.pending = append(w.pending[:0], w.pending[maxExpPending/2:]...)
	}
	w.pending = append(w.pending, p)
	w.mu.Unlock()
	w.wake()
}

// Stop cancels the experiment: the current run saves a checkpoint and
// Run returns; the directory can be resumed.
func (w *expWorker) Stop() { w.cancel() }

// Wait waits up to timeout for the experiment to end.
func (w *expWorker) Wait(timeout time.Duration) bool {
	select {
	case <-w.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Outcome is how the experiment ended, once it has.
func (w *expWorker) Outcome() (res *experiments.Results, ended bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res, w.ended, w.err
}

// expBatchMsg carries what one experiment reported since the last batch.
type expBatchMsg struct {
	w     *expWorker
	ps    []experiments.Progress
	ended bool
	err   error // how it ended
}

// waitExp is the command that brings the next batch; Update re-arms it
// until the experiment has ended.
func waitExp(w *expWorker) tea.Cmd {
	return func() tea.Msg {
		<-w.notify
		if d := time.Until(w.last.Add(expInterval)); d > 0 {
			time.Sleep(d)
		}
		w.last = time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		ps := w.pending
		w.pending = nil
		return expBatchMsg{w: w, ps: ps, ended: w.ended, err: w.err}
	}
}

// expRegistry keeps every experiment the workbench started, so that
// whoever runs the program can stop them afterwards (Run).
type expRegistry struct {
	mu      sync.Mutex
	workers []*expWorker
}

func (r *expRegistry) add(w *expWorker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workers = append(r.workers, w)
}

// Workers are the experiments started so far.
func (r *expRegistry) Workers() []*expWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.workers)
}
