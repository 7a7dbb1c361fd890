package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/task"
)

// ErrStopped is the error an observer returns to stop a run cleanly.
var ErrStopped = errors.New("engine: run stopped")

// RunOptions say where a run keeps its files and how it reports.
type RunOptions struct {
	Preset string // recorded in the run files
	// Data is the data folder the task sources were read from, recorded
	// (absolute) in config.json so that resuming and re-evaluating find it
	// again ("" for a family's default folder).
	Data         string
	Dir          string        // run directory; "" keeps nothing on disk
	Resume       bool          // continue from Dir's checkpoint, with its config; cfg.Iters > 0 sets a new budget
	ReportEvery  time.Duration // minimum time between snapshots; default 100ms
	DisplayTask  int           // which display task to draw
	DisplayDraws int           // ω draws for the display's spread; default 8
	SkipEval     bool          // skip the final evaluation
	// Locked says the caller holds Dir's lock (runfile.Lock) for the whole
	// call, as a sweep worker does while it decides how to start a unit:
	// Run then does not take it.
	Locked bool

	// Repair, when resuming, lets a run go on whose metrics.jsonl or
	// val.jsonl do not match its checkpoint (damaged or missing rows): the
	// good rows are kept, the damaged dropped, and the gap recorded in
	// gaps.jsonl (runfiles.go); a damaged best.gob is moved aside to
	// best.gob.damaged and rebuilt from the next validation. Without it
	// such a resume is refused and nothing is changed.
	Repair bool

	// StartOver, when resuming a run directory without a checkpoint, lets
	// the run start from iteration 0 although the directory holds a
	// finished or validated run's files (summary.json, best.gob): they are
	// moved aside into DIR/stopped-TIME, as every start over's are, never
	// deleted. Without it such a resume is refused.
	StartOver bool

	// Control carries commands served between iterations (control.go); nil: none.
	Control <-chan Command
	// EvalProgress, when set, is Model.EvalProgress for the run's
	// evaluations (validations, CmdEvaluate, the final one): the
	// workbench's progress and ETA of an evaluation that takes minutes.
	EvalProgress func(done, total int)

	// Budget, when positive, ends training once this much training time has
	// passed (resumed parts included): the run then finishes as if
	// cfg.Iters were the iterations done, evaluation included.
	Budget time.Duration

	// Val, when set with cfg.ValEvery, is validated on during training (the
	// validation split); Test, when set, is what the final evaluation draws
	// its tasks from (the test split) instead of the training source.
	Val, Test task.Source
	// TestBySource, when set, replaces Test with one test source per data
	// source (Meta-Dataset): each is evaluated on cfg.EvalTasks episodes,
	// summary.json's eval_by_source holds each, and its eval their mean.
	TestBySource []NamedSource
}

// NamedSource is a task source with the name a results table shows.
type NamedSource struct {
	Name string
	task.Source
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

	// AlreadyDone: a resumed run had already finished and its
	// summary.json is complete; nothing was run or written, and the
	// Result is the summary's.
	AlreadyDone bool
	// Notes are what the run did that its user should know of, one
	// sentence each (a start over, a rebuilt best.gob, a repaired log);
	// show them on stderr.
	Notes []string
}

// note adds a note to the Result.
func (res *Result) note(format string, args ...any) {
	res.Notes = append(res.Notes, fmt.Sprintf(format, args...))
}

// LockRun takes the exclusive lock of run directory dir (runfile.Lock):
// hold it while writing into a run directory. Run takes it itself.
func LockRun(dir string) (*runfile.DirLock, error) { return runfile.Lock(dir) }

