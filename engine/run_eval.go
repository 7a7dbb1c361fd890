package engine

import (
	"errors"
	"path/filepath"
	"runtime"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// evaluation is a finished run's last end hook (not attached with
// RunOptions.SkipEval): the final validation when the last iteration is
// off the ValEvery grid, the evaluation of the parameters that validated
// best (else the last) on the test source (else the training source),
// summary.json, and the Done snapshot. Stopped during the evaluation, the
// run is interrupted: training is checkpointed, and resuming runs the
// evaluation again.
func (r *run) evaluation(l *Loop, e Ending) error {
	if !e.Finished {
		return nil
	}
	e0 := time.Now()
	cfg := r.cfg
	src, which := r.src, "last"
	if r.opts.Test != nil {
		src = r.opts.Test
	}
	if r.val != nil {
		// The paper's protocol: test the parameters that validated best.
		// Off the ValEvery grid, or with best.gob to rebuild (a resumed
		// run that lost it), validate the last iteration; its row is
		// logged only off the grid (on it, it is already there).
		if offGrid := l.End%cfg.ValEvery != 0; offGrid || r.best.iter == 0 {
			if _, err := r.val.validate(l, offGrid); err != nil {
				return err
			}
		}
		if r.opts.Dir != "" && r.best.iter > 0 {
			bm, err := LoadCheckpoint(filepath.Join(r.opts.Dir, FileBest))
			if err != nil {
				return err
			}
			if err := bm.restore(r.m, NewOptimizer(cfg, r.m.Params.List)); err != nil {
				return err
			}
			which = "best"
		}
	}
	var ev EvalResult
	var err error
	var bySource map[string]*EvalResult
	if len(r.opts.TestBySource) > 0 {
		ev, bySource, err = r.m.EvaluateSources(r.opts.TestBySource, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	} else {
		ev, err = r.m.evaluate(src, streamEvalTasks, streamEvalNoise, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed, cfg.EvalSupportShift)
	}
	if err != nil {
		r.res.Interrupted = l.Context().Err() != nil
		return err
	}
	r.res.Eval = &ev
	if r.opts.Dir != "" {
		sum := r.summary(l, &ev, which, time.Since(e0))
		sum.EvalBySource = bySource
		if err := runfile.WriteJSON(filepath.Join(r.opts.Dir, FileSummary), sum, runfile.Private); err != nil {
			return err
		}
	}
	if r.obs != nil {
		s := r.report.snapshot(l)
		s.Eval, s.Done = &ev, true
		if err := r.obs.Observe(s); err != nil && !errors.Is(err, ErrStopped) {
			return err
		}
	}
	return nil
}

// summary is summary.json of a finished run evaluated as ev, from the
// parameters which names, in evalTime.
func (r *run) summary(l *Loop, ev *EvalResult, which string, evalTime time.Duration) Summary {
	cfg := r.cfg
	// The best validation, not the last: the final one (run when the last
	// iteration is off the ValEvery grid) is often not the best.
	bestEv := r.best.res
	if bestEv == nil && r.best.iter > 0 {
		bestEv = &EvalResult{Metric: ev.Metric, Mean: r.best.val, Tasks: cfg.ValTasks}
	}
	st := l.Last
	return Summary{Preset: r.opts.Preset, Variant: cfg.Variant(), Source: r.src.Name(), Seed: cfg.Seed,
		Iters: l.End, TrainSeconds: r.res.TrainSeconds, MsPerIter: r.res.MsPerIter,
		EvalSeconds: evalTime.Seconds(), Eval: ev, EvalCheckpoint: which, BestIter: r.best.iter, BestVal: bestEv,
		Params: r.m.Params.Count(), Device: r.m.Device(),
		Final:      MetricsRow{Iter: l.End, Loss: st.Loss, Data: st.Data, KL: st.KL, ELBO: -st.Loss, Lambda: st.Lambda, LR: cfg.LRAt(max(l.End-1, 0)), GradNorm: st.GradNorm},
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Finished: time.Now().UTC(), Config: cfg}
}
