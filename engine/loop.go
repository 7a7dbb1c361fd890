package engine

import (
	"context"
	"errors"
	"time"
)

// The training loop.
//
// Run trains with a Loop: the loop runs the steps and keeps the count and
// the training time; everything else a run does is a hook attached to it,
// one per responsibility, in the order Run attaches them (run.go):
//
//	start         (Run holds the directory's lock throughout) the run
//	              directory and config.json (runfiles.go), then
//	              metrics.jsonl and val.jsonl opened and, when resuming,
//	              checked against the checkpoint and cut back to its
//	              iteration (logcheck.go), then a run from iteration 0
//	              writes its iteration-0 checkpoint
//	before a step the workbench's commands (control.go)
//	after a step  the time budget (RunOptions.Budget), the metrics window
//	              and a metrics.jsonl row every LogEvery iterations
//	              (hooks_metrics.go), validation every ValEvery
//	              (hooks_val.go), the observer's throttled snapshots and
//	              display draws (hooks_report.go), the TensorBoard events
//	              of the new log rows and of the display every
//	              SnapshotEvery (hooks_events.go), a checkpoint every
//	              CheckpointSec of training time (hooks_checkpoint.go)
//	end           the Result, the checkpoint of a finished or interrupted
//	              run, and, once finished, the final evaluation,
//	              summary.json and the Done snapshot (run_eval.go)
//
// Hooks belong to one run and run on its goroutine, between steps, so
// they may touch the model. A hook's error ends the loop: as a failure, or,
// wrapped by Interrupt, as an interruption, after which the state is
// consistent and the end hooks checkpoint it. The loop adds no allocation
// to a step: hooks are func values made once per run, and a step's
// statistics reach them by value.

// Hook is called at the start of a loop, or before each step.
type Hook func(l *Loop) error

// StepHook is called after each step with the step's statistics; l.Iter
// already counts the step.
type StepHook func(l *Loop, st StepStats) error

// EndHook is called once the loop has ended, however it ended.
type EndHook func(l *Loop, e Ending) error

// Ending says how a loop ended.
type Ending struct {
	// Finished: every iteration up to End ran.
	Finished bool
	// Interrupted: the context was cancelled or a hook stopped the loop
	// (Interrupt) between two steps, so the state is worth a checkpoint.
	// A loop neither finished nor interrupted failed: its step or a hook
	// returned an error, and the last checkpoint is what must be kept.
	Interrupted bool
	// Err is what ended the loop early; nil when it finished.
	Err error
}

// Loop runs training steps from Start to End and calls the hooks attached
// to it. It keeps the training time: the earlier parts of a resumed run
// plus this loop's time, less what hooks put aside (Exclude). It is owned
// by one goroutine.
type Loop struct {
	Start int       // iterations done when the loop started (a resumed run's checkpoint)
	Iter  int       // iterations done
	End   int       // iterations to do; an after-step hook may lower it to Iter to make that step the last
	Last  StepStats // the latest step's statistics

	step   func(iter int) (StepStats, error)
	start  []Hook
	before []Hook
	after  []StepHook
	end    []EndHook

	ctx     context.Context
	prior   float64       // training seconds before this loop (a resumed run's)
	t0      time.Time     // when training started, moved on by Exclude; zero before
	elapsed time.Duration // Elapsed, frozen once training ended
	ended   bool
}

// NewLoop makes a loop that runs step(iter) for iter from start to end-1
// (0-based iterations), after priorSeconds of training in earlier
// processes.
func NewLoop(start, end int, priorSeconds float64, step func(iter int) (StepStats, error)) *Loop {
	return &Loop{Start: start, Iter: start, End: end, prior: priorSeconds, step: step}
}

// OnStart attaches h to run before the first step; an error from it
// returns from Run at once, without the end hooks.
func (l *Loop) OnStart(h Hook) { l.start = append(l.start, h) }

// BeforeStep attaches h to run before every step.
func (l *Loop) BeforeStep(h Hook) { l.before = append(l.before, h) }

// OnStep attaches h to run after every step.
func (l *Loop) OnStep(h StepHook) { l.after = append(l.after, h) }

