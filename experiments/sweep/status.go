package sweep

import (
	"fmt"
	"path/filepath"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/runstate"
)

// Unit states, as status shows them: the words of internal/runstate,
// which runs and the workbench use too. (Before, a finished unit was
// "done".)
const (
	StateDone    = runstate.Finished // summary.json is written
	StateRunning = runstate.Running  // a live worker holds the unit's lock
	StatePending = runstate.Pending  // not started, or stopped and waiting to be continued
	StateFailed  = runstate.Failed   // failed.json says why
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
	// Permanent: the failure is one a retry cannot fix (failed.json
	// says so), and sweep resume leaves it unless --retry-failed.
	Permanent bool `json:"permanent,omitempty"`
	// Died: the unit failed because its last worker died without a word
	// (starts.jsonl has its start, ends.jsonl no end): a signal, the
	// out-of-memory killer, a crash, or its machine stopping. Deaths is
	// how many of its latest starts in a row ended so.
	Died   bool `json:"died,omitempty"`
	Deaths int  `json:"deaths,omitempty"`
	// Starts is how many times a worker took the unit up.
	Starts int `json:"starts"`
	// Ran is the device the run finished on (summary.json's device,
	// engine.DeviceLabel's form) once done; before, the unit's Device
	// says what its worker was asked for.
	Ran string `json:"ran_on,omitempty"`
	// TrainSeconds is the run's training time once done.
	TrainSeconds float64 `json:"train_seconds,omitempty"`
	// Slurm is the state Slurm gives the unit's array task ("RUNNING",
	// "PENDING", …), when the sweep was submitted and the task is known.
	Slurm string `json:"slurm,omitempty"`
	Node  string `json:"node,omitempty"`
	// Queued: Slurm still holds the unit's task (QueueTask.Active).
	Queued bool `json:"queued,omitempty"`
}

// RanOn is the device a finished run ran on, as summary.json says:
// "cpu" for a summary written before devices, all of which ran there.
// The label is made printable, summary.json being a file someone may
// hand over.
func RanOn(sum engine.Summary) string {
	if sum.Device == "" {
		return engine.CPU
	}
	return runfile.Printable(sum.Device)
}

// DeviceText is the unit's device as its row shows it: the one it
// finished on, else the one its worker was asked for, "" when neither is
// known (a sweep made before devices).
func (u UnitStatus) DeviceText() string {
	if u.Ran != "" {
		return u.Ran
	}
	return u.Device
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
	h := readHistory(dir)
	us.Starts = h.starts
	switch st := engine.ReadRunState(dir); {
	case st.Summary != nil:
		sum := st.Summary
		us.State, us.Eval, us.Iter, us.Iters, us.TrainSeconds = StateDone, sum.Eval, sum.Iters, sum.Iters, sum.TrainSeconds
		us.Ran = RanOn(*sum)
	case st.Held:
		// A live worker holds it, here or on another node: whatever its
		// history, it is running.
		us.State, us.Owner = StateRunning, &st.Owner
	case st.Failure != nil:
		us.State, us.Error, us.Permanent = StateFailed, st.Failure.Error, st.Failure.Permanent
		us.Died, us.Deaths = h.died != nil, h.deaths
	case h.died != nil:
		us.State, us.Died, us.Deaths = StateFailed, true, h.deaths
		us.Error = diedReason(*h.died, us.Iter, "")
	}
	return us
}

// diedReason says that the worker of start s died at iteration iter; how
// is what killed it when known ("signal: killed"), "" when not.
func diedReason(s Start, iter int, how string) string {
	who := fmt.Sprintf("worker pid %d on %s", s.PID, s.Host)
	if s.Job != "" {
		who += " (Slurm job " + s.Job + ")"
	}
	if how == "" {
		how = "without a word: killed by a signal (the out-of-memory killer sends SIGKILL), crashed, or its machine stopped; see its log"
	}
	return fmt.Sprintf("%s died (%s) at iteration %d", who, how, iter)
}

// history is what a unit's starts.jsonl and ends.jsonl say of its workers.
type history struct {
	starts int    // workers that took the unit up
	last   int    // the row of starts.jsonl of the latest start; -1: none
	died   *Start // the latest start, when its worker died
	// deaths is how many of the latest starts in a row, since the last
	// retry row, died.
	deaths int
	// stalled is how many of the latest starts in a row, since the last
	// retry row, began at the latest start's iteration.
	stalled int
}

// readHistory reads a unit's history of workers. A worker that holds the
// unit has started and not ended: the caller decides by the lock first.
func readHistory(dir string) history {
	h := history{last: -1}
	starts, err := runfile.Read[Start](filepath.Join(dir, FileStarts))
	if err != nil {
		return h
	}
	ended := map[int]bool{}
	if ends, err := runfile.Read[End](filepath.Join(dir, FileEnds)); err == nil {
		for _, e := range ends {
			ended[e.Start] = true
		}
	}
	counting, stalling := true, true
	for i := len(starts) - 1; i >= 0; i-- {
		s := starts[i]
		if s.Retry {
			counting, stalling = false, false
			continue
		}
		h.starts++
		if h.last < 0 {
			h.last = i
			if s.Ends && !ended[i] {
				h.died = &starts[i]
			}
		}
		if counting && s.Ends && !ended[i] {
			h.deaths++
		} else {
			counting = false
		}
		if stalling && s.Iter == starts[h.last].Iter {
			h.stalled++
		} else {
			stalling = false
		}
	}
	return h
}
