package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/runstate"
	"github.com/mkbench/mkbench/presets/models"
)

// Group kinds: what a run directory belongs to.
const (
	KindRun        = ""           // a run of its own
	KindExperiment = "experiment" // a run of mkbench experiment
	KindSweep      = "sweep"      // a unit of mkbench sweep
	KindModel      = "model"      // a shipped model written out as a run
)

// Entry is a run directory as Find finds it, before its files are read.
type Entry struct {
	Dir string `json:"dir"` // the path as found (under the root given)
	Rel string `json:"rel"` // relative to the root
	// Group is the directory of the experiment or sweep the run belongs
	// to, relative to the root ("" for a run of its own); Kind says which.
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
}

// Run is what a run directory says of itself.
type Run struct {
	Entry
	Preset  string `json:"preset"`
	Variant string `json:"variant"`
	Seed    uint64 `json:"seed"`
	Iter    int    `json:"iter"`  // iterations done: the summary's, else the last logged
	Iters   int    `json:"iters"` // the run's total
	// State is runstate.Finished, Running (its lock is held, or it
	// checkpointed a moment ago), Failed or Stopped (before its end:
	// resumable from its checkpoint).
	State string `json:"state"`
	// Eval is the final evaluation once finished; before that the latest
	// validation, with Val set.
	Eval *engine.EvalResult `json:"eval,omitempty"`
	Val  bool               `json:"val,omitempty"`
	// TrainSeconds is the training time: the summary's, else the latest
	// validation's (0 when unknown).
	TrainSeconds float64   `json:"train_seconds"`
	Modified     time.Time `json:"modified"` // the newest of its files: the age
	// Error says why a failed run failed, or why the run could not be
	// read (State is then "").
	Error string `json:"error,omitempty"`
	// Device is where the run ran: summary.json's device once finished;
	// before, a sweep unit's request (its sweep.json's), "" when not
	// known (a run of its own records its device when it finishes).
	Device string        `json:"device,omitempty"`
	Config engine.Config `json:"config"`
}

// maxDepth bounds the walk: runs sit at most a few levels below the root
// (root/exp/runs/run, root/sweep/units/unit); deeper is not ours.
const maxDepth = 6

// Find lists the run directories under root: directories holding a
// run's config.json or checkpoint.gob, in the order of the walk (by
// name). It does not descend into a run, nor into hidden directories,
// and reads no run's files.
func Find(root string) ([]Entry, error) {
	st, err := os.Stat(root)
	if err != nil || !st.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("runs: %s is not a folder (runs go to $MKBENCH_RUNS, or ./runs; give the folder that holds them)", root)
		}
		return nil, fmt.Errorf("runs: %w", err)
	}
	var out []Entry
	var walk func(dir string, depth int, g Entry) error
	walk = func(dir string, depth int, g Entry) error {
		list, err := os.ReadDir(dir)
		if err != nil {
			if dir == root {
				return fmt.Errorf("runs: %w", err)
			}
			return nil // unreadable below the root: not ours to list
		}
		names := map[string]bool{}
		for _, e := range list {
			names[e.Name()] = true
		}
		rel, _ := filepath.Rel(root, dir)
		if dir != root && (names[engine.FileConfig] || names[engine.FileCheckpoint]) {
			e := Entry{Dir: dir, Rel: rel, Group: g.Group, Kind: g.Kind}
			if names[models.FileModel] && e.Kind == KindRun {
				e.Kind = KindModel
			}
			out = append(out, e)
			return nil
		}
		switch {
		case names[experiments.FileExperiment]: // an experiment may run its runs as a sweep's units
			g = Entry{Group: rel, Kind: KindExperiment}
		case names[sweep.FileManifest]:
			g = Entry{Group: rel, Kind: KindSweep}
		}
		if depth >= maxDepth {
			return nil
		}
		for _, e := range list {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				if err := walk(filepath.Join(dir, e.Name()), depth+1, g); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 0, Entry{}); err != nil {
		return nil, err
	}
	return out, nil
}

