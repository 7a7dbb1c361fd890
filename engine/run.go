package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/mkbench/mkbench/engine/runfile"
	"github.com/mkbench/mkbench/engine/task"
)

// Snapshot is a copy of the run's state handed to an Observer. The engine
// throttles snapshots (RunOptions.ReportEvery); the observer owns it.
type Snapshot struct {
	Iter, Iters                      int // completed iterations, total
	Loss, Data, KL, ELBO, Lambda, LR float64
	GradNorm                         float64
	Wall                             time.Duration // training time so far, resumed runs included
	ItersPerSec                      float64       // over this process's iterations
	Display                          *Display      // set when a display snapshot was taken
	Eval                             *EvalResult   // set by the final evaluation (with Done) and by CmdEvaluate
	Val                              *EvalResult   // set when a validation ran at Iter (Config.ValEvery)
	Done                             bool
}

// Observer watches a run. Returning an error stops the run after a
// checkpoint; return ErrStopped for an ordinary stop.
type Observer interface {
	Observe(Snapshot) error
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Snapshot) error

// Observe calls f.
func (f ObserverFunc) Observe(s Snapshot) error { return f(s) }

// Remaining is the time the iterations from done to total take at perSec
// iterations a second; negative when the rate is not known or nothing
// is left.
func Remaining(done, total int, perSec float64) time.Duration {
	if perSec <= 0 || total <= done {
		return -1
	}
	return time.Duration(float64(total-done) / perSec * float64(time.Second))
}

// FormatETA formats a remaining time to the second, "–" when unknown
// (negative), as every progress line and status bar shows it.
func FormatETA(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return d.Round(time.Second).String()
}

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

// MetricsRow is one line of metrics.jsonl: averages over the iterations
// since the previous row, except lambda and lr, taken at Iter. Wall-clock
// figures are deliberately absent so equal seeds give byte-equal files.
type MetricsRow struct {
	Iter     int     `json:"iter"`
	Loss     float64 `json:"loss"`
	Data     float64 `json:"data"`
	KL       float64 `json:"kl"`
	ELBO     float64 `json:"elbo"`
	Lambda   float64 `json:"lambda"`
	LR       float64 `json:"lr"`
	GradNorm float64 `json:"grad_norm"`
}

// window accumulates a metrics row; it is checkpointed so that a resumed
// run writes the same rows as an uninterrupted one.
type window struct {
	N                        int
	Loss, Data, KL, GradNorm float64
}

// Summary is summary.json.
type Summary struct {
	Preset       string      `json:"preset"`
	Variant      string      `json:"variant"`
	Source       string      `json:"source"`
	Seed         uint64      `json:"seed"`
	Iters        int         `json:"iters"`
	TrainSeconds float64     `json:"train_seconds"`
	MsPerIter    float64     `json:"ms_per_iter"`
	EvalSeconds  float64     `json:"eval_seconds"`
	Eval         *EvalResult `json:"eval"`
	// EvalCheckpoint names the parameters evaluated: the best-validation
	// checkpoint when the run validated, else the last.
	EvalCheckpoint string      `json:"eval_checkpoint"`
	BestIter       int         `json:"best_iter,omitempty"`
	BestVal        *EvalResult `json:"best_val,omitempty"`
	Params         int         `json:"params"`
	Final          MetricsRow  `json:"final"`
	GOMAXPROCS     int         `json:"gomaxprocs"`
	GoVersion      string      `json:"go_version"`
	Finished       time.Time   `json:"finished"`
	Config         Config      `json:"config"`
}

// Run file names inside a run directory.
const (
	FileConfig     = "config.json"
	FileMetrics    = "metrics.jsonl"
	FileSummary    = "summary.json"
	FileCheckpoint = "checkpoint.gob"
	FileBest       = "best.gob"  // the best-validation parameters
	FileVal        = "val.jsonl" // one validation per line: the learning curve
)

// ValRow is one line of val.jsonl. Unlike metrics.jsonl it carries the
// training time so far, for learning curves against wall-clock time.
type ValRow struct {
	Iter         int     `json:"iter"`
	Metric       string  `json:"metric"`
	Mean         float64 `json:"mean"`
	CI95         float64 `json:"ci95"`
	Tasks        int     `json:"tasks"`
	TrainSeconds float64 `json:"train_seconds"`
	Best         bool    `json:"best"`
}

