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

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tbevents"
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
	// "" for the family's default. A path that is not UTF-8 (legal on
	// Linux) is written as its bytes too, data_bytes, which a JSON string
	// cannot hold; reading takes it back from them.
	Data   string `json:"data,omitempty"`
	Config Config `json:"config"`
}

// runConfigJSON is config.json as written: RunConfig and Data's bytes
// when Data is not UTF-8.
type runConfigJSON struct {
	plainRunConfig
	DataBytes []byte `json:"data_bytes,omitempty"`
}

type plainRunConfig RunConfig // RunConfig without its JSON methods

// MarshalJSON writes Data's bytes besides it when JSON cannot hold them
// (it would write U+FFFD for each byte that is not UTF-8).
func (rc RunConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(runConfigJSON{plainRunConfig: plainRunConfig(rc), DataBytes: runfile.PathBytes(rc.Data)})
}

// UnmarshalJSON reads Data from its bytes when config.json has them.
func (rc *RunConfig) UnmarshalJSON(b []byte) error {
	var in runConfigJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*rc = RunConfig(in.plainRunConfig)
	rc.Data = runfile.PathFrom(rc.Data, in.DataBytes)
	return nil
}

// ReadRunConfig reads the config.json of run directory dir: what a run
// stopped before its first checkpoint can be started over from.
func ReadRunConfig(dir string) (RunConfig, error) {
	var rc RunConfig
	path := filepath.Join(dir, FileConfig)
	data, err := runfile.ReadBounded(path, runfile.MaxSmallJSON)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rc, fmt.Errorf("engine: %s is not a run directory: it has neither %s nor %s", dir, FileCheckpoint, FileConfig)
		}
		return rc, fmt.Errorf("engine: %w", err) // it names the file
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
	data, err := runfile.ReadBounded(path, runfile.MaxSmallJSON)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err) // it names the file
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
	// Device is where the run's last part trained and its evaluation
	// ran: "cpu" or "opencl:N NAME (PLATFORM)"; absent in summaries
	// written before devices (all on the CPU). It is not a setting: the
	// config is the same on either device.
	Device     string     `json:"device,omitempty"`
	Final      MetricsRow `json:"final"`
	GOMAXPROCS int        `json:"gomaxprocs"`
	GoVersion  string     `json:"go_version"`
	Finished   time.Time  `json:"finished"`
	Config     Config     `json:"config"`
}

// OwnFile reports whether name is the name of a file the engine writes
// in a run directory — its files above, failed.json, the lock, event
// files, a damaged best.gob moved aside — or of the temporary file an
// interrupted atomic write of one left. Nothing else in a run directory
// is the engine's: it never removes, replaces or writes over it.
func OwnFile(name string) bool {
	if of, ok := runfile.TempOf(name); ok {
		name = of
	}
	switch name {
	case FileConfig, FileMetrics, FileSummary, FileCheckpoint, FileBest, FileVal, FileGaps, FileFailed,
		runfile.FileLock, FileBest + damagedSuffix:
		return true
	}
	return strings.HasPrefix(name, tbevents.Prefix)
}

// damagedSuffix names a damaged best.gob moved aside by a repair.
const damagedSuffix = ".damaged"

// IsRunDir reports whether dir holds a run: its config.json, checkpoint
// or summary.
func IsRunDir(dir string) bool {
	for _, f := range []string{FileConfig, FileCheckpoint, FileSummary} {
		if fileExists(filepath.Join(dir, f)) {
			return true
		}
	}
	return false
}

// removeTemps removes the temporary files interrupted atomic writes of
// the run's own files left in dir (they are never read: the file they
// were to replace is whole), noting them in res. The caller holds dir's
// lock.
func removeTemps(dir string, res *Result) {
	removed, err := runfile.RemoveTemps(dir, OwnFile)
	if len(removed) > 0 && res != nil {
		res.note("removed %s in %s, left by an interrupted write", strings.Join(removed, ", "), dir)
	}
	if err != nil && res != nil {
		res.note("could not remove the leftovers of an interrupted write in %s: %v", dir, err)
	}
}

