package experiments

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Files of an experiment directory (besides runs/ and figures/).
const (
	FileExperiment = "experiment.json" // Manifest
	FileResults    = "results.json"    // Results
	FileCSV        = "results.csv"
	FileMarkdown   = "results.md"
	FileEvals      = "evals.jsonl" // versatility: one finished grid cell per line
	DirRuns        = "runs"
	DirFigures     = "figures"
)

// PointKey identifies a point of an experiment: a variant at one setting.
// Way and Shot are what the point was evaluated at; TrainWay and TrainShot
// what its model was trained at (equal except in the versatility grid).
type PointKey struct {
	Variant   string `json:"variant"`
	Bases     int    `json:"bases"` // D
	TrainWay  int    `json:"train_way,omitempty"`
	TrainShot int    `json:"train_shot"`
	Way       int    `json:"way,omitempty"`
	Shot      int    `json:"shot"`
}

// Setting is the evaluated setting of k, as WayShot names it.
func (k PointKey) Setting() string { return WayShot(k.Way, k.Shot) }

// SeedResult is one seed's value at a point: its evaluation and the run
// that produced it.
type SeedResult struct {
	Seed  uint64  `json:"seed"`
	Mean  float64 `json:"mean"`
	CI95  float64 `json:"ci95"` // 1.96·sd/√n over the evaluation tasks
	Tasks int     `json:"tasks"`
	Query int     `json:"query"` // query points (per class when classifying) per evaluation task
	Iters int     `json:"iters"` // training iterations of the model
	// TrainSeconds is the run's training time (resumed parts included,
	// validation and evaluation excluded); MsPerIter is TrainSeconds per
	// iteration, so a resumed run reports its whole training.
	TrainSeconds float64 `json:"train_seconds"`
	MsPerIter    float64 `json:"ms_per_iter"`
	// RunDir is the run directory, relative to the experiment directory
	// (absolute for a versatility --run from elsewhere).
	RunDir         string `json:"run_dir"`
	EvalCheckpoint string `json:"eval_checkpoint,omitempty"` // "best" or "last"
}

// CI kinds of a Point.
const (
	// CITasks: one seed; the interval is that run's over evaluation tasks.
	CITasks = "tasks"
	// CISeeds: several seeds; the Student-t 95% interval of the mean of
	// the per-seed means (with three seeds 1.96 would understate it 2×).
	CISeeds = "seeds"
)

// Point is one point of an experiment over its seeds.
type Point struct {
	PointKey
	Metric string  `json:"metric"` // "mse" or "accuracy" (a fraction)
	Mean   float64 `json:"mean"`   // mean of the per-seed means
	CI95   float64 `json:"ci95"`
	CIKind string  `json:"ci_kind"` // CITasks or CISeeds
	SD     float64 `json:"sd"`      // standard deviation of the per-seed means; 0 with one seed
	// EvalTasks and EvalQuery size the evaluation (the first seed's;
	// all seeds use the same).
	EvalTasks    int          `json:"eval_tasks"`
	EvalQuery    int          `json:"eval_query"`
	TrainSeconds float64      `json:"train_seconds"` // mean over seeds
	MsPerIter    float64      `json:"ms_per_iter"`   // mean over seeds
	Seeds        []SeedResult `json:"seeds"`
}

// Results is results.json: every point of an experiment, aggregated over
// seeds. Points keep the order in which the experiment plans them.
type Results struct {
	Experiment string `json:"experiment"`
	Preset     string `json:"preset"`
	Source     string `json:"source"` // task family
	Metric     string `json:"metric"`
	// Iters, EvalTasks, EvalQuery and EvalSamples are the settings asked
	// for (a --minutes budget may end a run earlier: see each seed's Iters).
	Iters       int       `json:"iters"`
	EvalTasks   int       `json:"eval_tasks"`
	EvalQuery   int       `json:"eval_query"`
	EvalSamples int       `json:"eval_samples"`
	Options     Options   `json:"options"`
	Points      []Point   `json:"points"`
	Complete    bool      `json:"complete"` // every planned point has every seed
	Notes       []string  `json:"notes,omitempty"`
	Figures     []string  `json:"figures,omitempty"` // relative paths, PNG and SVG
	Updated     time.Time `json:"updated"`
}