// better reports whether metric value a beats b: higher accuracy, lower
// error.
func better(metric string, a, b float64) bool {
	if metric == "accuracy" {
		return a > b
	}
	return a < b
}

// RunConfig is config.json: enough to rebuild the model of a run.
type RunConfig struct {
	Preset string `json:"preset"`
	Source string `json:"source"`
	Config Config `json:"config"`
}

// Run trains a model for cfg on src, reporting to obs (which may be nil),
// checkpointing to opts.Dir, and evaluating at the end. Cancelling ctx
// stops the run after a checkpoint and returns the context's error with
// Interrupted set. A panic inside the engine is returned as an error.
func Run(ctx context.Context, cfg Config, src task.Source, opts RunOptions, obs Observer) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: internal error: %v\n%s", r, debug.Stack())
		}
	}()
	if opts.ReportEvery <= 0 {
		opts.ReportEvery = 100 * time.Millisecond
	}
	if opts.DisplayDraws <= 0 {
		opts.DisplayDraws = 8
	}
	res.Dir = opts.Dir

	var ck *Checkpoint
	if opts.Resume {
		if opts.Dir == "" {
			return res, errors.New("engine: resume needs a run directory")
		}
		if ck, err = LoadCheckpoint(filepath.Join(opts.Dir, FileCheckpoint)); err != nil {
			return res, err
		}
		// The run keeps its own settings; only the iteration budget may
		// change (to stop earlier or continue further).
		iters := cfg.Iters
		cfg = ck.Config
		if iters > 0 {
			if iters < ck.Iter {
				return res, fmt.Errorf("engine: cannot resume to %d iterations: the checkpoint is already at %d", iters, ck.Iter)
			}
			cfg.Iters = iters
		}
	}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	m, err := NewModel(cfg, src)
	if err != nil {
		return res, err
	}
	defer m.Close()
	m.cancel = ctx.Done()
	opt := NewOptimizer(cfg, m.Params.List)
	start := 0
	var win window
	var trainBefore float64
	bestVal, bestIter := 0.0, 0
	if ck != nil {
		if err := ck.restore(m, opt); err != nil {
			return res, err
		}
		start, win, trainBefore = ck.Iter, ck.Window, ck.TrainSeconds
		bestVal, bestIter = ck.BestVal, ck.BestIter
	}
	validate := cfg.ValEvery > 0 && opts.Val != nil

	var metrics *runfile.Log
	if opts.Dir != "" {
		if !opts.Resume {
			if err := prepareRunDir(opts.Dir); err != nil {
				return res, err
			}
			if err := runfile.WriteJSON(filepath.Join(opts.Dir, FileConfig), RunConfig{Preset: opts.Preset, Source: src.Name(), Config: cfg}, runfile.Private); err != nil {
				return res, err
			}
		}
		if metrics, err = runfile.OpenLog(filepath.Join(opts.Dir, FileMetrics), start, runfile.Shared); err != nil {
			return res, err
		}
		defer metrics.Close()
	}

	saved := start
	save := func(iter int, trainSec float64) error {
		if opts.Dir == "" {
			return nil
		}
		c := newCheckpoint(opts.Preset, src.Name(), m, opt, iter, win, trainSec)
		c.BestVal, c.BestIter = bestVal, bestIter
		if err := c.Save(filepath.Join(opts.Dir, FileCheckpoint)); err != nil {
			return err
		}
		saved = iter
		return nil
	}
	var valLog *runfile.Log
	if validate && opts.Dir != "" {
		if valLog, err = runfile.OpenLog(filepath.Join(opts.Dir, FileVal), start, runfile.Private); err != nil {
			return res, err
		}
		defer valLog.Close()
	}
	// validation evaluates on the validation source and keeps the best
	// parameters in their own checkpoint; its time is not training time.
	var bestRes *EvalResult // the best validation of this process (a resumed run knows only bestVal before it)
	validation := func(iter int, trainSec float64) (*EvalResult, time.Duration, error) {
		v0 := time.Now()
		ev, err := m.evaluate(opts.Val, streamValTasks, streamValNoise, cfg.ValTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
		if err != nil {
			return nil, 0, err
		}
		best := bestIter == 0 || better(ev.Metric, ev.Mean, bestVal)
		if best {
			bestVal, bestIter = ev.Mean, iter
			bestRes = &ev
			if opts.Dir != "" {
				c := newCheckpoint(opts.Preset, src.Name(), m, opt, iter, window{}, trainSec)
				c.BestVal, c.BestIter = bestVal, bestIter
				if err := c.Save(filepath.Join(opts.Dir, FileBest)); err != nil {
					return nil, 0, err
				}
			}
		}
		if valLog != nil {
			if err := valLog.Append(ValRow{Iter: iter, Metric: ev.Metric, Mean: ev.Mean, CI95: ev.CI95, Tasks: ev.Tasks, TrainSeconds: trainSec, Best: best}); err != nil {
				return nil, 0, err
			}
		}
		return &ev, time.Since(v0), nil
	}

	var grads [][]float64
	var last StepStats
	t0 := time.Now()
	lastReport, lastCkpt := time.Time{}, t0
	trainSec := func() float64 { return trainBefore + time.Since(t0).Seconds() }
	snapshot := func(iter int) Snapshot {
		el := time.Since(t0)
		s := Snapshot{Iter: iter, Iters: cfg.Iters, Loss: last.Loss, Data: last.Data, KL: last.KL,
			ELBO: -last.Loss, Lambda: last.Lambda, LR: cfg.LR, GradNorm: last.GradNorm,
			Wall: time.Duration(trainSec() * float64(time.Second))}
		if done := iter - start; done > 0 && el > 0 {
			s.ItersPerSec = float64(done) / el.Seconds()
		}
		return s
	}
	stop := func(iter int, cause error) (Result, error) {
		res.Iters, res.Last, res.Interrupted = iter, last, true
		res.TrainSeconds = trainSec()
		if err := save(iter, res.TrainSeconds); err != nil {
			return res, fmt.Errorf("%w; and the checkpoint could not be saved: %v", cause, err)
		}
		return res, cause
	}

	ctl := &control{ch: opts.Control, m: m, cfg: cfg, opts: &opts, obs: obs, snap: snapshot,
		save: func(iter int) error { return save(iter, trainSec()) }}

	for iter := start; iter < cfg.Iters; iter++ {
		if err := ctx.Err(); err != nil {
			return stop(iter, err)
		}
		spent, err := ctl.serve(ctx, iter)
		t0 = t0.Add(spent) // pauses and commands are not training time
		if err != nil {
			return stop(iter, err)
		}
		st, err := m.trainStep(iter, opt, &grads)
		if err != nil {
			res.Iters, res.Last = iter, last
			return res, stepError(iter+1, st, err, opts.Dir, saved)
		}
		last = st
		win.N++
		win.Loss += st.Loss
		win.Data += st.Data
		win.KL += st.KL
		win.GradNorm += st.GradNorm
		done := iter + 1
		if opts.Budget > 0 && done < cfg.Iters && trainSec() >= opts.Budget.Seconds() {
			cfg.Iters = done // out of time: this is the last iteration
			m.waitPrefetch() // it reads m.Cfg
			m.Cfg.Iters = done
		}
		if metrics != nil && (done%cfg.LogEvery == 0 || done == cfg.Iters) {
			n := float64(win.N)
			row := MetricsRow{Iter: done, Loss: win.Loss / n, Data: win.Data / n, KL: win.KL / n,
				ELBO: -win.Loss / n, Lambda: st.Lambda, LR: cfg.LR, GradNorm: win.GradNorm / n}
			if err := metrics.Append(row); err != nil {
				return res, err
			}
			win = window{}
		}
		var val *EvalResult
		if validate && done%cfg.ValEvery == 0 {
			var spent time.Duration
			if val, spent, err = validation(done, trainSec()); err != nil {
				if ctx.Err() != nil {
					return stop(done, err)
				}
				return res, err
			}
			t0 = t0.Add(spent)
		}
		if obs != nil {
			var disp *Display
			if done%cfg.SnapshotEvery == 0 || done == cfg.Iters || done == start+1 {
				if disp, err = m.Display(done, opts.DisplayTask, opts.DisplayDraws); err != nil {
					return res, err
				}
			}
			if disp != nil || val != nil || time.Since(lastReport) >= opts.ReportEvery {
				lastReport = time.Now()
				s := snapshot(done)
				s.Display, s.Val = disp, val
				if err := obs.Observe(s); err != nil {
					return stop(done, err)
				}
			}
		}
		if cfg.CheckpointSec > 0 && time.Since(lastCkpt) >= time.Duration(cfg.CheckpointSec)*time.Second {
			if err := save(done, trainSec()); err != nil {
				return res, err
			}
			lastCkpt = time.Now()
		}
	}
	res.Iters, res.Last = cfg.Iters, last
	res.TrainSeconds = trainSec()
	if n := cfg.Iters - start; n > 0 {
		res.MsPerIter = 1000 * time.Since(t0).Seconds() / float64(n)
	}
	if err := save(cfg.Iters, res.TrainSeconds); err != nil {
		return res, err
	}
	if opts.SkipEval {
		return res, nil
	}
	e0 := time.Now()
	evalSrc, which := src, "last"
	if opts.Test != nil {
		evalSrc = opts.Test
	}
	if validate {
		// The paper's protocol: test the parameters that validated best.
		if cfg.Iters%cfg.ValEvery != 0 {
			if _, _, err = validation(cfg.Iters, res.TrainSeconds); err != nil {
				return res, err
			}
		}
		if opts.Dir != "" && bestIter > 0 {
			bm, err := LoadCheckpoint(filepath.Join(opts.Dir, FileBest))
			if err != nil {
				return res, err
			}
			if err := bm.restore(m, NewOptimizer(cfg, m.Params.List)); err != nil {
				return res, err
			}
			which = "best"
		}
	}
	ev, err := m.evaluate(evalSrc, streamEvalTasks, streamEvalNoise, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil {
		// Stopped during the evaluation: training is checkpointed, and
		// resuming runs the evaluation again.
		res.Interrupted = ctx.Err() != nil
		return res, err
	}
	res.Eval = &ev
	if opts.Dir != "" {
		// The best validation, not the last: the final one (run when the
		// last iteration is off the ValEvery grid) is often not the best.
		bestEv := bestRes
		if bestEv == nil && bestIter > 0 {
			bestEv = &EvalResult{Metric: ev.Metric, Mean: bestVal, Tasks: cfg.ValTasks}
		}
		sum := Summary{Preset: opts.Preset, Variant: cfg.Variant(), Source: src.Name(), Seed: cfg.Seed,
			Iters: cfg.Iters, TrainSeconds: res.TrainSeconds, MsPerIter: res.MsPerIter,
			EvalSeconds: time.Since(e0).Seconds(), Eval: &ev, EvalCheckpoint: which, BestIter: bestIter, BestVal: bestEv,
			Params:     m.Params.Count(),
			Final:      MetricsRow{Iter: cfg.Iters, Loss: last.Loss, Data: last.Data, KL: last.KL, ELBO: -last.Loss, Lambda: last.Lambda, LR: cfg.LR, GradNorm: last.GradNorm},
			GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Finished: time.Now().UTC(), Config: cfg}
		if err := runfile.WriteJSON(filepath.Join(opts.Dir, FileSummary), sum, runfile.Private); err != nil {
			return res, err
		}
	}
	if obs != nil {
		s := snapshot(cfg.Iters)
		s.Eval, s.Done = &ev, true
		if err := obs.Observe(s); err != nil && !errors.Is(err, ErrStopped) {
			return res, err
		}
	}
	return res, nil
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

// prepareRunDir creates dir for a new run and refuses one that already
// holds a run, so a typo can never overwrite results.
func prepareRunDir(dir string) error {
	for _, f := range []string{FileCheckpoint, FileMetrics, FileSummary, FileConfig} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("engine: %s already holds a run (%s exists); continue it with --resume %s or choose another --out", dir, f, dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("engine: cannot create run directory: %w", err)
	}
	return nil
}
