package experiments

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// Manifest is experiment.json: the normalized options and when the
// experiment began.
type Manifest struct {
	Options Options   `json:"options"`
	Created time.Time `json:"created"`
}

// Progress is what a Runner reports while it works. Reports come from the
// goroutine that called Run, between and during runs.
type Progress struct {
	Job, Jobs int    // 1-based index of the current run, and how many there are
	Name      string // the run directory, relative to the experiment
	// Phase is PhaseReuse, PhaseResume or PhaseTrain when a run begins
	// (PhaseModel for a run given with --run),
	// PhaseStep during training (with Snapshot), PhaseDone when a run or a
	// grid cell is finished (with Result), PhaseEval when a versatility
	// cell begins, PhaseFigures at the end.
	Phase    string
	Snapshot *engine.Snapshot
	Key      PointKey
	Result   *SeedResult
	Err      error
}

// Progress phases.
const (
	PhaseReuse   = "reuse"
	PhaseModel   = "model" // versatility --run: the given run's model is evaluated
	PhaseResume  = "resume"
	PhaseTrain   = "train"
	PhaseStep    = "step"
	PhaseEval    = "eval"
	PhaseDone    = "done"
	PhaseFailed  = "failed" // a run failed (with Err); the experiment goes on
	PhaseFigures = "figures"
)

// Runner runs one experiment in its directory. Set the fields, then call
// Run; running it again on the same directory resumes: finished runs
// (summary.json present) are reused, an interrupted run continues from its
// checkpoint, finished versatility cells are kept.
type Runner struct {
	Dir     string
	Options Options
	// Overrides replace preset settings in every training run (as
	// presets.Spec applies them), before the experiment's own settings
	// of each point (seed, iterations, bases, shots).
	Overrides presets.Overrides
	// Baselines are the methods besides the engine's variants that can
	// run, by variant name; the MAML baseline registers as MAML.
	Baselines map[string]BaselineFunc
	// Progress, if set, receives reports (see Progress).
	Progress func(Progress)
	// ReportEvery is the minimum time between PhaseStep reports; default 2s.
	ReportEvery time.Duration
	// Snapshots makes PhaseStep reports whole, for a live dashboard:
	// Snapshot.Display is kept, and a snapshot that carries a display or
	// a validation is reported whatever ReportEvery says.
	Snapshots bool
}

// ErrRunsFailed is returned by Run when some runs failed and the rest
// finished.
var ErrRunsFailed = errors.New("experiments: runs failed")

// ErrExists reports an experiment directory that holds another experiment.
var ErrExists = errors.New("experiments: the directory holds a different experiment")

// LoadManifest reads experiment.json of dir.
func LoadManifest(dir string) (Manifest, error) {
	var m Manifest
	if err := readJSON(filepath.Join(dir, FileExperiment), &m); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return m, fmt.Errorf("experiments: %s is %w (it has no %s)", dir, errNoOptions, FileExperiment)
		}
		return m, err
	}
	return m, nil
}

