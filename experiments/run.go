package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// Run runs the experiment: every job in order, results written after
// each, figures at the end. Cancelling ctx stops the current run after its
// checkpoint; the returned error then wraps ctx's error and the results
// so far are saved.
//
// Run holds the experiment directory's lock (runfile.Lock) from before it
// looks into the directory until it returns, figures included: a second
// Runner, or a Report, on the same directory fails at once with an
// *runfile.InUseError (errors.Is runfile.ErrInUse) and changes nothing. The
// lock is the experiment directory's own .lock; each run under runs/ is
// locked in its own directory by engine.Run, so the two never meet.
func (r *Runner) Run(ctx context.Context) (*Results, error) {
	o, p, err := r.Options.Normalize(r.baselineNames())
	if err != nil {
		return nil, err
	}
	lock, err := r.lockPrepared(o)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	jobs, notes, err := r.plan(o, p)
	if err != nil {
		return nil, err
	}
	cfg0 := jobs[0].cfg
	res := &Results{Experiment: o.Experiment, Preset: p.Name, Source: p.Source, Metric: "mse", Options: o,
		Iters: o.Iters, EvalTasks: cfg0.EvalTasks, EvalQuery: cfg0.EvalQuery, EvalSamples: cfg0.EvalSamples, Notes: notes}
	if cfg0.Classify() {
		res.Metric = "accuracy"
	}
	if res.Iters == 0 {
		res.Iters = cfg0.Iters
	}
	evals, err := loadEvals(filepath.Join(r.Dir, FileEvals))
	if err != nil {
		return nil, err
	}
	save := func() error {
		res.Updated = time.Now().UTC()
		return writeResults(r.Dir, res)
	}
	// A run that fails (a diverging variant, say) does not stop the
	// others: an unattended suite should finish what it can. Its error is
	// kept in the notes and returned at the end, after the tables and
	// figures of the rest.
	var failed []string
	for i, j := range jobs {
		if err := ctx.Err(); err != nil {
			save()
			return res, fmt.Errorf("experiment interrupted: %w", err)
		}
		err := r.runJob(ctx, i, len(jobs), j, o, p, res, evals)
		if err != nil && ctx.Err() != nil {
			if serr := save(); serr != nil {
				err = fmt.Errorf("%w; and the results could not be saved: %v", err, serr)
			}
			return res, fmt.Errorf("experiment interrupted: %w", err)
		}
		if err != nil {
			failed = append(failed, j.name)
			res.Notes = append(res.Notes, fmt.Sprintf("`%s` failed: %v", j.name, err))
			r.report(Progress{Job: i + 1, Jobs: len(jobs), Name: j.name, Key: j.key, Phase: PhaseFailed, Err: err})
		}
		if err := save(); err != nil {
			return res, err
		}
	}
	res.Complete = len(failed) == 0
	r.report(Progress{Job: len(jobs), Jobs: len(jobs), Phase: PhaseFigures})
	if err := renderAll(r.Dir, res); err != nil {
		return res, err
	}
	if err := save(); err != nil {
		return res, err
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("%w: %d of %d (%s; see the notes in %s); the others' results are written", ErrRunsFailed, len(failed), len(jobs), strings.Join(failed, ", "), filepath.Join(r.Dir, FileMarkdown))
	}
	return res, nil
}

// lockPrepared takes the experiment directory's lock and prepares it. A
// refused directory keeps no trace of the attempt: neither the lock file
// nor the folder the lock made.
func (r *Runner) lockPrepared(o Options) (*runfile.DirLock, error) {
	existed, hadLock := exists(r.Dir), exists(filepath.Join(r.Dir, runfile.FileLock))
	lock, err := runfile.Lock(r.Dir)
	if err != nil {
		return nil, err
	}
	if err := r.prepare(o); err != nil {
		if hadLock {
			lock.Release()
		} else {
			lock.Remove()
		}
		if !existed {
			os.Remove(r.Dir)
		}
		return nil, err
	}
	return lock, nil
}

