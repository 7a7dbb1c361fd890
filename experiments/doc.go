// Package experiments runs the paper's experiment suites on top of
// engine.Run and renders their tables and figures:
//
//   - ablation: one run per variant (rbf, rff, vrf, vrf+ctx, metakernel,
//     optionally vrf+cnf) of a preset on the same seed and task stream —
//     the paper's ablation table;
//   - versatility: one trained model (or an existing run) evaluated on
//     other ways and shots — the paper's versatility figure;
//   - efficiency: a trained model per number of bases D, RFF against
//     MetaKernel — the paper's efficiency figure;
//   - shots: a run per variant and shot count — the paper's regression
//     comparison, with the MAML baseline (maml*.go) through the Baseline
//     hook.
//
// A Runner plans the runs of an experiment, keeps each as an ordinary run
// directory under DIR/runs, and writes results.json, results.csv,
// results.md and figures/ (PNG and SVG, drawn with gonum.org/v1/plot).
// Every point records its metric, mean, 95% interval, per-seed values,
// training time and run directory; several seeds give the mean and the
// spread across seeds. An interrupted experiment resumes where it
// stopped: finished runs are reused and an interrupted run continues from
// its checkpoint. Report redraws everything from saved results.
//
// Like engine, the package never imports UI packages and never prints:
// progress goes to a callback on the caller's goroutine.
package experiments
