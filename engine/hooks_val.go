package engine

import (
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/task"
)

// best is the best validation so far. Checkpoints carry val and iter, so
// that a resumed run goes on comparing against them; res is known only to
// the process that validated it.
type best struct {
	val  float64
	iter int // 0: none yet
	res  *EvalResult
}

// better reports whether metric value a beats b: higher accuracy, lower
// error.
func better(metric string, a, b float64) bool {
	if metric == "accuracy" {
		return a > b
	}
	return a < b
}

// validator evaluates on the validation source (RunOptions.Val) every
// ValEvery iterations (step, attached with Loop.EveryN) and once more at
// the end when the last iteration is off that grid (run_eval.go). It keeps
// the best parameters in best.gob and logs every validation to val.jsonl.
// Its time is not training time.
type validator struct {
	src  task.Source
	m    *Model
	cfg  Config
	path string // val.jsonl; "" keeps nothing
	log  *runfile.Log
	best *best
	ckpt *checkpointer // writes best.gob
	now  *EvalResult   // the validation of the step just done, for the reporter to take
}

// step validates after the step just done. Stopped by the context, it
// interrupts the run (which checkpoints); any other error fails it.
func (v *validator) step(l *Loop, _ StepStats) error {
	t0 := time.Now()
	ev, err := v.validate(l, true)
	if err != nil {
		if l.Context().Err() != nil {
			return Interrupt(err)
		}
		return err
	}
	l.Exclude(time.Since(t0))
	v.now = ev
	return nil
}

// take returns the validation of the step just done, if any, once.
func (v *validator) take() *EvalResult {
	ev := v.now
	v.now = nil
	return ev
}

// validate evaluates the model of the loop's iteration on the validation
// source, saves it as best.gob when it is the best so far, and, with log
// set, logs it.
func (v *validator) validate(l *Loop, log bool) (*EvalResult, error) {
	iter, trainSec := l.Iter, l.TrainSeconds()
	c := v.cfg
	// Unshifted support sets (eval_support_shift is the test's): the
	// checkpoint a run picks does not depend on it, and validating costs
	// what it did.
	ev, err := v.m.evaluate(v.src, streamValTasks, streamValNoise, c.ValTasks, c.EvalQuery, c.EvalSamples, c.Seed, 0)
	if err != nil {
		return nil, err
	}
	isBest := v.best.iter == 0 || better(ev.Metric, ev.Mean, v.best.val)
	if isBest {
		v.best.val, v.best.iter, v.best.res = ev.Mean, iter, &ev
		if v.ckpt.dir != "" {
			if err := v.ckpt.write(FileBest, l, window{}); err != nil {
				return nil, err
			}
		}
	}
	if v.log != nil && log {
		row := ValRow{Iter: iter, Metric: ev.Metric, Mean: ev.Mean, CI95: ev.CI95, Tasks: ev.Tasks, TrainSeconds: trainSec, Best: isBest}
		if err := v.log.Append(row); err != nil {
			return nil, err
		}
	}
	return &ev, nil
}

func (v *validator) close() { v.log.Close() }
