package engine

import (
	"time"

	"github.com/mkbench/mkbench/internal/task"
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

// control serves RunOptions.Control: Run attaches before as a hook before
// every step, so commands are served between iterations on the training
// goroutine.
type control struct {
	ch      <-chan Command
	paused  bool
	m       *Model
	cfg     Config
	evalSrc task.Source // CmdEvaluate's tasks: the validation split, else the test split, else the training source
	rep     *reporter   // snapshots, and the display task
	save    Hook        // writes the checkpoint (a no-op without a run directory)
}

// before is the before-step hook: it serves the pending commands, keeps
// their time out of the training time and the throughput, and interrupts
// the run on an error: the context's, the observer's, or a checkpoint
// that could not be written.
func (c *control) before(l *Loop) error {
	spent, err := c.serve(l)
	l.Exclude(spent)
	return Interrupt(err)
}

// serve handles every pending command before the next step and, while
// paused, waits for more. It returns the time it took.
func (c *control) serve(l *Loop) (time.Duration, error) {
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
			case <-l.Context().Done():
				return time.Since(t0), l.Context().Err()
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
		if err := c.do(l, cmd); err != nil {
			return time.Since(t0), err
		}
	}
}

// do serves one command; an error it returns stops the run.
func (c *control) do(l *Loop, cmd Command) error {
	rep := Reply{Kind: cmd.Kind, Iter: l.Iter}
	var stop error
	switch cmd.Kind {
	case CmdCheckpoint:
		rep.Err = c.save(l)
		stop = rep.Err
	case CmdEvaluate:
		n := cmd.Tasks
		if n <= 0 {
			n = min(QuickEvalTasks, c.cfg.EvalTasks)
		}
		ev, err := c.m.EvaluateOn(c.evalSrc, n, c.cfg.EvalQuery, c.cfg.EvalSamples, c.cfg.Seed)
		if err != nil {
			// A diverging model fails here first; the next training step
			// reports it properly.
			rep.Err = err
			break
		}
		ev.PerTask = nil
		rep.Eval = &ev
		if c.rep.obs != nil {
			s := c.rep.snapshot(l)
			s.Eval = &ev
			stop = c.rep.obs.Observe(s)
		}
	case CmdDisplayTask:
		c.rep.task = cmd.Task
		if c.rep.obs == nil {
			break
		}
		d, err := c.rep.display(l)
		if err != nil {
			rep.Err = err
			stop = err
			break
		}
		if d != nil {
			s := c.rep.snapshot(l)
			s.Display = d
			stop = c.rep.obs.Observe(s)
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