// LockRunToRead takes the lock of run directory dir for reading it, so
// that no run writes its checkpoints meanwhile (evaluating, exporting a
// model, listing). A run on read-only media, or in a directory this user
// cannot write, is read without the lock — nothing can write there
// either — and note says so; the lock is then nil (Release accepts it).
// A dir that does not exist is not created.
func LockRunToRead(dir string) (lock *runfile.DirLock, note string, err error) {
	lock, ro, err := runfile.LockToRead(dir)
	if err != nil {
		return nil, "", fmt.Errorf("engine: %w", err)
	}
	if ro {
		note = fmt.Sprintf("%s cannot be written (a read-only file system, or not this user's): read without its lock", dir)
	}
	return lock, note, nil
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
	var r *run
	if opts.Dir != "" {
		// One process per run directory, from before the resume reads it
		// until the summary is written.
		if opts.Resume {
			if _, err := os.Stat(opts.Dir); err != nil {
				return res, fmt.Errorf("engine: cannot resume %s: %w", opts.Dir, err)
			}
		} else if err := usedDir(opts.Dir, false); err != nil {
			return res, err // before the lock: a refused start leaves nothing behind
		}
		if !opts.Locked {
			undo := traceOfStart(opts.Dir)
			lock, err := runfile.Lock(opts.Dir)
			if err != nil {
				undo(nil)
				return res, fmt.Errorf("engine: %w", err)
			}
			defer func() {
				if r == nil || !r.started {
					undo(lock) // refused before training: leave no lock file or folder of ours
				} else {
					lock.Release()
				}
			}()
		}
		removeTemps(opts.Dir, &res)
	}
	r, err = newRun(cfg, src, opts, obs, &res)
	if err != nil {
		r = nil
		return res, err
	}
	if r.done {
		return res, nil
	}
	if r.m, err = NewModel(r.cfg, src); err != nil {
		return res, err
	}
	r.m.EvalProgress = opts.EvalProgress
	defer r.close()
	if r.from != nil {
		if n := DeviceChangeNote(r.from.Device, r.m.Device(), r.from.Iter); n != "" {
			res.note("%s", n)
		}
	}
	if err := r.init(ctx); err != nil {
		return res, err
	}
	if opts.Dir != "" {
		os.Remove(filepath.Join(opts.Dir, FileFailed)) // taken up again
	}
	err = r.assemble().Run(ctx) // its end hooks fill in res
	if err != nil && opts.Dir != "" && r.started && !res.Interrupted && ctx.Err() == nil {
		// For whoever lists the runs later; the error is returned as well.
		// A start refused before training (a used directory, damaged logs)
		// is no failed run: the error says it all.
		if werr := WriteFailure(opts.Dir, err, res.Iters, Permanent(err)); werr != nil {
			err = fmt.Errorf("%w (and its %s could not be written: %v)", err, FileFailed, werr)
		}
	}
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
	done  bool // resumed a finished run whose summary is complete: nothing to do
	// started: the start hooks all passed and training began; an error
	// before is a refused start.
	started bool
	fresh   bool // a run directory to (re)start from iteration 0: a new run, or a resumed one without a checkpoint

	best    best
	metrics metricsLog
	ckpt    checkpointer
	val     *validator // nil when the run does not validate
	report  reporter
	events  eventsLog
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
	r := &run{src: src, opts: opts, obs: obs, res: res, fresh: !opts.Resume}
	if opts.Resume {
		if opts.Dir == "" {
			return nil, errors.New("engine: resume needs a run directory")
		}
		if _, err := os.Stat(filepath.Join(opts.Dir, FileCheckpoint)); errors.Is(err, fs.ErrNotExist) {
			return r.restart(cfg)
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
		if n := unverifiedNote(ck, filepath.Join(opts.Dir, FileCheckpoint)); n != "" {
			res.note("%s; its next save adds one", n)
		}
		if ck.Iter == cfg.Iters {
			if sum, ok := completeSummary(opts.Dir, ck); ok {
				*res = Result{Dir: opts.Dir, Iters: ck.Iter, Last: ck.Last, Eval: sum.Eval, TrainSeconds: sum.TrainSeconds,
					MsPerIter: sum.MsPerIter, AlreadyDone: true}
				res.note("%s already finished at iteration %d and its summary.json is complete: nothing was changed", opts.Dir, ck.Iter)
				r.done = true
				return r, nil
			}
		}
		if err := r.checkBest(); err != nil {
			return nil, err
		}
		if cfg.Iters != ck.Config.Iters {
			if err := recordIters(opts.Dir, ck, cfg.Iters); err != nil {
				return nil, err
			}
		}
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
		r.best.val, r.best.iter, r.best.res = ck.BestVal, ck.BestIter, ck.BestEval
		r.ckpt.saved, r.ckpt.ms = ck.Iter, ck.MsPerIter
	}
	if cfg.ValEvery > 0 && r.opts.Val != nil {
		r.val = &validator{src: r.opts.Val, m: r.m, cfg: cfg, best: &r.best, ckpt: &r.ckpt}
		if dir != "" {
			r.val.path = filepath.Join(dir, FileVal)
		}
	}
	r.report = reporter{obs: r.obs, m: r.m, lr: cfg.LR, every: cfg.SnapshotEvery, task: r.opts.DisplayTask,
		draws: r.opts.DisplayDraws, throttle: r.opts.ReportEvery, val: r.val}
	if dir != "" {
		r.events = eventsLog{dir: dir, resumed: r.from != nil, cfg: cfg, m: r.m, rep: &r.report, res: r.res}
		if r.obs != nil {
			r.report.obs = displayTee{ev: &r.events, obs: r.obs}
		}
	}
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
	if r.from != nil {
		l.Last = r.from.Last
	}

	if dir != "" {
		if r.fresh {
			l.OnStart(r.newDir)
		}
		l.OnStart(r.openLogs)
		l.OnStart(r.events.open)
		if r.fresh {
			// A run killed before its first periodic checkpoint can be
			// resumed all the same.
			l.OnStart(r.ckpt.save)
		}
	}
	l.OnStart(func(*Loop) error { r.started = true; return nil })

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
		l.OnStep(r.events.step)
		l.Every(time.Duration(cfg.CheckpointSec)*time.Second, r.ckpt.periodic)
	}

	l.OnEnd(r.result)
	l.OnEnd(r.ckpt.end)
	if !r.opts.SkipEval {
		l.OnEnd(r.evaluation)
	}
	if dir != "" {
		l.OnEnd(r.events.end)
	}
	return l
}

