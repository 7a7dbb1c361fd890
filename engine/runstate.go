package engine

import "github.com/mkbench/mkbench/internal/runfile"

// RunState is what a run directory's own files say of its run. They
// decide in this order: finished (summary.json), running (a live process
// holds the lock), failed (failed.json); none of these is a run stopped
// or not started. The sweep's unit status and the runs browser both read
// a run this way; each adds what it knows besides (a sweep's queue, a
// remote node's recent checkpoint).
type RunState struct {
	Summary    *Summary // the run finished
	SummaryErr error    // summary.json is there but damaged
	// Held says a live process holds the run's lock; Owner is that
	// process, or the last one that held it.
	Held    bool
	Owner   runfile.Owner
	Failure *Failure
}

// ReadRunState reads run directory dir's state, reading no further than
// the first file that decides it.
func ReadRunState(dir string) RunState {
	var st RunState
	st.Summary, st.SummaryErr = ReadSummary(dir)
	if st.Summary != nil {
		return st
	}
	held, owner, err := runfile.Held(dir)
	st.Held, st.Owner = err == nil && held, owner
	if st.Held {
		return st
	}
	if f, ok := ReadFailure(dir); ok {
		st.Failure = &f
	}
	return st
}
