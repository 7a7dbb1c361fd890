// Package engine implements MetaKernel (Du et al., "MetaKernel: Learning
// Variational Random Features with Limited Labels") on gorgonia: kernel ridge
// regression base-learners over random Fourier features whose bases ω are
// inferred per task, optionally in the context of an LSTM over the tasks of a
// meta-batch and enriched by conditional affine-coupling flows.
//
// The engine is built in layers, each a package that imports only the ones
// below it:
//
//   - the leaf packages every layer of mkbench shares, under internal/:
//     internal/task (the plain types task families and the model share: a
//     meta-batch, the sources that draw one, seeded random streams; data
//     loaders depend on it alone) and internal/runfile (atomic writes,
//     JSON-lines logs and bounded, link-refusing reads of a run directory).
//   - engine/internal/dgemm, sgemm, gemmcore: our BLAS-level kernels in
//     float64 and float32 (AVX2/FMA assembly, sgemm also AVX-512, with
//     portable twins), and engine/internal/vecmath, the other four-lane
//     kernels (Adam, Sincos, the step's noise).
//   - engine/ops: the numerics of the model as plain kernels on float64
//     slices and as gorgonia ops with hand-written, finite-difference checked
//     gradients (coupling flow, convolutional ψ, ResNet-18 ψ with batch
//     norm, batched Cholesky KRR solve, LSTM, random Fourier features, RBF
//     kernel, Laplace attention, dense layers and the Gaussian terms of the
//     ELBO), and ops.Pool, the one place where work is spread over
//     goroutines.
//   - engine (this package): the model and its training run.
//
// In this package, config.go describes a model (Config, the paper's
// variants), params.go creates its parameters, graph_build.go builds its
// gorgonia graphs (one per shape: the whole model for evaluation and
// display, or one stage of a training step) and graph.go binds, feeds and
// reads them, model.go holds a Model (its parameters, carried
// context, graphs and per-model ops.Pool) and runs a graph, staged.go is the
// training step, mlp_summary.go its graph-free task summaries, optim.go the
// optimizer, eval.go evaluation and the display snapshot, modelfile.go
// the compact float32 model files that ship trained models, and device.go
// the OpenCL device of the process (UseDevice), on which the models built
// after it run their image backbones: not a setting of any model, so
// configs and parameters are the same on either device, while
// checkpoints and summary.json record which one computed them;
// resident.go keeps a conv backbone's parameters and the optimizer's
// moments on that device while the model trains, bringing the host's copy
// down (Model.SyncHost) only where it is read.
//
// Episodes of varying shape (Config.Varying, a task.Varying source:
// Meta-Dataset's sampler) train one per step, each through graphs built
// for its shape (shape.Uneven); the last such graph is kept, the others
// released. Config.TrainWay trains at a higher way than the model is
// tested on, Config.TrainShot at another shot; the training graphs carry
// their way (shape.Way) and their support rows (shape.NS), from which the
// prototypes take their shot.
//
// Run trains with a Loop (loop.go): the loop runs the steps and keeps the
// iteration count and the training time, and everything else a run does is
// a hook attached to it for that run only: the control commands a UI sends
// (control.go), the time budget and the step itself (run.go), metrics.jsonl
// rows (hooks_metrics.go), validation and best.gob (hooks_val.go), observer
// snapshots (hooks_report.go), periodic and final checkpoints
// (hooks_checkpoint.go, checkpoint.go), TensorBoard event files of the
// scalars and ω histograms (hooks_events.go, internal/tbevents), and the
// final evaluation and summary.json (run_eval.go). runfiles.go holds the run directory's file
// names and formats and what counts as the engine's own file (OwnFile): the
// engine removes or moves nothing else, and a run's record is moved aside
// (DIR/stopped-TIME), never deleted, to start over; runremove.go deletes a
// run on a user's request, its own files only.
//
// A training step is staged (staged.go): the meta-batch is split into two
// task ranges whose graphs run concurrently as the stages of the model's
// pool, with the context LSTM run between them on ops' kernels, while the
// next step's tasks and noise are drawn on whatever core is free. While the
// stages run, the model's ops stay on one goroutine each; other models in
// the process are not affected.
//
// Results do not depend on the number of cores: every kernel splits its
// work at fixed points and sums in a fixed order, and the staged step's
// ranges are fixed (taskStages), so equal seeds give equal bytes.
//
// gorgonia's tape machine clears its registers on every Reset, so an op's
// Do runs each step; the ops write into storage they own instead of
// allocating, which makes a value of one run dead by the next: callers copy
// what they read out of a run before running it again.
//
// engine never imports UI packages: a UI watches a run through the Observer
// it passes to Run.
package engine