// EveryN attaches h to run after every step that completes a multiple of
// n iterations (n > 0) and, with last set, after the last step too.
func (l *Loop) EveryN(n int, last bool, h StepHook) {
	if n <= 0 {
		panic("engine: Loop.EveryN needs a positive n")
	}
	l.OnStep(func(l *Loop, st StepStats) error {
		if l.Iter%n == 0 || last && l.Iter == l.End {
			return h(l, st)
		}
		return nil
	})
}

// Every attaches h to run after the first step that ends once d of
// training time has passed since the loop started or h last returned. A d
// of 0 or less attaches nothing.
func (l *Loop) Every(d time.Duration, h StepHook) {
	if d <= 0 {
		return
	}
	next := d
	l.OnStep(func(l *Loop, st StepStats) error {
		if l.Elapsed() < next {
			return nil
		}
		err := h(l, st)
		next = l.Elapsed() + d
		return err
	})
}

// OnEnd attaches h to run once the loop has ended. End hooks run in the
// order attached until one returns an error, which Run then returns;
// release resources with defer, not here.
func (l *Loop) OnEnd(h EndHook) { l.end = append(l.end, h) }

// Interrupt marks err, returned by a hook, as a stop rather than a
// failure: the loop ends Interrupted with Err set to err. Nil stays nil.
func Interrupt(err error) error {
	if err == nil {
		return nil
	}
	return interruption{err}
}

type interruption struct{ err error }

func (i interruption) Error() string { return i.err.Error() }
func (i interruption) Unwrap() error { return i.err }

// Context is the context Run was given; hooks that wait or check for a
// stop use it.
func (l *Loop) Context() context.Context { return l.ctx }

// Elapsed is this loop's training time: since its first step, less what
// was put aside. It stops when the last step ends.
func (l *Loop) Elapsed() time.Duration {
	if l.ended || l.t0.IsZero() {
		return l.elapsed
	}
	return time.Since(l.t0)
}

// TrainSeconds is the run's training time in seconds, earlier processes'
// included.
func (l *Loop) TrainSeconds() float64 { return l.prior + l.Elapsed().Seconds() }

// Exclude keeps d, spent in a hook between steps, out of the training
// time: pauses, commands and validations are not training.
func (l *Loop) Exclude(d time.Duration) {
	if !l.t0.IsZero() && !l.ended {
		l.t0 = l.t0.Add(d)
	}
}

// Run calls the start hooks, runs the steps until End (or until the
// context is cancelled or a hook or step fails), then calls the end hooks.
// It returns the first end hook's error, else what ended the loop early,
// else nil. A loop runs once.
func (l *Loop) Run(ctx context.Context) error {
	l.ctx = ctx
	for _, h := range l.start {
		if err := h(l); err != nil {
			return err
		}
	}
	l.t0 = time.Now()
	e := l.train(ctx)
	l.elapsed, l.ended = time.Since(l.t0), true
	for _, h := range l.end {
		if err := h(l, e); err != nil {
			return err
		}
	}
	return e.Err
}

// train runs the steps and their hooks.
func (l *Loop) train(ctx context.Context) Ending {
	for l.Iter < l.End {
		if err := ctx.Err(); err != nil {
			return Ending{Interrupted: true, Err: err}
		}
		for _, h := range l.before {
			if err := h(l); err != nil {
				return ending(err)
			}
		}
		st, err := l.step(l.Iter)
		if err != nil {
			return Ending{Err: err}
		}
		l.Iter++
		l.Last = st
		// A stop (Interrupt) from one hook still lets this step's later
		// hooks keep its records: the step is done, its checkpoint will say
		// so, and a resume starts after it (an observer stopping a run at a
		// snapshot iteration once lost that iteration's ω histograms). A
		// failure ends the step at once, and is what the loop reports.
		var stop error
		for _, h := range l.after {
			if err := h(l, st); err != nil {
				if e := ending(err); !e.Interrupted {
					return e
				}
				if stop == nil {
					stop = err
				}
			}
		}
		if stop != nil {
			return ending(stop)
		}
	}
	return Ending{Finished: true}
}

// ending is the Ending of a hook's error.
func ending(err error) Ending {
	var i interruption
	if errors.As(err, &i) {
		return Ending{Interrupted: true, Err: i.err}
	}
	return Ending{Err: err}
}