// close closes the logs and releases the model.
func (r *run) close() {
	if r.val != nil {
		r.val.close()
	}
	r.metrics.close()
	r.events.close()
	r.m.Close()
}

// newDir is the start hook of a run started from iteration 0 in a
// directory: it refuses a directory that holds a run, drops the files of
// one stopped before its first checkpoint, and writes config.json.
func (r *run) newDir(*Loop) error {
	return newRunDir(r.opts.Dir, RunConfig{Preset: r.opts.Preset, Source: r.src.Name(), Data: runfile.AbsOrEmpty(r.opts.Data), Config: r.cfg}, r.res,
		r.opts.Resume && r.opts.StartOver)
}

// step is the loop's step: training iteration iter.
func (r *run) step(iter int) (StepStats, error) {
	lr := r.cfg.LRAt(iter)
	r.opt.LR, r.metrics.lr, r.report.lr = lr, lr, lr
	st, err := r.m.trainStep(iter, r.opt, &r.grads)
	if err != nil {
		return st, stepError(iter+1, st, err, r.opts.Dir, r.ckpt.saved, r.cfg.LR)
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
	} else if e.Finished && r.from != nil {
		// Resumed into the final evaluation: the training's own rate.
		res.MsPerIter = r.from.MsPerIter
	}
	return nil
}

// ErrDiverged is what every divergence error of Run matches with
// errors.Is: a training step produced a value that is not finite, or a
// kernel system that is not positive definite.
var ErrDiverged = errors.New("engine: training diverged")

// divergence is the error of a diverged step: its message, and the
// errors it matches (its cause, ErrDiverged, ErrNonFinite when a value was
// not finite).
type divergence struct {
	msg  string
	errs []error
}

func (d *divergence) Error() string   { return d.msg }
func (d *divergence) Unwrap() []error { return d.errs }

// stepError is the error of a failed training step, iteration iter
// (1-based): a divergence — any value of the step that is not finite, or a
// kernel system that is not positive definite — names what and where,
// says which checkpoint is kept and what to try; gorgonia's machine error
// is unwrapped to the op's.
func stepError(iter int, st StepStats, err error, dir string, saved int, lr float64) error {
	where := "nothing was saved (no run directory)"
	if dir != "" {
		where = fmt.Sprintf("the last good checkpoint (iteration %d) in %s is kept", saved, dir)
	}
	cause := ops.Cause(err)
	nonFinite := errors.Is(cause, ErrNonFinite) || errors.Is(cause, ops.ErrNotFinite)
	if nonFinite || IsNotPD(cause) {
		errs := []error{cause, ErrDiverged}
		if nonFinite {
			errs = append(errs, ErrNonFinite)
		}
		what := cause.Error()
		if ke := (*ops.KRRError)(nil); errors.As(cause, &ke) {
			what = ke.Problem()
		}
		return &divergence{errs: errs, msg: fmt.Sprintf("training diverged at iteration %d: %s; %s; try --set lr=%g or --set clip_norm=1",
			iter, what, where, lr/2)}
	}
	return fmt.Errorf("training failed at iteration %d: %w; %s", iter, cause, where)
}
