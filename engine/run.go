package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/mkbench/mkbench/engine/task"
)

// ErrStopped is the error an observer returns to stop a run cleanly.
var ErrStopped = errors.New("engine: run stopped")

// RunOptions say where a run keeps its files and how it reports.
type RunOptions struct {
	Preset       string        // recorded in the run files
	Dir          string        // run directory; "" keeps nothing on disk
	Resume       bool          // continue from Dir's checkpoint, with its config; cfg.Iters > 0 sets a new budget
	ReportEvery  time.Duration // minimum time between snapshots; default 100ms
	DisplayTask  int           // which display task to draw
	DisplayDraws int           // ω draws for the display's spread; default 8
	SkipEval     bool          // skip the final evaluation

	// Control carries commands served between iterations (control.go); nil: none.
	Control <-chan Command

	// Budget, when positive, ends training once this much training time has
	// passed (resumed parts included): the run then finishes as if
	// cfg.Iters were the iterations done, evaluation included.
	Budget time.Duration

	// Val, when set with cfg.ValEvery, is validated on during training (the
	// validation split); Test, when set, is what the final evaluation draws
	// its tasks from (the test split) instead of the training source.
	Val, Test task.Source
}

// Result is what a finished or interrupted run produced.
type Result struct {
	Dir          string
	Iters        int // completed iterations
	Last         StepStats
	Eval         *EvalResult
	TrainSeconds float64 // all training time of the run, resumed parts included
	MsPerIter    float64 // this process's training time per iteration
	Interrupted  bool    // stopped by the context or the observer
}

// Run trains a model for cfg on src, reporting to obs (which may be nil),
// checkpointing to opts.Dir, and evaluating at the end. Cancelling ctx
// stops the run after a checkpoint and returns the context's error with
// Interrupted set. A panic inside the engine is returned as an error.
//
// Run trains with a Loop whose hooks do the rest (loop.go); assemble
// attaches them.
func Run(ctx context.Context, cfg Config, src task.Source, opts RunOptions, obs Observer) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: internal error: %v\n%s", r, debug.Stack())
		}
	}()
	res.Dir = opts.Dir
	r, err := newRun(cfg, src, opts, obs, &res)
	if err != nil {
		return res, err
	}
	if r.m, err = NewModel(r.cfg, src); err != nil {
		return res, err
	}
	defer r.close()
	if err := r.init(ctx); err != nil {
		return res, err
	}
	err = r.assemble().Run(ctx) // its end hooks fill in res
	return res, err
}

// run is one call of Run: the model and optimizer, and the hooks that
// share them.
type run struct {
	cfg   Config // the run's; Iters lowered when the budget ends it early
	src   task.Source
	opts  RunOptions
	obs   Observer
	m     *Model
	opt   *Optimizer
	grads [][]float64
	from  *Checkpoint // resumed from; nil for a new run
	res   *Result

	best    best
	metrics metricsLog
	ckpt    checkpointer
	val     *validator // nil when the run does not validate
	report  reporter
}

