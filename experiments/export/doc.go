// Package export writes the logs of runs in formats other tools read:
// one tidy table of every metric (CSV or JSON, the columns run, iter,
// metric, value) and TensorBoard event files rebuilt from a run's
// metrics.jsonl, val.jsonl and checkpoints. `mkbench export` is built on
// it: the command parses its flags and prints; the finding, reading and
// writing are here.
//
// Runs finds the runs of a directory (a run, a sweep, an experiment, any
// folder of runs); WriteTidy writes their table a run at a time, so a
// large sweep is never held whole; TensorBoard writes one run's event
// file under the run's lock and says what it did, or why it did nothing.
// Damaged log lines are left out and told to the caller as notes, never
// printed here.
package export