// prepare creates the experiment directory, or checks that the one there
// holds this experiment.
func (r *Runner) prepare(o Options) error {
	m, err := LoadManifest(r.Dir)
	switch {
	case err == nil:
		if d := diff(m.Options, o); d != "" {
			return fmt.Errorf("%w: %s was started with other settings (%s); resume it with: mkbench experiment --resume %s, or choose another --out", ErrExists, r.Dir, d, r.Dir)
		}
		// Compared as JSON: the manifest's values come back as JSON
		// numbers and lists, the Runner's as Go ints.
		was, _ := json.Marshal(m.Overrides)
		now, _ := json.Marshal(r.Overrides)
		if len(m.Overrides) != len(r.Overrides) || string(was) != string(now) {
			return fmt.Errorf("%w: %s was started with other --set settings (%s, now %s); resume it with: mkbench experiment --resume %s, or choose another --out", ErrExists, r.Dir, was, now, r.Dir)
		}
		return nil
	case !errors.Is(err, errNoOptions):
		return err
	}
	if exists(filepath.Join(r.Dir, engine.FileCheckpoint)) || exists(filepath.Join(r.Dir, engine.FileSummary)) {
		return fmt.Errorf("%w: %s holds a run, not an experiment; choose another --out", ErrExists, r.Dir)
	}
	// A new experiment writes results.json, results.md, figures/ … into
	// its directory: one that holds anything (but the lock just taken)
	// holds files mkbench did not write, which those could replace.
	if ents, err := os.ReadDir(r.Dir); err == nil {
		for _, e := range ents {
			if e.Name() != runfile.FileLock {
				return fmt.Errorf("%w: %s is not empty (%s is in it) and holds no experiment; choose a new or empty folder for --out", ErrExists, r.Dir, e.Name())
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(r.Dir, DirRuns), 0o755); err != nil {
		return fmt.Errorf("experiments: cannot create the experiment directory: %w", err)
	}
	return writeJSON(filepath.Join(r.Dir, FileExperiment), Manifest{Options: o, Overrides: r.Overrides, Created: time.Now().UTC()})
}

// runJob trains (or reuses, or resumes) one run and records its results:
// the run's own evaluation, or for versatility its grid cells.
func (r *Runner) runJob(ctx context.Context, i, n int, j job, o Options, p presets.Preset, res *Results, evals map[string]SeedResult) error {
	dir := j.name
	if !j.external {
		dir = filepath.Join(r.Dir, j.name)
	}
	pr := Progress{Job: i + 1, Jobs: n, Name: j.name, Key: j.key}
	var sr SeedResult
	var err error
	switch {
	case j.external:
		pr.Phase = PhaseModel
		r.report(pr)
	case j.baseline != nil:
		sr, err = r.runBaseline(ctx, pr, dir, j, o, p)
	default:
		sr, err = r.train(ctx, pr, dir, j, o, p)
	}
	if err != nil {
		return err
	}
	if j.external || len(j.cells) > 0 {
		return r.evalCells(ctx, pr, dir, j, o, res, evals)
	}
	sr.RunDir = j.name
	res.add(j.key, res.Metric, sr)
	pr.Phase, pr.Result = PhaseDone, &sr
	r.report(pr)
	return nil
}

// budget is the training-time budget of every run of o (0: none);
// Normalize refused a Minutes it cannot be.
func budget(o Options) time.Duration {
	d, _ := engine.MinutesBudget(o.Minutes)
	return d
}

// train runs one engine training job, reusing a finished run and resuming
// an interrupted one.
func (r *Runner) train(ctx context.Context, pr Progress, dir string, j job, o Options, p presets.Preset) (SeedResult, error) {
	srcs, err := presets.NewSources(p.Source, j.cfg, o.Data)
	if err != nil {
		return SeedResult{}, err
	}
	if exists(filepath.Join(dir, engine.FileSummary)) {
		pr.Phase = PhaseReuse
		r.report(pr)
	} else {
		// A run stopped before its first checkpoint starts over: the
		// engine moves its files aside (never deleting them or anything
		// else in the folder), and refuses one whose run got further.
		resume := exists(filepath.Join(dir, engine.FileCheckpoint))
		pr.Phase = PhaseTrain
		if resume {
			pr.Phase = PhaseResume
		}
		r.report(pr)
		opts := engine.RunOptions{Preset: j.preset, Dir: dir, Resume: resume, Val: srcs.Val, Test: srcs.Test, TestBySource: srcs.TestBy,
			Budget: budget(o), ReportEvery: 250 * time.Millisecond, Data: o.Data}
		if _, err := engine.Run(ctx, j.cfg, srcs.Train, opts, r.stepReporter(pr)); err != nil {
			return SeedResult{}, fmt.Errorf("%s: %w", j.name, err)
		}
	}
	sr, err := seedResultOf(dir, j)
	if err != nil {
		return sr, err
	}
	if err := ensureDisplays(dir, srcs.Train, FitTasks); err != nil {
		return sr, fmt.Errorf("%s: drawing the fits: %w", j.name, err)
	}
	return sr, nil
}

// stepReporter is the observer of a training run: it reports PhaseStep
// (pr with the snapshot) at most every ReportEvery, and with Snapshots
// every snapshot that carries a display or a validation.
func (r *Runner) stepReporter(pr Progress) engine.Observer {
	every := r.ReportEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	var last time.Time
	return engine.ObserverFunc(func(s engine.Snapshot) error {
		whole := r.Snapshots && (s.Display != nil || s.Val != nil)
		if s.Done || !whole && time.Since(last) < every {
			return nil
		}
		last = time.Now()
		if !r.Snapshots {
			s.Display = nil // large, and not what a progress line shows
		}
		q := pr
		q.Phase, q.Snapshot = PhaseStep, &s
		r.report(q)
		return nil
	})
}

// seedResultOf reads a finished run's summary, checking that the run is
// the one the job asks for.
func seedResultOf(dir string, j job) (SeedResult, error) {
	var s engine.Summary
	if err := readJSON(filepath.Join(dir, engine.FileSummary), &s); err != nil {
		return SeedResult{}, err
	}
	c := s.Config
	if s.Eval == nil || s.Iters <= 0 {
		return SeedResult{}, fmt.Errorf("experiments: %s has an incomplete summary.json", dir)
	}
	if j.baseline == nil && (c.Variant() != j.cfg.Variant() || c.Seed != j.cfg.Seed || c.Bases != j.cfg.Bases || c.Shot != j.cfg.Shot || c.Way != j.cfg.Way) {
		return SeedResult{}, fmt.Errorf("experiments: %s holds a %s run (seed %d, D=%d, %d-shot), not the %s run (seed %d, D=%d, %d-shot) this experiment plans; move it away", dir, c.Variant(), c.Seed, c.Bases, c.Shot, j.cfg.Variant(), j.cfg.Seed, j.cfg.Bases, j.cfg.Shot)
	}
	return SeedResult{Seed: c.Seed, Mean: s.Eval.Mean, CI95: s.Eval.CI95, Tasks: s.Eval.Tasks, Query: s.Eval.Query,
		Iters: s.Iters, TrainSeconds: s.TrainSeconds, MsPerIter: 1000 * s.TrainSeconds / float64(s.Iters),
		EvalCheckpoint: s.EvalCheckpoint}, nil
}

// runBaseline runs a baseline job (MAML), reusing a finished one. The
// baseline trains; the Runner writes the run's summary.json (in the
// engine's format) and fits.json from its result.
func (r *Runner) runBaseline(ctx context.Context, pr Progress, dir string, j job, o Options, p presets.Preset) (SeedResult, error) {
	if exists(filepath.Join(dir, engine.FileSummary)) {
		pr.Phase = PhaseReuse
		r.report(pr)
		return seedResultOf(dir, j)
	}
	srcs, err := presets.NewSources(p.Source, j.cfg, o.Data)
	if err != nil {
		return SeedResult{}, err
	}
	fits, err := displayTasks(j.cfg, srcs.Train, FitTasks)
	if err != nil {
		return SeedResult{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return SeedResult{}, err
	}
	pr.Phase = PhaseTrain
	r.report(pr)
	out, err := j.baseline(ctx, BaselineJob{Preset: j.preset, Config: j.cfg, Train: srcs.Train, Test: srcs.Test, Dir: dir,
		Budget: budget(o), Fits: fits})
	if err != nil {
		return SeedResult{}, fmt.Errorf("%s: %w", j.name, err)
	}
	if len(out.Fits) > 0 {
		if err := writeJSON(filepath.Join(dir, FileFits), FitFile{Variant: j.key.Variant, Seed: j.seed, Shot: j.cfg.Shot, Iter: out.Iters, Checkpoint: "last", Fits: out.Fits}); err != nil {
			return SeedResult{}, err
		}
	}
	ev := out.Eval
	sum := engine.Summary{Preset: j.preset, Variant: j.key.Variant, Source: srcs.Train.Name(), Seed: j.seed, Iters: out.Iters,
		TrainSeconds: out.TrainSeconds, Eval: &ev, EvalCheckpoint: "last", Finished: time.Now().UTC(), Config: j.cfg}
	if out.Iters > 0 {
		sum.MsPerIter = 1000 * out.TrainSeconds / float64(out.Iters)
	}
	if err := writeJSON(filepath.Join(dir, engine.FileSummary), sum); err != nil {
		return SeedResult{}, err
	}
	return seedResultOf(dir, j)
}
