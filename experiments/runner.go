package experiments

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// Runner runs one experiment in its directory. Set the fields, then call
// Run; running it again on the same directory resumes: finished runs
// (summary.json present) are reused, an interrupted run continues from its
// checkpoint, finished versatility cells are kept.
//
// Plan (plan.go) lists the runs, Run (run.go) trains them and writes the
// results, and versatility.go evaluates the versatility grid.
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

// Progress is what a Runner reports while it works. Reports come from the
// goroutine that called Run, between and during runs.
type Progress struct {
	Job, Jobs int    // 1-based index of the current run, and how many there are
	Name      string // the run directory, relative to the experiment
	// Phase is PhaseReuse, PhaseResume or PhaseTrain when a run begins
	// (PhaseModel for a run given with --run),
	// PhaseStep during training (with Snapshot), PhaseDone when a run or a
	// grid cell is finished (with Result), PhaseEval when a versatility
	// cell begins, PhaseFailed when a run failed (with Err), PhaseFigures
	// at the end.
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

// ErrRunsFailed is returned by Run when some runs failed and the rest
// finished.
var ErrRunsFailed = errors.New("experiments: runs failed")

// ErrExists reports an experiment directory that holds something else:
// another experiment, a run, or files that are not an experiment's.
var ErrExists = errors.New("experiments: the directory is taken")

// Manifest is experiment.json: the normalized options and when the
// experiment began.
type Manifest struct {
	Options Options `json:"options"`
	// Overrides are the Runner's (mkbench experiment --set …): part of
	// what the experiment is, so a resume plans its runs with them.
	Overrides presets.Overrides `json:"overrides,omitempty"`
	Created   time.Time         `json:"created"`
}

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

// baselineNames are the variant names of r's baselines, sorted.
func (r *Runner) baselineNames() []string {
	var names []string
	for n := range r.Baselines {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (r *Runner) report(pr Progress) {
	if r.Progress != nil {
		r.Progress(pr)
	}
}
