package runstate

import (
	"fmt"
	"slices"
)

// State is a run's state: one of the constants below.
type State string

// The constants are untyped so that the string fields of the --json
// outputs (runs.Run.State, sweep.UnitStatus.State) and State values both
// take them.
const (
	// Finished: summary.json is written; the run is over.
	Finished = "finished"
	// Running: a live process holds the run's lock (or it checkpointed a
	// moment ago).
	Running = "running"
	// Failed: failed.json says why; resumable unless it says the failure
	// is permanent.
	Failed = "failed"
	// Stopped: stopped before its end with a checkpoint — by q, s, a
	// signal or `mkbench sweep cancel` — and resumable from it.
	Stopped = "stopped"
	// Pending: planned and not begun (a sweep's unit, an experiment's
	// point), or a sweep's unit stopped and waiting to be continued.
	Pending = "pending"

	// Starting: the workbench has started the run; no iteration yet.
	Starting = "starting"
	// Paused: the workbench holds the run between iterations.
	Paused = "paused"
	// Stopping: asked to stop, it is writing its checkpoint.
	Stopping = "stopping"
	// Evaluating: past its last iteration (or asked to), it evaluates.
	Evaluating = "evaluating"
	// Off: a dashboard variant not toggled on.
	Off = "off"
)

// All are the states, persisted ones first.
var All = []State{Finished, Running, Failed, Stopped, Pending, Starting, Paused, Stopping, Evaluating, Off}

// older are the words earlier versions wrote for a state.
var older = map[string]State{
	"done":        Finished, // sweep status, the workbench
	"interrupted": Stopped,  // mkbench runs, the experiments screen
	"cancelled":   Stopped,
}

// Parse reads a state's word, or one an earlier version wrote for it.
func Parse(word string) (State, error) {
	if s := State(word); slices.Contains(All, s) {
		return s, nil
	}
	if s, ok := older[word]; ok {
		return s, nil
	}
	return "", fmt.Errorf("%q is no run state (one of finished, running, failed, stopped, pending)", word)
}

// Words are s's word and those earlier versions wrote for it, so a filter
// typed with an old word still finds the state.
func (s State) Words() []string {
	words := []string{string(s)}
	for w, t := range older {
		if t == s {
			words = append(words, w)
		}
	}
	slices.Sort(words[1:])
	return words
}

// Active reports whether a run in state s is working: training,
// starting, paused, stopping or evaluating.
func (s State) Active() bool {
	switch s {
	case Starting, Running, Paused, Stopping, Evaluating:
		return true
	}
	return false
}

// UnmarshalText reads s as Parse does: old words read as today's.
func (s *State) UnmarshalText(b []byte) error {
	t, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = t
	return nil
}
