package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"

	"github.com/mkbench/mkbench/internal/runstate"
)

// What the experiments screen knows of the experiment it started: its
// rows, where it is, and the dashboard of the run training now, all taken
// from the worker's progress reports.

// expState is everything the screen knows of a running experiment.
type expState struct {
	worker  *expWorker
	opts    experiments.Options // normalized
	preset  presets.Preset
	metric  string
	rows    []expRow
	job     int
	jobs    int
	name    string
	phase   string
	snap    *engine.Snapshot
	started time.Time
	jobAt   time.Time
	jobSecs []float64 // wall seconds of the runs trained here
	state   runstate.State
	// failures: it finished, some of its runs failed.
	failures bool
	note     note

	// The dashboard of the run training now (or last), fed from the
	// experiment's snapshots; nil while a baseline trains.
	dash    *dashboard
	dashJob int
	stub    *session.Run
}

// row returns the row of key k, or nil.
func (e *expState) row(k rowKey) *expRow {
	for i := range e.rows {
		if e.rows[i].rowKey == k {
			return &e.rows[i]
		}
	}
	return nil
}

// apply takes in one batch of the experiment's reports.
func (s *expScreen) apply(msg expBatchMsg) {
	e := s.run
	if e == nil || msg.w != e.worker {
		return
	}
	var ups []session.Update
	for _, p := range msg.ps {
		ups = append(ups, e.progress(s, p)...)
	}
	if msg.ended {
		ups = append(ups, e.end(msg.err)...)
	}
	if e.dash != nil && len(ups) > 0 {
		e.dash.apply(ups)
		if s.stage == expDash {
			e.dash.render()
		}
	}
}

// progress applies one report and returns what the current run's
// dashboard should take in.
func (e *expState) progress(s *expScreen, p experiments.Progress) []session.Update {
	kind := e.opts.Experiment
	e.job, e.jobs, e.name = p.Job, p.Jobs, p.Name
	now := time.Now()
	var ups []session.Update
	endDash := func(u session.Update) {
		if e.dash != nil && e.dashJob == p.Job && !e.dash.allEnded() {
			u.Run = e.stub
			u.Ended = true
			ups = append(ups, u)
		}
	}
	switch p.Phase {
	case experiments.PhaseTrain, experiments.PhaseResume, experiments.PhaseReuse, experiments.PhaseModel:
		e.snap, e.jobAt = nil, now
		e.phase = map[string]string{experiments.PhaseTrain: "training", experiments.PhaseResume: "resuming",
			experiments.PhaseReuse: "reusing a finished run", experiments.PhaseModel: "evaluating the given model"}[p.Phase]
		var st runstate.State = runstate.Running // training or resuming
		if p.Phase == experiments.PhaseReuse || p.Phase == experiments.PhaseModel {
			st = runstate.Evaluating
		}
		if kind == experiments.Versatility {
			for i := range e.rows {
				if e.rows[i].Variant == p.Key.Variant && e.rows[i].Status == runstate.Pending {
					e.rows[i].Status = st
				}
			}
		} else if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
			r.Status = st
		}
		if p.Phase == experiments.PhaseTrain || p.Phase == experiments.PhaseResume {
			e.newDash(s, p)
		}
	case experiments.PhaseStep:
		if p.Snapshot == nil {
			break
		}
		snap := *p.Snapshot
		e.snap = &snap
		if snap.Iters > 0 && snap.Iter >= snap.Iters && kind != experiments.Versatility {
			// Past its last iteration a run is in its final evaluation.
			e.phase = "final evaluation"
			if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
				r.Status = runstate.Evaluating
			}
		}
		if e.dash != nil && e.dashJob == p.Job {
			disp, val := snap.Display, snap.Val
			last := snap
			last.Display, last.Val, last.Eval = nil, nil, nil
			u := session.Update{Run: e.stub, Last: &last, Display: disp,
				Points: []session.Point{{Iter: snap.Iter, Loss: snap.Loss, Data: snap.Data, KL: snap.KL, ELBO: snap.ELBO}}}
			if val != nil {
				u.Vals = []session.ValPoint{{Iter: snap.Iter, Eval: *val}}
			}
			ups = append(ups, u)
		}
	case experiments.PhaseEval:
		e.phase = "evaluating " + p.Key.Setting()
		if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
			r.Status = runstate.Evaluating
		}
		endDash(session.Update{Result: engine.Result{Iters: e.iter()}})
	case experiments.PhaseDone:
		if p.Result == nil {
			break
		}
		sr := *p.Result
		if r := e.row(rowKeyOf(kind, p.Key)); r != nil {
			r.Seeds = slices.DeleteFunc(r.Seeds, func(x experiments.SeedResult) bool { return x.Seed == sr.Seed })
			r.Seeds = append(r.Seeds, sr)
			r.Status = runstate.Finished
			if len(r.Seeds) < len(e.opts.Seeds) {
				r.Status = runstate.Pending
			}
		}
		if kind != experiments.Versatility && e.phase != "reusing a finished run" {
			e.jobSecs = append(e.jobSecs, now.Sub(e.jobAt).Seconds())
		}
		ev := engine.EvalResult{Metric: e.metric, Mean: sr.Mean, CI95: sr.CI95, Tasks: sr.Tasks}
		endDash(session.Update{Result: engine.Result{Iters: sr.Iters, Eval: &ev}})
		at := ""
		if kind == experiments.Versatility {
			at = " at " + p.Key.Setting()
		}
		e.note.set(fmt.Sprintf("%s%s: %s %s ± %s", p.Name, at, e.metric, fmtMetric(e.metric, sr.Mean), fmtMetric(e.metric, sr.CI95)))
	case experiments.PhaseFailed:
		err := runstate.Failed
		if p.Err != nil {
			err = firstLine(p.Err.Error())
		}
		for i := range e.rows {
			r := &e.rows[i]
			if r.Variant == p.Key.Variant && r.Status != runstate.Finished && r.Status != runstate.Pending {
				r.Status, r.Err = runstate.Failed, err
			}
		}
		endDash(session.Update{Err: p.Err})
		e.note = note{text: p.Name + ": " + err, err: true}
	case experiments.PhaseFigures:
		e.phase, e.snap = "drawing the tables and figures", nil
	}
	return ups
}

