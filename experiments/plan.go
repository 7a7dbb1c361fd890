package experiments

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// job is one run of an experiment: a training run (or a baseline's), or,
// for versatility, a trained model with the grid cells to evaluate it on.
type job struct {
	key      PointKey
	seed     uint64
	name     string // run directory: relative to the experiment, or absolute (external)
	preset   string
	cfg      engine.Config
	spec     presets.Spec // what cfg was built from (training jobs)
	baseline BaselineFunc
	external bool       // a run from elsewhere (versatility --run): never trained or changed
	cells    []PointKey // versatility grid cells
}

// Plan returns the run directories an experiment will use, in order,
// after checking its options; nothing is written.
func (r *Runner) Plan() ([]string, error) {
	jobs, _, err := r.jobs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.name)
	}
	return out, nil
}

// TrainingRun is one training run of an experiment, as a sweep unit runs
// it: the sweep engines train an experiment's runs, and the Runner then
// finds them finished and draws the results.
type TrainingRun struct {
	Dir     string // run directory, relative to the experiment directory
	Preset  string // the spec's preset
	Variant string // an engine variant or a baseline's
	Record  string // the preset name the run records
	Seed    uint64
	Set     []string // the spec's overrides, key=value
	Minutes float64  // training-time budget; 0: none
}

// TrainingRuns lists the training runs of the experiment, in plan order,
// after checking its options; nothing is written. A versatility
// experiment given a trained run (--run) has none.
func (r *Runner) TrainingRuns() ([]TrainingRun, error) {
	jobs, o, err := r.jobs()
	if err != nil {
		return nil, err
	}
	var out []TrainingRun
	for _, j := range jobs {
		if j.external {
			continue
		}
		out = append(out, TrainingRun{Dir: j.name, Preset: j.spec.Preset, Variant: j.key.Variant, Record: j.preset,
			Seed: j.seed, Set: j.spec.Overrides.Settings(), Minutes: o.Minutes})
	}
	return out, nil
}

// Prepare creates the experiment directory with its experiment.json, or
// checks that the one there holds this experiment, as Run does first; for
// handing the training runs to a sweep engine before Run draws them.
func (r *Runner) Prepare() error {
	o, _, err := r.Options.Normalize(r.baselineNames())
	if err != nil {
		return err
	}
	lock, err := r.lockPrepared(o)
	if err != nil {
		return err
	}
	return lock.Release()
}

// jobs normalizes the options and plans the jobs, writing nothing.
func (r *Runner) jobs() ([]job, Options, error) {
	o, p, err := r.Options.Normalize(r.baselineNames())
	if err != nil {
		return nil, o, err
	}
	jobs, _, err := r.plan(o, p)
	return jobs, o, err
}

// runName is a run directory name: "+" written as "_" so it needs no
// quoting in a shell.
func runName(variant string, parts ...string) string {
	return filepath.Join(DirRuns, strings.Join(append([]string{presets.VariantSlug(variant)}, parts...), "-"))
}

// plan lists the jobs of an experiment, and notes for its results. Seeds
// are the outer loop, so the first seed's table is complete before the
// second seed starts.
func (r *Runner) plan(o Options, p presets.Preset) ([]job, []string, error) {
	if o.Experiment == Versatility && o.FromRun != "" {
		j, notes, err := fromRunJob(o, p)
		if err != nil {
			return nil, nil, err
		}
		return []job{j}, notes, nil
	}
	var jobs []job
	add := func(sp presets.Spec, recorded, variant string, seed uint64, bases int, name string) error {
		j, err := r.trainingJob(o, sp, recorded, variant, seed, bases, name)
		if err != nil {
			return err
		}
		if o.Experiment == Versatility {
			j.cells = gridCells(o, j.key)
		}
		jobs = append(jobs, j)
		return nil
	}
	preset := presets.Spec{Preset: p.Name}
	for _, s := range o.Seeds {
		seed := fmt.Sprintf("s%d", s)
		switch o.Experiment {
		case Ablation, Versatility:
			for _, v := range o.Variants {
				if err := add(preset, p.Name, v, s, 0, runName(v, seed)); err != nil {
					return nil, nil, err
				}
			}
		case Efficiency:
			for _, d := range o.Bases {
				for _, v := range o.Variants {
					if err := add(preset, p.Name, v, s, d, runName(v, fmt.Sprintf("D%d", d), seed)); err != nil {
						return nil, nil, err
					}
				}
			}
		case Shots:
			for _, k := range o.Shots {
				sp, recorded := shotSpec(p, k)
				for _, v := range o.Variants {
					if err := add(sp, recorded, v, s, 0, runName(v, fmt.Sprintf("shot%d", k), seed)); err != nil {
						return nil, nil, err
					}
				}
			}
		}
	}
	return jobs, nil, nil
}

