// Package runstate is the one vocabulary of a run's state: the words
// `mkbench runs`, `mkbench sweep status`, their --json outputs and every
// screen of the workbench use for the same state. A leaf, so the
// experiments' packages and the workbench can all import it.
//
// Persisted and observed states are what a run's directory says (read by
// experiments/runs and experiments/sweep): Finished, Running, Failed,
// Stopped, and Pending for a planned run not begun. The workbench adds the
// transient states of a run it drives: Starting, Paused, Stopping,
// Evaluating, and Off for a variant not toggled on.
//
// Older mkbench spelled some of these differently ("done", "interrupted",
// "cancelled"); Parse and State's UnmarshalText read the old words, so
// files and outputs written before still read.
package runstate