// Read reads run e's files. A run that cannot be read is returned with
// Error set and no State, never an error: one damaged run does not hide
// the others. now is the time ages and the recent-checkpoint rule are
// measured from.
//
// A run file past its ceiling (runfile.ErrTooLarge: a 2 GB summary.json
// is not one mkbench wrote) makes the run unreadable, its Error the
// file's size and ceiling: it is refused by its size, never read, and
// is not passed over for what another file says.
func Read(e Entry, now time.Time) Run {
	r := Run{Entry: e}
	for _, f := range []string{engine.FileConfig, engine.FileMetrics, engine.FileVal, engine.FileCheckpoint, engine.FileSummary} {
		if st, err := os.Stat(filepath.Join(e.Dir, f)); err == nil && st.ModTime().After(r.Modified) {
			r.Modified = st.ModTime()
		}
	}
	rc, err := engine.ReadRunConfig(e.Dir)
	if tooLarge(&r, err) {
		return r
	}
	if err == nil {
		r.Preset, r.Config = rc.Preset, rc.Config
	} else if ck, cerr := engine.LoadCheckpoint(filepath.Join(e.Dir, engine.FileCheckpoint)); cerr == nil {
		r.Preset, r.Config = ck.Preset, ck.Config // a config.json lost: the checkpoint has it too
	} else {
		r.Error = firstLine(err.Error())
		return r
	}
	r.Variant, r.Seed, r.Iters = r.Config.Variant(), r.Config.Seed, r.Config.Iters
	var row engine.MetricsRow
	if runfile.LastRow(filepath.Join(e.Dir, engine.FileMetrics), &row) {
		r.Iter = row.Iter
	}
	var val engine.ValRow
	if runfile.LastRow(filepath.Join(e.Dir, engine.FileVal), &val) {
		r.Eval = &engine.EvalResult{Metric: val.Metric, Mean: val.Mean, CI95: val.CI95, Tasks: val.Tasks}
		r.Val, r.TrainSeconds = true, val.TrainSeconds
		r.Iter = max(r.Iter, val.Iter)
	}
	st := engine.ReadRunState(e.Dir)
	if tooLarge(&r, st.SummaryErr) {
		return r
	}
	if st.SummaryErr != nil {
		r.Error = firstLine(st.SummaryErr.Error())
	}
	switch {
	case st.Summary != nil:
		sum := st.Summary
		r.State, r.Iter, r.TrainSeconds = runstate.Finished, sum.Iters, sum.TrainSeconds
		r.Device = sweep.RanOn(*sum)
		if sum.Eval != nil {
			r.Eval, r.Val = sum.Eval, false
		}
	case st.Held || !localOwner(st.Owner) && recentCheckpoint(e.Dir, r.Config, now):
		r.State = runstate.Running
	case st.Failure != nil:
		r.State, r.Error = runstate.Failed, firstLine(st.Failure.Error)
	default:
		r.State = runstate.Stopped
	}
	return r
}

// tooLarge marks r unreadable when err is a run file's refusal for its
// size, with the refusal's own words (the file, its size, the ceiling).
func tooLarge(r *Run, err error) bool {
	var tl *runfile.TooLargeError
	if !errors.As(err, &tl) {
		return false
	}
	r.State, r.Error = "", tl.Error()
	return true
}

// localOwner reports whether the run's last lock owner ran on this host:
// then its free lock says for certain that nothing runs it.
func localOwner(o runfile.Owner) bool {
	host, err := os.Hostname()
	return err == nil && o.Host == host
}

// recentCheckpoint reports whether the run checkpointed so recently that
// it is still running, though its lock cannot be seen: a unit on another
// node of a cluster, whose lock the shared file system may not show here. Recent is within two
// of its checkpoint intervals and a minute.
func recentCheckpoint(dir string, c engine.Config, now time.Time) bool {
	if c.CheckpointSec <= 0 {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, engine.FileCheckpoint))
	if err != nil {
		return false
	}
	return now.Sub(st.ModTime()) < time.Duration(2*c.CheckpointSec+60)*time.Second
}

// Scan finds the runs under root and reads them all.
func Scan(root string) ([]Run, error) {
	found, err := Find(root)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]Run, len(found))
	for i, e := range found {
		out[i] = Read(e, now)
	}
	UnitDevices(root, out)
	return out, nil
}

// UnitDevices sets the Device of the runs in rs (found under root) that
// are a sweep's units and have not finished to the device their worker
// was asked for, from their sweep's sweep.json, read once a sweep.
func UnitDevices(root string, rs []Run) {
	requested := map[string]map[string]string{} // a group → its units' devices by directory
	for i, r := range rs {
		if r.Device != "" || r.Group == "" {
			continue
		}
		byDir, ok := requested[r.Group]
		if !ok {
			byDir = unitDevices(filepath.Join(root, r.Group))
			requested[r.Group] = byDir
		}
		if rel, err := filepath.Rel(r.Group, r.Rel); err == nil {
			rs[i].Device = byDir[rel]
		}
	}
}

// unitDevices are the devices the units of the sweep in dir were asked
// to run on (sweep.Unit.Device), by unit directory; none when dir holds
// no sweep.json (an experiment run here, not as a sweep) or one that
// cannot be read.
func unitDevices(dir string) map[string]string {
	m, err := sweep.Load(dir)
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(m.Units))
	for _, u := range m.Units {
		if u.Device != "" {
			out[u.Dir] = u.Device
		}
	}
	return out
}

// Groups are the groups of runs in the order they first appear, "" (the
// runs of their own) first.
func Groups(rs []Run) []string {
	var gs []string
	for _, r := range rs {
		if !slices.Contains(gs, r.Group) {
			gs = append(gs, r.Group)
		}
	}
	slices.SortStableFunc(gs, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "":
			return -1
		case b == "":
			return 1
		}
		return 0
	})
	return gs
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
