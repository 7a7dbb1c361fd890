// Package sweep runs grids of runs — a sweep — on this machine or on a
// Slurm cluster, and survives what a cluster does to jobs.
//
// A sweep file (YAML; ParseFile) names presets, variants, seeds and a grid
// of setting overrides; File.Units lists every combination as a Unit with
// a stable name, which ParseFile checks is a directory name of its own
// that a file system takes (UnitName, MaxUnitName). A sweep directory
// holds sweep.json (the Manifest: every unit's settings, so a worker on
// any node needs nothing else, the device each unit runs on included:
// the file's device:, which is no setting and so in no config.json) and
// one ordinary run directory per unit under units/. On Slurm a unit on a
// device asks for a GPU (--gres; Slurm.Gres).
//
// A Worker runs one unit: it takes the unit directory's lock (waiting for
// a live owner, taking a dead one's over), then trains it, resumes its
// checkpoint, or does nothing when it is finished; a failure a retry
// cannot fix is written to the unit's failed.json and not retried until
// sweep resume --retry-failed (Retry). Each worker records its start
// (starts.jsonl) and its orderly end (ends.jsonl), so a worker that dies
// without a word — a signal, the out-of-memory killer, a crash, a node
// that stops — leaves a unit that is failed with that reason, not pending;
// it is continued from its checkpoint by a requeue or a resume, and failed
// for good after maxDeaths deaths in a row. Two engines start workers:
// Local runs K at a time here as processes, which end with it; the
// slurm engine (Submit) writes a job array script whose tasks run
// `mkbench sweep work DIR --index I` with --requeue, so a task killed by a
// node failure or a preemption continues from its checkpoint, with the
// same metrics.jsonl as an uninterrupted run.
//
// ReadStatus reads each unit's state from its files alone (AddQueue adds
// Slurm's), and Report writes the results over seeds. An experiment's
// training runs become units of a sweep in the experiment's own directory
// (ExperimentUnits), so experiments run on either engine too.
package sweep
