package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine/runfile"
	"github.com/mkbench/mkbench/engine/tbevents"
)

// The files of a run directory and their formats. They are written
// through runfile: whole files atomically, logs a row at a time and cut
// back to the checkpoint when a run resumes.

// Run file names inside a run directory.
const (
	FileConfig     = "config.json"
	FileMetrics    = "metrics.jsonl"
	FileSummary    = "summary.json"
	FileCheckpoint = "checkpoint.gob"
	FileBest       = "best.gob"   // the best-validation parameters
	FileVal        = "val.jsonl"  // one validation per line: the learning curve
	FileGaps       = "gaps.jsonl" // one record per log repaired by a resume with RunOptions.Repair
)

// RunConfig is config.json: enough to rebuild the model of a run.
type RunConfig struct {
	Preset string `json:"preset"`
	Source string `json:"source"`
	// Data is the data folder given when the run started (absolute), or
	// "" for the family's default.
	Data   string `json:"data,omitempty"`
	Config Config `json:"config"`
}

// ReadRunConfig reads the config.json of run directory dir: what a run
// stopped before its first checkpoint can be started over from.
func ReadRunConfig(dir string) (RunConfig, error) {
	var rc RunConfig
	path := filepath.Join(dir, FileConfig)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rc, fmt.Errorf("engine: %s is not a run directory: it has neither %s nor %s", dir, FileCheckpoint, FileConfig)
		}
		return rc, fmt.Errorf("engine: reading %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &rc); err != nil {
		return rc, fmt.Errorf("engine: %s is damaged (%v) and there is no checkpoint: nothing to resume; start a new run", path, err)
	}
	return rc, nil
}

// ReadSummary reads the summary.json of run directory dir: nil without
// error when the run has none (it has not finished), an error naming the
// file when it is damaged.
func ReadSummary(dir string) (*Summary, error) {
	path := filepath.Join(dir, FileSummary)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: reading %s: %w", path, err)
	}
	var sum Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		return nil, fmt.Errorf("engine: %s is damaged (%v); evaluate the run again with mkbench eval --run %s", path, err, dir)
	}
	return &sum, nil
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
	// EvalBySource is each test source's evaluation when the run was
	// tested on several (Meta-Dataset); Eval is then their mean.
	EvalBySource map[string]*EvalResult `json:"eval_by_source,omitempty"`
	Params       int                    `json:"params"`
	Final        MetricsRow             `json:"final"`
	GOMAXPROCS   int                    `json:"gomaxprocs"`
	GoVersion    string                 `json:"go_version"`
	Finished     time.Time              `json:"finished"`
	Config       Config                 `json:"config"`
}

// prepareRunDir creates dir for a run started from iteration 0 and
// refuses one that holds a run — a checkpoint or a summary — so a typo can
// never overwrite results. The files of a run stopped before its first
// checkpoint belong to no resumable state: they are removed, and noted in
// res.
func prepareRunDir(dir string, res *Result) error {
	for _, f := range []string{FileCheckpoint, FileSummary} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("engine: %s already holds a run (%s exists); continue it with --resume %s or choose another --out", dir, f, dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("engine: cannot create run directory: %w", err)
	}
	var removed []string
	stale := []string{FileConfig, FileMetrics, FileVal, FileBest, FileGaps}
	if events, err := tbevents.Files(dir); err == nil {
		for _, f := range events {
			stale = append(stale, filepath.Base(f))
		}
	}
	for _, f := range stale {
		path := filepath.Join(dir, f)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("engine: cannot remove %s of the run stopped before its first checkpoint: %w", path, err)
		}
		removed = append(removed, f)
	}
	if len(removed) > 0 && res != nil {
		res.note("%s held a run stopped before its first checkpoint, which cannot be resumed: removed its %s and started over",
			dir, strings.Join(removed, ", "))
	}
	return nil
}

// newRunDir prepares dir for a run started from iteration 0 and writes
// its config.json.
func newRunDir(dir string, rc RunConfig, res *Result) error {
	if err := prepareRunDir(dir, res); err != nil {
		return err
	}
	return runfile.WriteJSON(filepath.Join(dir, FileConfig), rc, runfile.Private)
}