// trainingJob is one training job of variant with seed: the run spec sp,
// the runner's overrides and the experiment's settings (which win: the
// seed, --iters, --eval-tasks, and bases D when positive, else a single
// --bases value), recorded as preset recorded. A baseline takes the
// preset's settings; its variant is its own.
func (r *Runner) trainingJob(o Options, sp presets.Spec, recorded, variant string, seed uint64, bases int, name string) (job, error) {
	j := job{seed: seed, name: name, preset: recorded}
	sp.Variant = variant
	if bf, ok := r.Baselines[variant]; ok && !slices.Contains(engine.Variants, variant) {
		j.baseline, sp.Variant = bf, ""
	}
	ov := maps.Clone(r.Overrides)
	if ov == nil {
		ov = presets.Overrides{}
	}
	maps.Copy(ov, sp.Overrides)
	ov["seed"] = int(seed)
	if o.Iters > 0 {
		ov["iters"] = o.Iters
	}
	if o.EvalTasks > 0 {
		ov["eval_tasks"] = o.EvalTasks
	}
	if len(o.Bases) == 1 {
		ov["bases"] = o.Bases[0]
	}
	if bases > 0 {
		ov["bases"] = bases
	}
	sp.Overrides = ov
	_, cfg, err := sp.Config()
	if err != nil {
		return j, fmt.Errorf("%s: %w", name, err)
	}
	j.cfg, j.spec = cfg, sp
	j.key = PointKey{Variant: variant, Bases: cfg.Bases, TrainWay: cfg.Way, TrainShot: cfg.Shot, Way: cfg.Way, Shot: cfg.Shot}
	if j.baseline != nil {
		j.key.Bases = 0
	}
	return j, nil
}

// fromRunJob is the one job of a versatility experiment given a trained
// run (--run): its model, never trained or changed, on the grid.
func fromRunJob(o Options, p presets.Preset) (job, []string, error) {
	ck, err := loadEvalCheckpoint(o.FromRun)
	if err != nil {
		return job{}, nil, err
	}
	if ck.Source != p.Source {
		return job{}, nil, fmt.Errorf("experiment versatility: %s is a %s run, not %s like --preset %s", o.FromRun, ck.Source, p.Source, p.Name)
	}
	var notes []string
	if ck.Preset != p.Name {
		notes = append(notes, fmt.Sprintf("the model of `%s` was trained with preset %s", o.FromRun, ck.Preset))
	}
	abs, err := filepath.Abs(o.FromRun)
	if err != nil {
		return job{}, nil, err
	}
	c := ck.Config
	c.Iters = ck.Iter // what the model was trained for, not its budget
	j := job{seed: c.Seed, name: abs, preset: ck.Preset, cfg: c, external: true,
		key: PointKey{Variant: c.Variant(), Bases: c.Bases, TrainWay: c.Way, TrainShot: c.Shot, Way: c.Way, Shot: c.Shot}}
	if o.EvalTasks > 0 {
		j.cfg.EvalTasks = o.EvalTasks
	}
	j.cells = gridCells(o, j.key)
	return j, notes, nil
}

// shotSpec is p at k shots and the preset name its runs record: the
// preset of the same family and way with k shots when there is one, else p
// with its shot count overridden, recorded as "p@shotK".
func shotSpec(p presets.Preset, k int) (presets.Spec, string) {
	if p.Config.Shot == k {
		return presets.Spec{Preset: p.Name}, p.Name
	}
	for _, q := range presets.All() {
		if q.Source == p.Source && q.Config.Way == p.Config.Way && q.Config.Shot == k {
			return presets.Spec{Preset: q.Name}, q.Name
		}
	}
	return presets.Spec{Preset: p.Name, Overrides: presets.Overrides{"shot": k}}, fmt.Sprintf("%s@shot%d", p.Name, k)
}
