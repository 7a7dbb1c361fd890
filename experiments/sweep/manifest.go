package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/runfile"
)

// Files of a sweep directory.
const (
	FileManifest  = "sweep.json"   // Manifest: the units and their settings
	FileSource    = "sweep.yaml"   // the sweep file as given
	FileScript    = "sweep.sbatch" // the slurm engine's job array script
	FileJobs      = "jobs.jsonl"   // one Submission per sbatch call
	FileCancelled = "cancelled"    // written by cancel: workers stop without a requeue
	DirLogs       = "logs"         // the workers' output, one file per array task or local unit

	// In a unit's directory, besides the run's own files:
	FileFailed = engine.FileFailed // engine.Failure: why the unit failed
	FileStarts = "starts.jsonl"    // one Start per time a worker took the unit up
	FileEnds   = "ends.jsonl"      // one End per time a worker let it go in order
)

// Manifest is sweep.json: everything a worker needs to run any unit, so
// that a worker on another node reads it and nothing else.
type Manifest struct {
	Version int    `json:"version"`
	File    File   `json:"file"`
	Units   []Unit `json:"units"`
	// Data is the data folder the units read (--data), "" for the
	// default; it must be a path every node sees.
	Data string `json:"data,omitempty"`
	// Binary is the mkbench executable the slurm engine's script runs.
	Binary string `json:"binary,omitempty"`
	// DataBytes and BinaryBytes hold Data and Binary when they are not
	// UTF-8, which JSON cannot (runfile.PathBytes).
	DataBytes   []byte `json:"data_bytes,omitempty"`
	BinaryBytes []byte `json:"binary_bytes,omitempty"`
	// Engine is the engine the sweep was run with ("local" or "slurm"),
	// which resume uses unless told otherwise.
	Engine string `json:"engine"`
	// Experiment is the experiment whose training runs these units are,
	// "" for a sweep of its own (see experiments.Runner.Units).
	Experiment string    `json:"experiment,omitempty"`
	Created    time.Time `json:"created"`
}

// manifestVersion is the format of sweep.json this build writes and reads.
const manifestVersion = 1

// ErrNotSweep reports a directory without sweep.json.
var ErrNotSweep = errors.New("not a sweep directory")

// ErrOtherSweep reports a sweep directory that holds other units.
var ErrOtherSweep = errors.New("the directory holds a different sweep")

// Load reads dir's sweep.json.
func Load(dir string) (Manifest, error) {
	var m Manifest
	data, err := runfile.ReadBounded(filepath.Join(dir, FileManifest), maxManifest)
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("sweep: %s is %w (it has no %s; start one with mkbench sweep run FILE --out %s)", dir, ErrNotSweep, FileManifest, dir)
	}
	if err != nil {
		return m, fmt.Errorf("sweep: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("sweep: %s is damaged (%v); the units' run directories under %s are intact", filepath.Join(dir, FileManifest), err, filepath.Join(dir, DirUnits))
	}
	m.Data, m.Binary = runfile.PathFrom(m.Data, m.DataBytes), runfile.PathFrom(m.Binary, m.BinaryBytes)
	if m.Version != manifestVersion {
		return m, fmt.Errorf("sweep: %s has format %d; this mkbench reads format %d", filepath.Join(dir, FileManifest), m.Version, manifestVersion)
	}
	if len(m.Units) > MaxUnits {
		return m, fmt.Errorf("sweep: %s is damaged: it lists %d units, more than a sweep has (%d)", filepath.Join(dir, FileManifest), len(m.Units), MaxUnits)
	}
	dirs := make(map[string]int, len(m.Units))
	if err := m.File.Slurm.check(); err != nil {
		return m, fmt.Errorf("sweep: %s is damaged: %v", filepath.Join(dir, FileManifest), err)
	}
	for i, u := range m.Units {
		if _, err := opencl.ParseSelection(u.Device); u.Index != i || u.Name == "" || !unitDirOK(u.Dir) || u.Name != filepath.Base(u.Dir) || !printable(u) || err != nil {
			return m, fmt.Errorf("sweep: %s is damaged: unit %d (%q) is malformed", filepath.Join(dir, FileManifest), i, u.Name)
		}
		// Two units in one directory would train over each other.
		if j, ok := dirs[strings.ToLower(u.Dir)]; ok {
			return m, fmt.Errorf("sweep: %s is damaged: units %d and %d share the directory %s", filepath.Join(dir, FileManifest), j, i, u.Dir)
		}
		dirs[strings.ToLower(u.Dir)] = i
	}
	return m, nil
}

// printable reports whether every text of u shows on a terminal as it is
// (runfile.Printable): status, the report and the workbench print them.
func printable(u Unit) bool {
	texts := append([]string{u.Name, u.Dir, u.Preset, u.Variant, u.Record, u.Device}, u.Grid...)
	for _, t := range append(texts, u.Set...) {
		if runfile.Printable(t) != t {
			return false
		}
	}
	return true
}

// maxManifest bounds sweep.json: MaxUnits units of a few hundred bytes
// each, with room for long names.
const maxManifest = 256 << 20

// unitDirOK reports whether a unit's directory, as sweep.json gives it, is
// one a sweep makes: a clean relative path of two names below the sweep
// directory (units/NAME, or an experiment's runs/NAME), each a name a
// file system takes, so a sweep.json handed over cannot point a worker at
// the sweep directory itself or anywhere else.
func unitDirOK(d string) bool {
	parent, name, ok := strings.Cut(filepath.ToSlash(d), "/")
	return ok && filepath.Clean(d) == d && filepath.IsLocal(d) && parent != "." && parent != ".." &&
		name != "" && name != "." && name != ".." && !strings.Contains(name, "/") && len(name) <= MaxUnitName && len(parent) <= MaxUnitName
}