// usedDir is the refusal of dir for a run started from iteration 0 when
// it holds a run — a checkpoint, a summary, or best parameters — so a
// typo can never overwrite results; nil when it holds none. startOver
// (a resume asked to start over) refuses only a checkpoint, which
// --resume continues.
func usedDir(dir string, startOver bool) error {
	for _, f := range GroupFiles {
		if fileExists(filepath.Join(dir, f)) {
			return fmt.Errorf("engine: %s is a sweep's or an experiment's directory (%s is in it), whose runs live in folders below it; choose another --out", dir, f)
		}
	}
	if fileExists(filepath.Join(dir, FileCheckpoint)) {
		return fmt.Errorf("engine: %s already holds a run (%s exists); continue it with --resume %s or choose another --out", dir, FileCheckpoint, dir)
	}
	if startOver {
		return nil
	}
	if fileExists(filepath.Join(dir, FileSummary)) {
		return fmt.Errorf("engine: %s already holds a run (%s exists); choose another --out", dir, FileSummary)
	}
	if fileExists(filepath.Join(dir, FileBest)) {
		return fmt.Errorf("engine: %s has no %s but holds a run's best parameters (%s): evaluate them with mkbench eval --run %s, or start the run over with --start-over, which moves its files aside into %s/%s-TIME (nothing is deleted)",
			dir, FileCheckpoint, FileBest, dir, dir, asidePrefix)
	}
	return nil
}

// GroupFiles mark the directory of a sweep (sweep.FileManifest) or an
// experiment (experiments.FileExperiment), which packages above the engine
// own: a run written into one would sit beside its units, and mkbench runs
// would no longer list them as the group's.
var GroupFiles = []string{"sweep.json", "experiment.json"}

// asidePrefix starts the name of the folder inside a run directory that a
// start over moves the files of the earlier attempt to.
const asidePrefix = "stopped"

// prepareRunDir creates dir for a run started from iteration 0 and
// refuses one that holds a run (usedDir). The engine's files of a run
// stopped before its first checkpoint belong to no resumable state, but
// they are its record: they are moved, never deleted, into a new folder
// DIR/stopped-TIME, and the move is noted in res. Files not the engine's
// stay where they are.
func prepareRunDir(dir string, res *Result, startOver bool) error {
	if err := usedDir(dir, startOver); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("engine: cannot create run directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("engine: reading %s: %w", dir, err)
	}
	var stale []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && OwnFile(n) && n != runfile.FileLock && n != FileFailed {
			stale = append(stale, n)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	// Names alone prove nothing (config.json is a common one): the files
	// are a run's only when its config.json is a run's config.
	if !fileExists(filepath.Join(dir, FileConfig)) {
		return fmt.Errorf("engine: %s holds %s but no run's %s, so they are not mkbench's to move; choose another --out", dir, strings.Join(stale, ", "), FileConfig)
	}
	if rc, err := ReadRunConfig(dir); err != nil || rc.Source == "" {
		return fmt.Errorf("engine: %s holds a %s that is not a run's, so it is not mkbench's to move; choose another --out", dir, FileConfig)
	}
	aside, err := freeAside(dir)
	if err != nil {
		return err
	}
	if err := os.Mkdir(aside, 0o755); err != nil {
		return fmt.Errorf("engine: cannot move the files of the earlier attempt in %s aside: %w", dir, err)
	}
	for _, f := range stale {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(aside, f)); err != nil {
			return fmt.Errorf("engine: cannot move %s aside to %s: %w", filepath.Join(dir, f), aside, err)
		}
	}
	if res != nil {
		res.note("%s held a run stopped before its first checkpoint, which cannot be resumed: moved its %s to %s and started over",
			dir, strings.Join(stale, ", "), aside)
	}
	return nil
}

// freeAside is the first free DIR/stopped-TIME[-N].
func freeAside(dir string) (string, error) {
	base := filepath.Join(dir, asidePrefix+"-"+time.Now().UTC().Format("20060102T150405Z"))
	to := base
	for n := 2; ; n++ {
		_, err := os.Lstat(to)
		if errors.Is(err, fs.ErrNotExist) {
			return to, nil
		}
		if err != nil {
			return "", fmt.Errorf("engine: %w", err)
		}
		to = fmt.Sprintf("%s-%d", base, n)
	}
}

// newRunDir prepares dir for a run started from iteration 0 and writes
// its config.json.
func newRunDir(dir string, rc RunConfig, res *Result, startOver bool) error {
	if err := prepareRunDir(dir, res, startOver); err != nil {
		return err
	}
	return runfile.WriteJSON(filepath.Join(dir, FileConfig), rc, runfile.Private)
}
