package experiments

import (
	"context"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/presets"
)

// MAML is the variant name of the MAML baseline (Finn et al. 2017), the
// paper's comparison in its regression figure. It is trained by a
// BaselineFunc, not by the engine.
const MAML = "maml"

// BaselineFunc trains and evaluates a method that is not an engine variant
// on one point of an experiment — the hook for the MAML baseline
// (MAMLBaseline). Runner.Baselines maps the variant name ("maml") to it;
// DefaultBaselines is the registration the command line and the workbench
// use. It is called from
// the Runner's goroutine, must stop soon after ctx is cancelled (returning
// ctx's error), and must not print.
type BaselineFunc func(ctx context.Context, job BaselineJob) (BaselineResult, error)

// BaselineJob is one training run of a baseline: the same task family,
// shots, seed, iteration budget and evaluation protocol as the engine runs
// of the point.
type BaselineJob struct {
	Preset string
	// Config is the preset's config with the point's shot, seed,
	// iterations and evaluation size; a baseline uses what applies to it
	// (Shot, Query, MetaBatch, Iters, Seed, EvalTasks, EvalQuery).
	Config engine.Config
	// Train is the training task source; Test, when not nil, is what the
	// final evaluation draws from (as engine.RunOptions.Test).
	Train, Test task.Source
	// Dir is the run's own directory inside the experiment. The baseline
	// keeps its files (checkpoints, metrics.jsonl in the engine's format if
	// it can, for the learning curves) there; when Dir holds an
	// interrupted run of its own, it continues it. The Runner writes
	// summary.json and fits.json itself from the result.
	Dir string
	// Budget, when positive, ends training after this much training time.
	Budget time.Duration
	// Fits are the regression display tasks the engine variants are drawn
	// on (empty for classification): the baseline predicts GridX from each
	// task's support set, for the sine-fit figures.
	Fits []Fit
}

// BaselineResult is what a baseline run produced.
type BaselineResult struct {
	Eval         engine.EvalResult
	Iters        int
	TrainSeconds float64
	// Fits are Job.Fits with PredMean (and PredSD where the method has a
	// spread; MAML leaves it nil) filled in.
	Fits []Fit
}

// DefaultBaselines are the baselines the command line and the workbench
// offer beside the MetaKernel variants: MAML, a --variants name and a
// default variant of the sine shots experiment (the paper's regression
// comparison).
func DefaultBaselines() map[string]BaselineFunc {
	return map[string]BaselineFunc{MAML: MAMLBaseline}
}

// TrainBaseline trains the baseline run tr (a sweep unit of a baseline
// variant) into dir with bf, as an experiment's Runner trains one: a
// finished run is left alone, and the run gets the engine's summary.json
// and the fits the figures draw.
func TrainBaseline(ctx context.Context, tr TrainingRun, bf BaselineFunc, dir, data string) error {
	ov := presets.Overrides{}
	for _, s := range tr.Set {
		k, v, err := presets.ParseSet(s)
		if err != nil {
			return err
		}
		ov[k] = v
	}
	p, cfg, err := presets.Spec{Preset: tr.Preset, Overrides: ov}.Config()
	if err != nil {
		return err
	}
	j := job{seed: tr.Seed, name: tr.Dir, preset: tr.Record, cfg: cfg, baseline: bf,
		key: PointKey{Variant: tr.Variant, TrainWay: cfg.Way, TrainShot: cfg.Shot, Way: cfg.Way, Shot: cfg.Shot}}
	_, err = (&Runner{}).runBaseline(ctx, Progress{}, dir, j, Options{Data: data, Minutes: tr.Minutes}, p)
	return err
}
