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
//     comparison, with the MAML baseline through the BaselineFunc hook.
//
// A Runner plans the runs of an experiment, keeps each as an ordinary run
// directory under DIR/runs, and writes results.json, results.csv,
// results.md and figures/ (PNG and SVG, drawn with gonum.org/v1/plot).
// Every point records its metric, mean, 95% interval, per-seed values,
// training time and run directory; several seeds give the mean and the
// Student-t interval across seeds (SeedStats). An interrupted experiment
// resumes where it stopped: finished runs are reused, an interrupted run
// continues from its checkpoint and finished versatility cells are kept
// in evals.jsonl. Report redraws everything from saved results.
//
// One experiment directory, one writer: Run and Report hold the
// directory's lock (runfile.Lock, DIR/.lock) for as long as they work, so
// a second Runner or a Report on a running experiment fails at once with
// "DIR is in use by pid N on HOST since T" and changes nothing; the lock
// of a killed owner is taken over. Each run's own lock (taken by
// engine.Run) is in the run's directory, a different file.
//
// The files, by responsibility:
//
//   - options.go: Options, their parsing and Normalize (defaults, checks);
//   - runner.go: Runner, Progress and the experiment's manifest;
//   - plan.go: the jobs of an experiment, each config built by
//     presets.Spec.Config from preset, variant and overrides;
//   - run.go: running the jobs (train, reuse, resume, baselines) and
//     progress reports;
//   - versatility.go: the versatility grid, its class and image limits and
//     the evaluation of its cells;
//   - results.go: Results, points and their aggregation over seeds, and
//     results.json; seedstats.go: SeedStats; tables.go: results.csv and
//     results.md with the paper's tables and claims;
//   - figures.go: which figures an experiment draws; figures_curves.go,
//     figures_fits.go, figures_omega.go, figures_settings.go and
//     figures_heatmap.go: one kind of figure each; plotkit.go: figure
//     layout, colours and axes;
//   - display.go: fits.json and omega.json, what the regression figures
//     draw, computed once per run; files.go: reading and writing JSON
//     (atomic writes through internal/runfile);
//   - baseline.go: the BaselineFunc hook and DefaultBaselines;
//     maml.go, maml_net.go, maml_file.go and maml_baseline.go: the MAML
//     baseline (Finn et al. 2017) — training, its network and
//     derivatives, maml.json, and its BaselineFunc.
//
// Like engine, the package never imports UI packages and never prints:
// progress goes to a callback on the caller's goroutine.
package experiments
