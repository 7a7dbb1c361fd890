package sweep

import (
	"path/filepath"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/runfile"
)

// Unit states, as status shows them.
const (
	StateDone    = "done"    // summary.json is written
	StateRunning = "running" // a live worker holds the unit's lock
	StatePending = "pending" // not started, or stopped and waiting to be continued
	StateFailed  = "failed"  // failed.json says why
)

// UnitStatus is what a unit's directory says of it.
type UnitStatus struct {
	Unit
	State string `json:"state"`
	Iter  int    `json:"iter"`  // latest logged iteration
	Iters int    `json:"iters"` // the run's total
	// Loss is the latest logged training loss; Val the latest validation
	// accuracy (classification), Eval the final metric once done.
	Loss  *float64           `json:"loss,omitempty"`
	Val   *float64           `json:"val,omitempty"`
	Eval  *engine.EvalResult `json:"eval,omitempty"`
	Owner *runfile.Owner     `json:"owner,omitempty"` // while running
	Error string             `json:"error,omitempty"` // when failed
	// Starts is how many times a worker took the unit up.
	Starts int `json:"starts"`
	// TrainSeconds is the run's training time once done.
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	// Slurm is the state Slurm gives the unit's array task ("RUNNING",
	// "PENDING", …), when the sweep was submitted and the task is known.
	Slurm string `json:"slurm,omitempty"`
	Node  string `json:"node,omitempty"`
	// Queued: Slurm still holds the unit's task (QueueTask.Active).
	Queued bool `json:"queued,omitempty"`
}

// Status is a sweep's state: each unit's, and the counts.
type Status struct {
	Dir       string         `json:"dir"`
	Units     []UnitStatus   `json:"units"`
	Counts    map[string]int `json:"counts"`
	Jobs      []Submission   `json:"jobs,omitempty"`
	Cancelled bool           `json:"cancelled,omitempty"`
	// SlurmError says why the Slurm states are missing, when the sweep
	// was submitted but squeue could not be asked.
	SlurmError string `json:"slurm_error,omitempty"`
}

// Finished reports whether no unit is pending or running.
func (s Status) Finished() bool { return s.Counts[StatePending] == 0 && s.Counts[StateRunning] == 0 }

// ReadStatus reads the state of every unit of the sweep in dir from the
// units' directories alone, so it works the same wherever the units run
// and whoever reads it. It changes nothing.
func ReadStatus(dir string) (Status, error) {
	m, err := Load(dir)
	if err != nil {
		return Status{}, err
	}
	st := Status{Dir: dir, Counts: map[string]int{}, Cancelled: exists(filepath.Join(dir, FileCancelled))}
	if st.Jobs, err = Submissions(dir); err != nil {
		return st, err
	}
	for _, u := range m.Units {
		us := UnitOf(filepath.Join(dir, u.Dir), u)
		st.Counts[us.State]++
		st.Units = append(st.Units, us)
	}
	return st, nil
}

// UnitOf reads one unit's state from its run directory.
func UnitOf(dir string, u Unit) UnitStatus {
	us := UnitStatus{Unit: u, State: StatePending}
	if rc, err := engine.ReadRunConfig(dir); err == nil {
		us.Iters = rc.Config.Iters
	} else if _, cfg, err := u.Spec().Config(); err == nil {
		us.Iters = cfg.Iters
	}
	var row engine.MetricsRow
	if runfile.LastRow(filepath.Join(dir, engine.FileMetrics), &row) {
		us.Iter, us.Loss = row.Iter, &row.Loss
	}
	var val engine.ValRow
	if runfile.LastRow(filepath.Join(dir, engine.FileVal), &val) {
		us.Val = &val.Mean
	}
	if starts, err := runfile.Read[Start](filepath.Join(dir, FileStarts)); err == nil {
		us.Starts = len(starts)
	}
	switch st := engine.ReadRunState(dir); {
	case st.Summary != nil:
		sum := st.Summary
		us.State, us.Eval, us.Iter, us.Iters, us.TrainSeconds = StateDone, sum.Eval, sum.Iters, sum.Iters, sum.TrainSeconds
	case st.Held:
		us.State, us.Owner = StateRunning, &st.Owner
	case st.Failure != nil:
		us.State, us.Error = StateFailed, st.Failure.Error
	}
	return us
}