func (r *Runner) baselineNames() []string {
	var names []string
	for n := range r.Baselines {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// job is one run of an experiment: a training run (or a baseline's), or,
// for versatility, a trained model with the grid cells to evaluate it on.
type job struct {
	key      PointKey
	seed     uint64
	name     string // run directory: relative to the experiment, or absolute (external)
	preset   string
	cfg      engine.Config
	baseline BaselineFunc
	external bool       // a run from elsewhere (versatility --run): never trained or changed
	cells    []PointKey // versatility grid cells
}

// Plan returns the run directories an experiment will use, in order,
// after checking its options; nothing is written.
func (r *Runner) Plan() ([]string, error) {
	o, p, err := r.Options.Normalize(r.baselineNames())
	if err != nil {
		return nil, err
	}
	jobs, _, err := r.plan(o, p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, j := range jobs {
		out = append(out, j.name)
	}
	return out, nil
}

// runName is a run directory name: "+" written as "_" so it needs no
// quoting in a shell.
func runName(variant string, parts ...string) string {
	return filepath.Join(DirRuns, strings.Join(append([]string{presets.VariantSlug(variant)}, parts...), "-"))
}

// plan lists the jobs of an experiment. Seeds are the outer loop, so the
// first seed's table is complete before the second seed starts.
func (r *Runner) plan(o Options, p presets.Preset) ([]job, []string, error) {
	var jobs []job
	var notes []string
	// mk is one training job of variant with seed: the run spec sp, the
	// runner's overrides and the experiment's settings (which win). A
	// baseline takes the preset's settings; its variant is its own.
	mk := func(sp presets.Spec, recorded, variant string, seed uint64, name string) (job, error) {
		j := job{seed: seed, name: name, preset: recorded}
		sp.Variant = variant
		if bf, ok := r.Baselines[variant]; ok && !slices.Contains(engine.Variants, variant) {
			j.baseline, sp.Variant = bf, ""
		}
		ov := presets.Overrides{}
		for k, v := range r.Overrides {
			ov[k] = v
		}
		for k, v := range sp.Overrides {
			ov[k] = v
		}
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
		sp.Overrides = ov
		_, cfg, err := sp.Config()
		if err != nil {
			return j, fmt.Errorf("%s: %w", name, err)
		}
		j.cfg = cfg
		j.key = PointKey{Variant: variant, Bases: cfg.Bases, TrainWay: cfg.Way, TrainShot: cfg.Shot, Way: cfg.Way, Shot: cfg.Shot}
		if j.baseline != nil {
			j.key.Bases = 0
		}
		return j, nil
	}
	seedPart := func(s uint64) string { return fmt.Sprintf("s%d", s) }
	switch o.Experiment {
	case Ablation:
		for _, s := range o.Seeds {
			for _, v := range o.Variants {
				j, err := mk(presets.Spec{Preset: p.Name}, p.Name, v, s, runName(v, seedPart(s)))
				if err != nil {
					return nil, nil, err
				}
				jobs = append(jobs, j)
			}
		}
	case Efficiency:
		for _, s := range o.Seeds {
			for _, d := range o.Bases {
				for _, v := range o.Variants {
					j, err := mk(presets.Spec{Preset: p.Name}, p.Name, v, s, runName(v, fmt.Sprintf("D%d", d), seedPart(s)))
					if err != nil {
						return nil, nil, err
					}
					j.cfg.Bases, j.key.Bases = d, d
					if err := j.cfg.Validate(); err != nil {
						return nil, nil, err
					}
					jobs = append(jobs, j)
				}
			}
		}
	case Shots:
		for _, s := range o.Seeds {
			for _, k := range o.Shots {
				sp, recorded := shotSpec(p, k)
				for _, v := range o.Variants {
					j, err := mk(sp, recorded, v, s, runName(v, fmt.Sprintf("shot%d", k), seedPart(s)))
					if err != nil {
						return nil, nil, err
					}
					jobs = append(jobs, j)
				}
			}
		}
	case Versatility:
		cells := func(tw, ts int) []PointKey {
			var out []PointKey
			if len(o.Ways) == 0 {
				for _, k := range o.Shots {
					out = append(out, PointKey{TrainShot: ts, Shot: k})
				}
				return out
			}
			for _, k := range o.Shots {
				for _, w := range o.Ways {
					out = append(out, PointKey{TrainWay: tw, TrainShot: ts, Way: w, Shot: k})
				}
			}
			return out
		}
		if o.FromRun != "" {
			ck, err := loadEvalCheckpoint(o.FromRun)
			if err != nil {
				return nil, nil, err
			}
			if ck.Source != p.Source {
				return nil, nil, fmt.Errorf("experiment versatility: %s is a %s run, not %s like --preset %s", o.FromRun, ck.Source, p.Source, p.Name)
			}
			if ck.Preset != p.Name {
				notes = append(notes, fmt.Sprintf("the model of `%s` was trained with preset %s", o.FromRun, ck.Preset))
			}
			abs, err := filepath.Abs(o.FromRun)
			if err != nil {
				return nil, nil, err
			}
			c := ck.Config
			c.Iters = ck.Iter // what the model was trained for, not its budget
			j := job{seed: c.Seed, name: abs, preset: ck.Preset, cfg: c, external: true,
				key: PointKey{Variant: c.Variant(), Bases: c.Bases, TrainWay: c.Way, TrainShot: c.Shot, Way: c.Way, Shot: c.Shot}}
			if o.EvalTasks > 0 {
				j.cfg.EvalTasks = o.EvalTasks
			}
			j.cells = cells(c.Way, c.Shot)
			jobs = append(jobs, j)
			break
		}
		for _, s := range o.Seeds {
			for _, v := range o.Variants {
				j, err := mk(presets.Spec{Preset: p.Name}, p.Name, v, s, runName(v, seedPart(s)))
				if err != nil {
					return nil, nil, err
				}
				j.cells = cells(j.cfg.Way, j.cfg.Shot)
				jobs = append(jobs, j)
			}
		}
	}
	for i := range jobs {
		for k := range jobs[i].cells {
			c := &jobs[i].cells[k]
			c.Variant, c.Bases = jobs[i].key.Variant, jobs[i].key.Bases
		}
	}
	return jobs, notes, nil
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

// Run runs the experiment: every job in order, results written after
// each, figures at the end. Cancelling ctx stops the current run after its
// checkpoint; the returned error then wraps ctx's error and the results
// so far are saved.
func (r *Runner) Run(ctx context.Context) (*Results, error) {
	o, p, err := r.Options.Normalize(r.baselineNames())
	if err != nil {
		return nil, err
	}
	if err := r.prepare(o); err != nil {
		return nil, err
	}
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
			pr := Progress{Job: i + 1, Jobs: len(jobs), Name: j.name, Key: j.key, Phase: PhaseFailed, Err: err}
			r.report(pr)
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

func (r *Runner) report(pr Progress) {
	if r.Progress != nil {
		r.Progress(pr)
	}
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
		return nil
	case !errors.Is(err, errNoOptions):
		return err
	}
	if exists(filepath.Join(r.Dir, engine.FileCheckpoint)) || exists(filepath.Join(r.Dir, engine.FileSummary)) {
		return fmt.Errorf("%w: %s holds a run, not an experiment; choose another --out", ErrExists, r.Dir)
	}
	if err := os.MkdirAll(filepath.Join(r.Dir, DirRuns), 0o755); err != nil {
		return fmt.Errorf("experiments: cannot create the experiment directory: %w", err)
	}
	return writeJSON(filepath.Join(r.Dir, FileExperiment), Manifest{Options: o, Created: time.Now().UTC()})
}

// runJob trains (or reuses, or resumes) one run and records its results.
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

// train runs one engine training job, reusing a finished run and resuming
// an interrupted one.
func (r *Runner) train(ctx context.Context, pr Progress, dir string, j job, o Options, p presets.Preset) (SeedResult, error) {
	srcs, err := presets.NewSources(p.Source, j.cfg, o.Data)
	if err != nil {
		return SeedResult{}, err
	}
	sumPath := filepath.Join(dir, engine.FileSummary)
	if !exists(sumPath) {
		resume := exists(filepath.Join(dir, engine.FileCheckpoint))
		if !resume && exists(dir) {
			// Stopped before its first checkpoint: nothing in it can be
			// continued, and the engine refuses a used directory.
			if err := os.RemoveAll(dir); err != nil {
				return SeedResult{}, err
			}
		}
		pr.Phase = PhaseTrain
		if resume {
			pr.Phase = PhaseResume
		}
		r.report(pr)
		every := r.ReportEvery
		if every <= 0 {
			every = 2 * time.Second
		}
		var last time.Time
		obs := engine.ObserverFunc(func(s engine.Snapshot) error {
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
		opts := engine.RunOptions{Preset: j.preset, Dir: dir, Resume: resume, Val: srcs.Val, Test: srcs.Test,
			Budget: time.Duration(o.Minutes * float64(time.Minute)), ReportEvery: 250 * time.Millisecond}
		if _, err := engine.Run(ctx, j.cfg, srcs.Train, opts, obs); err != nil {
			return SeedResult{}, fmt.Errorf("%s: %w", j.name, err)
		}
	} else {
		pr.Phase = PhaseReuse
		r.report(pr)
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

// runBaseline runs a baseline job (MAML), reusing a finished one.
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
		Budget: time.Duration(o.Minutes * float64(time.Minute)), Fits: fits})
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

// loadEvalCheckpoint loads the checkpoint a run's summary was evaluated
// with (see evalCheckpoint).
func loadEvalCheckpoint(dir string) (*engine.Checkpoint, error) {
	path, _ := evalCheckpoint(dir)
	return engine.LoadCheckpoint(path)
}

// evalRow is one line of evals.jsonl: a finished versatility cell.
type evalRow struct {
	Key    string     `json:"key"`
	Result SeedResult `json:"result"`
}

func loadEvals(path string) (map[string]SeedResult, error) {
	out := map[string]SeedResult{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row evalRow
		// A line cut short by a crash is skipped: its cell is evaluated again.
		if json.Unmarshal(sc.Bytes(), &row) == nil && row.Key != "" {
			out[row.Key] = row.Result
		}
	}
	return out, sc.Err()
}

func appendEval(path string, row evalRow) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// imagesPerClass is how many examples each class of a classification
// family has, which bounds shot + query; 0 means no bound known.
func imagesPerClass(family string) int {
	if family == "omniglot" {
		return datasets.OmniglotDrawings
	}
	return 0
}

// classLimit is the number of classes of the smallest split of a
// classification family (presets.NewSources draws from all three), which
// bounds the way; 0 for regression.
func classLimit(family, data string) (int, string, error) {
	if family != "omniglot" {
		return 0, "", nil
	}
	if data == "" {
		data = datasets.DefaultOmniglotDir()
	}
	o, err := datasets.LoadOmniglot(data, datasets.OmniglotOptions{})
	if err != nil {
		return 0, "", err
	}
	limit, name := 0, ""
	for _, s := range []string{"train", "val", "test"} {
		set, err := o.Split(s)
		if err != nil {
			return 0, "", err
		}
		if limit == 0 || set.NumClasses() < limit {
			limit, name = set.NumClasses(), s
		}
	}
	return limit, name, nil
}

// evalCells evaluates a trained model on the versatility grid: for each
// cell a copy of its config with the cell's way and shot (and the query
// counts cut so that shot + query images exist per class), sources built
// for it, and Checkpoint.Model + EvaluateOn on the test source.
func (r *Runner) evalCells(ctx context.Context, pr Progress, dir string, j job, o Options, res *Results, evals map[string]SeedResult) error {
	ck, err := loadEvalCheckpoint(dir)
	if err != nil {
		return err
	}
	_, which := evalCheckpoint(dir)
	family := ck.Source
	var limit int
	var limitSplit string
	if ck.Config.Classify() {
		if limit, limitSplit, err = classLimit(family, o.Data); err != nil {
			return err
		}
	}
	tasks := j.cfg.EvalTasks
	var trainSec float64
	var s engine.Summary
	if readJSON(filepath.Join(dir, engine.FileSummary), &s) == nil {
		trainSec = s.TrainSeconds
	} else {
		trainSec = ck.TrainSeconds
	}
	for _, cell := range j.cells {
		if limit > 0 && cell.Way > limit {
			note := fmt.Sprintf("%d-way cells skipped: the %s split has %d classes", cell.Way, limitSplit, limit)
			if !slices.Contains(res.Notes, note) {
				res.Notes = append(res.Notes, note)
			}
			continue
		}
		cfg := ck.Config
		cfg.EmbedHidden = slices.Clone(cfg.EmbedHidden)
		if cell.Way > 0 {
			cfg.Way = cell.Way
		}
		cfg.Shot = cell.Shot
		if n := imagesPerClass(family); n > 0 {
			if cell.Shot >= n {
				note := fmt.Sprintf("%d-shot cells skipped: classes have %d examples, none left for queries", cell.Shot, n)
				if !slices.Contains(res.Notes, note) {
					res.Notes = append(res.Notes, note)
				}
				continue
			}
			cfg.Query, cfg.EvalQuery = min(cfg.Query, n-cell.Shot), min(cfg.EvalQuery, n-cell.Shot)
		}
		key := fmt.Sprintf("%s|%s|way%d|shot%d|tasks%d|query%d|samples%d|seed%d|iter%d", dir, which, cell.Way, cell.Shot, tasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed, ck.Iter)
		sr, done := evals[key]
		q := pr
		q.Key = cell
		if !done {
			if err := ctx.Err(); err != nil {
				return err
			}
			q.Phase = PhaseEval
			r.report(q)
			ev, err := evaluateCell(ctx, ck, cfg, family, o.Data, tasks)
			if err != nil {
				return fmt.Errorf("%s at %s: %w", j.name, WayShot(cell.Way, cell.Shot), err)
			}
			sr = SeedResult{Seed: cfg.Seed, Mean: ev.Mean, CI95: ev.CI95, Tasks: ev.Tasks, Query: ev.Query, Iters: ck.Iter,
				TrainSeconds: trainSec, RunDir: j.name, EvalCheckpoint: which}
			if ck.Iter > 0 {
				sr.MsPerIter = 1000 * trainSec / float64(ck.Iter)
			}
			evals[key] = sr
			if err := appendEval(filepath.Join(r.Dir, FileEvals), evalRow{Key: key, Result: sr}); err != nil {
				return err
			}
		}
		res.add(cell, res.Metric, sr)
		q.Phase, q.Result = PhaseDone, &sr
		r.report(q)
	}
	return nil
}

// evaluateCell evaluates ck's parameters with config cfg (another way or
// shot) on the test source of family. The evaluation runs in its own
// goroutine so that a cancelled ctx returns at once: a large cell can take
// minutes, and an interrupted one is simply evaluated again on resume.
func evaluateCell(ctx context.Context, ck *engine.Checkpoint, cfg engine.Config, family, data string, tasks int) (engine.EvalResult, error) {
	srcs, err := presets.NewSources(family, cfg, data)
	if err != nil {
		return engine.EvalResult{}, err
	}
	c := *ck
	c.Config = cfg
	m, err := c.Model(srcs.Train)
	if err != nil {
		return engine.EvalResult{}, err
	}
	test := srcs.Test
	if test == nil {
		test = srcs.Train
	}
	type out struct {
		ev  engine.EvalResult
		err error
	}
	ch := make(chan out, 1)
	go func() {
		defer m.Close()
		ev, err := m.EvaluateOn(test, tasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
		ch <- out{ev, err}
	}()
	select {
	case o := <-ch:
		return o.ev, o.err
	case <-ctx.Done():
		return engine.EvalResult{}, ctx.Err()
	}
}

// writeResults writes results.json, results.csv and results.md.
func writeResults(dir string, res *Results) error {
	if err := writeJSON(filepath.Join(dir, FileResults), res); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, FileCSV), res.CSV()); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, FileMarkdown), res.Markdown())
}

// LoadResults reads results.json of an experiment directory.
func LoadResults(dir string) (*Results, error) {
	var res Results
	if err := readJSON(filepath.Join(dir, FileResults), &res); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, merr := LoadManifest(dir); merr != nil {
				return nil, merr
			}
			return nil, fmt.Errorf("experiments: %s has no results yet (no run has finished); resume it with: mkbench experiment --resume %s", dir, dir)
		}
		return nil, err
	}
	return &res, nil
}

// Report re-renders an experiment's tables and figures from its saved
// results and run directories, without training or evaluating (it loads
// a checkpoint only to draw a regression fit that was never drawn).
func Report(dir string) (*Results, error) {
	res, err := LoadResults(dir)
	if err != nil {
		return nil, err
	}
	if err := renderAll(dir, res); err != nil {
		return res, err
	}
	return res, writeResults(dir, res)
}
