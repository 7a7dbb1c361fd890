package engine

import (
	"fmt"
	"path/filepath"
)

// checkpointer writes a run's checkpoints: every CheckpointSec of training
// time (periodic), on CmdCheckpoint (save), when the loop finishes or is
// interrupted (end), and best.gob for the validator (write). A checkpoint
// carries, besides the model and optimizer, the metrics window and the
// best validation, so that a resumed run goes on exactly as an
// uninterrupted one. Without a run directory it writes nothing.
type checkpointer struct {
	dir            string // the run directory; "" keeps nothing
	preset, source string
	m              *Model
	opt            *Optimizer
	win            *window // the metrics window (metricsLog's)
	best           *best   // the best validation so far (validator's)
	saved          int     // iteration of the last checkpoint on disk: the resumed one, at first
	ms             float64 // ms per iteration of the resumed checkpoint, until this process trains
}

// write saves the checkpoint of iteration iter as file name of the run
// directory.
func (c *checkpointer) write(name string, l *Loop, win window) error {
	if err := c.m.SyncHost(); err != nil {
		return err
	}
	ck := newCheckpoint(c.preset, c.source, c.m, c.opt, l.Iter, win, l.TrainSeconds())
	ck.BestVal, ck.BestIter = c.best.val, c.best.iter
	if c.best.res != nil {
		ev := *c.best.res
		ev.PerTask = nil
		ck.BestEval = &ev
	}
	ck.Last, ck.MsPerIter = l.Last, c.ms
	if n := l.Iter - l.Start; n > 0 {
		ck.MsPerIter = 1000 * l.Elapsed().Seconds() / float64(n)
	}
	return ck.Save(filepath.Join(c.dir, name))
}

// save writes checkpoint.gob where the loop stands.
func (c *checkpointer) save(l *Loop) error {
	if c.dir == "" {
		return nil
	}
	if err := c.write(FileCheckpoint, l, *c.win); err != nil {
		return err
	}
	c.saved = l.Iter
	return nil
}

// periodic is the step hook Run attaches with Loop.Every.
func (c *checkpointer) periodic(l *Loop, _ StepStats) error { return c.save(l) }

// end checkpoints a finished or interrupted run. An interruption's cause
// stays the error; a checkpoint that could not be written is added to it.
// A failed run keeps its last good checkpoint.
func (c *checkpointer) end(l *Loop, e Ending) error {
	switch {
	case e.Finished:
		return c.save(l)
	case e.Interrupted:
		if err := c.save(l); err != nil {
			return fmt.Errorf("%w; and the checkpoint could not be saved: %v", e.Err, err)
		}
	}
	return nil
}
