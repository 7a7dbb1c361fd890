package engine

import (
	"context"
	"time"
)

// CommandKind names what a Command asks a running Run to do.
type CommandKind int

const (
	// CmdCheckpoint saves a checkpoint now (a no-op without a run directory).
	CmdCheckpoint CommandKind = iota + 1
	// CmdEvaluate evaluates the current model on Command.Tasks fresh tasks
	// (of the validation source if the run has one, else of the final
	// evaluation's) and reports the result in a Snapshot with Eval set and
	// Done unset.
	CmdEvaluate
	// CmdDisplayTask switches the display to task Command.Task; a display
	// snapshot of the new task follows at once.
	CmdDisplayTask
	// CmdPause holds training between two iterations. Commands are still
	// served while paused, and cancelling the context still stops the run.
	CmdPause
	// CmdResume continues a paused run.
	CmdResume
)

// QuickEvalTasks is the evaluation size CmdEvaluate uses when Command.Tasks
// is zero: large enough to rank variants, small enough to take a moment.
const QuickEvalTasks = 200

// Command is sent on RunOptions.Control and served between iterations, so
// that everything it touches belongs to the training goroutine.
type Command struct {
	Kind  CommandKind
	Tasks int // CmdEvaluate: tasks to evaluate; 0 means min(QuickEvalTasks, cfg.EvalTasks)
	Task  int // CmdDisplayTask: the display task to draw from now on
	// Reply, if set, is called from the run's goroutine once the command
	// is done. Like an Observer it must return quickly.
	Reply func(Reply)
}

// Reply reports a served Command.
type Reply struct {
	Kind CommandKind
	Iter int         // completed iterations when the command was served
	Eval *EvalResult // CmdEvaluate
	Err  error       // the command failed; the run goes on unless Run returns it
}

// control serves RunOptions.Control for Run.
type control struct {
	ch     <-chan Command
	paused bool
	m      *Model
	cfg    Config
	opts   *RunOptions
	obs    Observer
	save   func(iter int) error
	snap   func(iter int) Snapshot
}

// serve handles every pending command before iteration iter (iter
// iterations are complete) and, while paused, waits for more. It returns
// the time it took, which Run keeps out of the training time and the
// throughput. An error stops the run: the context's, the observer's, or a
// checkpoint that could not be written.
func (c *control) serve(ctx context.Context, iter int) (time.Duration, error) {
	if c.ch == nil {
		return 0, nil
	}
	t0 := time.Now()
	for {
		var cmd Command
		var ok bool
		if c.paused {
			select {
			case cmd, ok = <-c.ch:
			case <-ctx.Done():
				return time.Since(t0), ctx.Err()
			}
		} else {
			select {
			case cmd, ok = <-c.ch:
			default:
				return time.Since(t0), nil
			}
		}
		if !ok {
			// A closed channel can never resume a pause; carry on.
			c.ch, c.paused = nil, false
			return time.Since(t0), nil
		}
		if err := c.do(iter, cmd); err != nil {
			return time.Since(t0), err
		}
	}
}

func (c *control) do(iter int, cmd Command) error {
	rep := Reply{Kind: cmd.Kind, Iter: iter}
	var stop error
	switch cmd.Kind {
	case CmdCheckpoint:
		rep.Err = c.save(iter)
		stop = rep.Err
	case CmdEvaluate:
		n := cmd.Tasks
		if n <= 0 {
			n = min(QuickEvalTasks, c.cfg.EvalTasks)
		}
		// Mid-training checks belong on the validation split; the test
		// split is for the final number.
		src := c.opts.Val
		if src == nil {
			src = c.opts.Test
		}
		if src == nil {
			src = c.m.Src
		}
		ev, err := c.m.EvaluateOn(src, n, c.cfg.EvalQuery, c.cfg.EvalSamples, c.cfg.Seed)
		if err != nil {
			// A diverging model fails here first; the next training step
			// reports it properly.
			rep.Err = err
			break
		}
		ev.PerTask = nil
		rep.Eval = &ev
		if c.obs != nil {
			s := c.snap(iter)
			s.Eval = &ev
			stop = c.obs.Observe(s)
		}
	case CmdDisplayTask:
		c.opts.DisplayTask = cmd.Task
		if c.obs == nil {
			break
		}
		d, err := c.m.Display(iter, cmd.Task, c.opts.DisplayDraws)
		if err != nil {
			rep.Err = err
			stop = err
			break
		}
		if d != nil {
			s := c.snap(iter)
			s.Display = d
			stop = c.obs.Observe(s)
		}
	case CmdPause:
		c.paused = true
	case CmdResume:
		c.paused = false
	}
	if cmd.Reply != nil {
		cmd.Reply(rep)
	}
	return stop
}