// newRun settles a run's options and configuration: a resumed run's is
// its checkpoint's, with a new iteration budget if cfg sets one.
func newRun(cfg Config, src task.Source, opts RunOptions, obs Observer, res *Result) (*run, error) {
	if opts.ReportEvery <= 0 {
		opts.ReportEvery = 100 * time.Millisecond
	}
	if opts.DisplayDraws <= 0 {
		opts.DisplayDraws = 8
	}
	r := &run{src: src, opts: opts, obs: obs, res: res}
	if opts.Resume {
		if opts.Dir == "" {
			return nil, errors.New("engine: resume needs a run directory")
		}
		ck, err := LoadCheckpoint(filepath.Join(opts.Dir, FileCheckpoint))
		if err != nil {
			return nil, err
		}
		// The run keeps its own settings; only the iteration budget may
		// change (to stop earlier or continue further).
		iters := cfg.Iters
		cfg = ck.Config
		if iters > 0 {
			if iters < ck.Iter {
				return nil, fmt.Errorf("engine: cannot resume to %d iterations: the checkpoint is already at %d", iters, ck.Iter)
			}
			cfg.Iters = iters
		}
		r.from = ck
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r.cfg = cfg
	return r, nil
}

// init readies the model (built from r.cfg) for the run: its optimizer, a
// resumed run's parameters and state, and the hooks' state. Nothing is
// written yet.
func (r *run) init(ctx context.Context) error {
	r.m.cancel = ctx.Done()
	r.opt = NewOptimizer(r.cfg, r.m.Params.List)
	if r.from != nil {
		if err := r.from.restore(r.m, r.opt); err != nil {
			return err
		}
	}
	r.hooks()
	return nil
}

// hooks sets up the hooks' state, a resumed run's from its checkpoint.
func (r *run) hooks() {
	cfg, dir := r.cfg, r.opts.Dir
	r.metrics = metricsLog{path: filepath.Join(dir, FileMetrics), lr: cfg.LR}
	r.ckpt = checkpointer{dir: dir, preset: r.opts.Preset, source: r.src.Name(), m: r.m, opt: r.opt,
		win: &r.metrics.win, best: &r.best}
	if ck := r.from; ck != nil {
		r.metrics.win = ck.Window
		r.best.val, r.best.iter = ck.BestVal, ck.BestIter
		r.ckpt.saved = ck.Iter
	}
	if cfg.ValEvery > 0 && r.opts.Val != nil {
		r.val = &validator{src: r.opts.Val, m: r.m, cfg: cfg, best: &r.best, ckpt: &r.ckpt}
		if dir != "" {
			r.val.path = filepath.Join(dir, FileVal)
		}
	}
	r.report = reporter{obs: r.obs, m: r.m, lr: cfg.LR, every: cfg.SnapshotEvery, task: r.opts.DisplayTask,
		draws: r.opts.DisplayDraws, throttle: r.opts.ReportEvery, val: r.val}
}

// assemble makes the run's loop and attaches its hooks, in the order they
// run.
func (r *run) assemble() *Loop {
	cfg, dir := r.cfg, r.opts.Dir
	start, prior := 0, 0.0
	if r.from != nil {
		start, prior = r.from.Iter, r.from.TrainSeconds
	}
	l := NewLoop(start, cfg.Iters, prior, r.step)

	if dir != "" {
		if !r.opts.Resume {
			l.OnStart(r.newDir)
		}
		l.OnStart(r.metrics.open)
		if r.val != nil {
			l.OnStart(r.val.open)
		}
	}

	if r.opts.Control != nil {
		ctl := &control{ch: r.opts.Control, m: r.m, cfg: cfg, rep: &r.report, save: r.ckpt.save}
		// Mid-training checks belong on the validation split; the test
		// split is for the final number.
		switch {
		case r.opts.Val != nil:
			ctl.evalSrc = r.opts.Val
		case r.opts.Test != nil:
			ctl.evalSrc = r.opts.Test
		default:
			ctl.evalSrc = r.src
		}
		l.BeforeStep(ctl.before)
	}

	if r.opts.Budget > 0 {
		l.OnStep(r.budget)
	}
	if dir != "" {
		l.OnStep(r.metrics.add)
		l.EveryN(cfg.LogEvery, true, r.metrics.write)
	}
	if r.val != nil {
		l.EveryN(cfg.ValEvery, false, r.val.step)
	}
	if r.obs != nil {
		l.OnStep(r.report.step)
	}
	if dir != "" {
		l.Every(time.Duration(cfg.CheckpointSec)*time.Second, r.ckpt.periodic)
	}

	l.OnEnd(r.result)
	l.OnEnd(r.ckpt.end)
	if !r.opts.SkipEval {
		l.OnEnd(r.evaluation)
	}
	return l
}

// close closes the logs and releases the model.
func (r *run) close() {
	if r.val != nil {
		r.val.close()
	}
	r.metrics.close()
	r.m.Close()
}

// newDir is the start hook of a new run with a directory: it refuses a
// directory that holds a run, and writes config.json.
func (r *run) newDir(*Loop) error {
	return newRunDir(r.opts.Dir, RunConfig{Preset: r.opts.Preset, Source: r.src.Name(), Config: r.cfg})
}

// step is the loop's step: training iteration iter.
func (r *run) step(iter int) (StepStats, error) {
	st, err := r.m.trainStep(iter, r.opt, &r.grads)
	if err != nil {
		return st, stepError(iter+1, st, err, r.opts.Dir, r.ckpt.saved)
	}
	return st, nil
}

// budget is the after-step hook of RunOptions.Budget: once the training
// time reaches it, the step just done is the last, and the run finishes as
// if cfg.Iters were the iterations done.
func (r *run) budget(l *Loop, _ StepStats) error {
	if l.Iter < l.End && l.TrainSeconds() >= r.opts.Budget.Seconds() {
		l.End = l.Iter
		r.cfg.Iters = l.Iter
		r.m.waitPrefetch() // it reads m.Cfg
		r.m.Cfg.Iters = l.Iter
	}
	return nil
}

// result is the first end hook: it fills in the Result.
func (r *run) result(l *Loop, e Ending) error {
	res := r.res
	res.Iters, res.Last, res.TrainSeconds, res.Interrupted = l.Iter, l.Last, l.TrainSeconds(), e.Interrupted
	if n := l.Iter - l.Start; e.Finished && n > 0 {
		res.MsPerIter = 1000 * l.Elapsed().Seconds() / float64(n)
	}
	return nil
}

func stepError(iter int, st StepStats, err error, dir string, saved int) error {
	where := "nothing was saved (no run directory)"
	if dir != "" {
		where = fmt.Sprintf("the last good checkpoint (iteration %d) in %s is kept", saved, dir)
		if saved == 0 {
			where = "no checkpoint had been written yet"
		}
	}
	if errors.Is(err, ErrNonFinite) {
		return fmt.Errorf("training diverged at iteration %d (loss %g): %w; %s; try a lower --lr or set clip_norm", iter, st.Loss, err, where)
	}
	if IsNotPD(err) {
		return fmt.Errorf("training failed at iteration %d: the kernel system K+λI is not positive definite: %w; %s; try a lower --lr or set clip_norm", iter, err, where)
	}
	return fmt.Errorf("training failed at iteration %d: %w; %s", iter, err, where)
}