// add records one seed's result at key, keeping plan order.
func (r *Results) add(key PointKey, metric string, s SeedResult) {
	for i := range r.Points {
		if r.Points[i].PointKey == key {
			p := &r.Points[i]
			p.Seeds = slices.DeleteFunc(p.Seeds, func(x SeedResult) bool { return x.Seed == s.Seed })
			p.Seeds = append(p.Seeds, s)
			p.aggregate()
			return
		}
	}
	p := Point{PointKey: key, Metric: metric, Seeds: []SeedResult{s}}
	p.aggregate()
	r.Points = append(r.Points, p)
}

// aggregate computes the point's statistics from its seeds: the mean and
// the Student-t interval across seeds (SeedStats), or with one seed that
// run's interval over its evaluation tasks.
func (p *Point) aggregate() {
	n := len(p.Seeds)
	if n == 0 {
		return
	}
	slices.SortFunc(p.Seeds, func(a, b SeedResult) int { return cmp.Compare(a.Seed, b.Seed) })
	means := make([]float64, n)
	var train, ms float64
	for i, s := range p.Seeds {
		means[i] = s.Mean
		train += s.TrainSeconds
		ms += s.MsPerIter
	}
	p.Mean, p.SD, p.CI95 = SeedStats(means)
	p.CIKind = CISeeds
	if n == 1 {
		p.CI95, p.CIKind = p.Seeds[0].CI95, CITasks
	}
	p.TrainSeconds, p.MsPerIter = train/float64(n), ms/float64(n)
	p.EvalTasks, p.EvalQuery = p.Seeds[0].Tasks, p.Seeds[0].Query
}

// WayShot names a task setting as the tables do: "5-way 1-shot", or
// "5-shot" for regression (way 0).
func WayShot(way, shot int) string {
	if way > 0 {
		return fmt.Sprintf("%d-way %d-shot", way, shot)
	}
	return fmt.Sprintf("%d-shot", shot)
}

// seeds are the experiment's seeds: those asked for, or for a versatility
// --run the run's own.
func (r *Results) seeds() []uint64 {
	if len(r.Options.Seeds) > 0 {
		return r.Options.Seeds
	}
	var out []uint64
	for _, p := range r.Points {
		for _, s := range p.Seeds {
			if !slices.Contains(out, s.Seed) {
				out = append(out, s.Seed)
			}
		}
	}
	return out
}

// variantsOf lists the points' variants in plan order.
func variantsOf(points []Point) []string {
	var out []string
	for _, p := range points {
		if !slices.Contains(out, p.Variant) {
			out = append(out, p.Variant)
		}
	}
	return out
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
//
// Report writes (results.json, the tables, the figures and the fits of
// run directories), so it takes the experiment directory's lock as a Runner
// does: on an experiment that is running it fails at once with an
// *runfile.InUseError rather than interleave its writes with the
// Runner's (a report from results read before the Runner's last save
// would otherwise overwrite newer tables and figures). Each file is
// written atomically, so reading results.md of a running experiment is
// always safe.
func Report(dir string) (*Results, error) {
	// Check first that dir is an experiment: Lock would create a
	// missing directory.
	if _, err := LoadResults(dir); err != nil {
		return nil, err
	}
	lock, err := runfile.Lock(dir)
	if err != nil {
		return nil, fmt.Errorf("report: %w (the running experiment rewrites its tables and figures after each run)", err)
	}
	defer lock.Release()
	res, err := LoadResults(dir)
	if err != nil {
		return nil, err
	}
	if err := renderAll(dir, res); err != nil {
		return res, err
	}
	return res, writeResults(dir, res)
}