// maxPath is the longest path the system takes (PATH_MAX on Linux; macOS
// takes 1024). room is what a unit adds below its directory: its files'
// names and a temporary file's suffix.
const (
	maxPath = 4096
	room    = 64
)

// Create writes a new sweep directory for m, with source (the sweep
// file's bytes, nil for none) beside it. A directory that already holds
// the same units is kept as it is (a run started again continues it); one
// holding other units, or a run, is refused.
func Create(dir string, m Manifest, source []byte) error {
	old, err := Load(dir)
	switch {
	case err == nil:
		if !sameUnits(old.Units, m.Units) {
			return fmt.Errorf("sweep: %w: %s was started from another sweep file (%d units, now %d); continue it with mkbench sweep resume %s, or choose another --out",
				ErrOtherSweep, dir, len(old.Units), len(m.Units), dir)
		}
		return nil
	case !errors.Is(err, ErrNotSweep):
		return err
	}
	// A unit whose files' paths are longer than the system takes would
	// fail only when it runs.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, u := range m.Units {
		if n := len(abs) + 1 + len(u.Dir) + room; n > maxPath {
			return fmt.Errorf("sweep: %s is too long a path for the sweep directory: unit %s's files would have paths of %d bytes, more than the %d the system takes; choose a shorter --out", dir, u.Name, n, maxPath)
		}
	}
	for _, f := range []string{engine.FileCheckpoint, engine.FileSummary} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("sweep: %s holds a run, not a sweep; choose another --out", dir)
		}
	}
	// units/ and logs/ are made by the workers and engines as they need
	// them: an experiment's sweep keeps its units in runs/ and, run here
	// one after another, writes no logs.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sweep: cannot create the sweep directory: %w", err)
	}
	if source != nil {
		if err := runfile.WriteAtomic(filepath.Join(dir, FileSource), source, runfile.Shared); err != nil {
			return err
		}
	}
	m.Version = manifestVersion
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	return m.write(dir)
}

// sameUnits reports whether two unit lists run the same runs. The
// device is not compared: the same runs on another device are the same
// sweep (SetDevice).
func sameUnits(a, b []Unit) bool {
	return slices.EqualFunc(a, b, func(x, y Unit) bool {
		return x.Name == y.Name && x.Dir == y.Dir && x.Preset == y.Preset && x.Variant == y.Variant &&
			x.Seed == y.Seed && x.Record == y.Record && slices.Equal(x.Set, y.Set) && x.Minutes == y.Minutes
	})
}

// Start is one row of a unit's starts.jsonl: a worker took the unit up.
type Start struct {
	Time    time.Time `json:"time"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Job     string    `json:"slurm_job,omitempty"`
	Restart int       `json:"slurm_restart,omitempty"` // SLURM_RESTART_COUNT: times Slurm requeued the job
	Iter    int       `json:"iter"`                    // the checkpoint's iteration it started from
	// Ends says the worker records its end in ends.jsonl, so a start
	// without an End is a worker that died. Older builds recorded no
	// ends: their starts say nothing either way.
	Ends bool `json:"ends,omitempty"`
	// Retry marks a row that is no start: someone asked for the unit to
	// be tried again after a failure (sweep resume --retry-failed), so
	// stalls and deaths are counted afresh from here.
	Retry bool `json:"retry,omitempty"`
}

// End is one row of a unit's ends.jsonl: a worker let the unit go in
// order — finished, stopped with a checkpoint, or failed with failed.json.
type End struct {
	Start int       `json:"start"` // the row of starts.jsonl it ends, from 0
	Time  time.Time `json:"time"`
	// How is runstate.Finished, Stopped or Failed, or "error" (it could
	// not go on); files written before say "done" for finished.
	How string `json:"how"`
}

// Submission is one row of jobs.jsonl: one sbatch call.
type Submission struct {
	Job     string    `json:"job"`     // the array job id
	Indices []int     `json:"indices"` // the unit indices it runs
	Time    time.Time `json:"time"`
}

// Submissions reads dir's jobs.jsonl.
func Submissions(dir string) ([]Submission, error) {
	return runfile.Read[Submission](filepath.Join(dir, FileJobs))
}

// SetBinary records binary as the mkbench executable the sweep's workers
// run, so that a sweep resumed by a newer (or moved) build runs that one.
func SetBinary(dir, binary string) error {
	m, err := Load(dir)
	if err != nil || m.Binary == binary {
		return err
	}
	m.Binary = binary
	return m.write(dir)
}

// SetDevice records device as every unit's (Unit.Device), so that the
// workers started from now on run there: a sweep run again, or resumed,
// with another --device.
func SetDevice(dir, device string) error {
	m, err := Load(dir)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(m.Units, func(u Unit) bool { return u.Device != device }) {
		return nil
	}
	WithDevice(m.Units, device)
	return m.write(dir)
}

// write writes m as dir's sweep.json.
func (m Manifest) write(dir string) error {
	m.DataBytes, m.BinaryBytes = runfile.PathBytes(m.Data), runfile.PathBytes(m.Binary)
	return runfile.WriteJSON(filepath.Join(dir, FileManifest), m, runfile.Shared)
}