func (e *expState) iter() int {
	if e.snap != nil {
		return e.snap.Iter
	}
	return 0
}

// newDash gives the run that starts training a dashboard of its own,
// fed from the experiment's snapshots.
func (e *expState) newDash(s *expScreen, p experiments.Progress) {
	v := p.Key.Variant
	if !slices.Contains(toggleVariants[:], v) {
		e.dash = nil // a baseline (MAML) reports no snapshots
		return
	}
	cfg := e.preset.Config
	if e.opts.Iters > 0 {
		cfg.Iters = e.opts.Iters
	}
	e.stub = &session.Run{Variant: v, Dir: filepath.Join(e.worker.Dir, p.Name), Config: cfg}
	d := newDashboard(s.theme, s.dashKeys, nil, e.preset)
	d.readOnly = true
	vi := variantIndex(v)
	d.views[vi].run, d.views[vi].state = e.stub, runstate.Starting
	d.selected = vi
	d.w, d.h = s.w, s.h
	d.setMsg(fmt.Sprintf("experiment run %d/%d: %s · esc returns to the experiment", p.Job, p.Jobs, p.Name))
	e.dash, e.dashJob = d, p.Job
	if s.stage == expDash {
		e.dash.render()
	}
}

// end records how the experiment ended.
func (e *expState) end(err error) []session.Update {
	var ups []session.Update
	interrupted := err != nil && errors.Is(err, context.Canceled)
	switch {
	case err == nil:
		e.state, e.phase = runstate.Finished, "" // the state says it
		e.job = e.jobs
		e.note.set("finished: results.md, results.csv and figures/ in " + e.worker.Dir)
	case interrupted:
		e.state = runstate.Stopped
		e.note.set("stopped; runs are checkpointed; continue with: mkbench experiment --resume " + e.worker.Dir)
	case errors.Is(err, experiments.ErrRunsFailed):
		e.state, e.failures = runstate.Finished, true
		e.note.fail(err)
	default:
		e.state = runstate.Failed
		e.note.fail(err)
	}
	for i := range e.rows {
		switch e.rows[i].Status {
		case runstate.Running, runstate.Evaluating:
			e.rows[i].Status = runstate.Stopped
		}
	}
	e.snap = nil
	if e.dash != nil && !e.dash.allEnded() {
		ups = append(ups, session.Update{Run: e.stub, Ended: true, Err: err,
			Result: engine.Result{Iters: e.iter(), Interrupted: interrupted}})
	}
	return ups
}

// progressData is the progress line of the experiment.
func (e *expState) progressData(now time.Time) expProgressData {
	d := expProgressData{Kind: e.opts.Experiment, Preset: e.preset.Name, Job: e.job, Jobs: e.jobs, Name: e.name,
		Phase: e.phase, RunETA: -1, AllETA: -1, State: e.state, Failures: e.failures, Points: len(e.rows)}
	for _, r := range e.rows {
		if r.Status == runstate.Finished {
			d.PointsDone++
		}
	}

	budget, _ := engine.MinutesBudget(e.opts.Minutes) // checked when the experiment started
	if e.snap != nil {
		d.Iter, d.Iters, d.ItPerSec = e.snap.Iter, e.snap.Iters, e.snap.ItersPerSec
		if left, byBudget := runETA(d.Iter, d.Iters, d.ItPerSec, budget, e.snap.Wall); byBudget || d.ItPerSec > 0 && d.Iters >= d.Iter {
			d.RunETA = max(left, 0)
		}
	}
	// The rest of the experiment: the runs left at the mean time of
	// those trained here, else at the current run's rate.
	left := float64(e.jobs - e.job)
	switch {
	case len(e.jobSecs) > 0:
		var s float64
		for _, x := range e.jobSecs {
			s += x
		}
		per := s / float64(len(e.jobSecs))
		cur := math.Max(0, per-now.Sub(e.jobAt).Seconds())
		if d.RunETA >= 0 {
			cur = d.RunETA.Seconds()
		}
		d.AllETA = secondsETA(cur + left*per)
	case d.RunETA >= 0 && d.ItPerSec > 0:
		// In floats: the runs left times a huge budget overflows an int.
		per := float64(d.Iters) / d.ItPerSec
		if budget > 0 {
			per = min(per, budget.Seconds()) // each run ends at its budget at the latest
		}
		d.AllETA = addETA(d.RunETA, secondsETA(left*per))
	}
	return d
}
