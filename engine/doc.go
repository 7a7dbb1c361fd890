// Package engine implements MetaKernel (Du et al., "MetaKernel: Learning
// Variational Random Features with Limited Labels") on gorgonia: kernel ridge
// regression base-learners over random Fourier features whose bases ω are
// inferred per task, optionally in the context of an LSTM over the tasks of a
// meta-batch and enriched by conditional affine-coupling flows.
//
// The hot pieces are custom gorgonia ops with hand-written, finite-difference
// checked gradients (batched Cholesky KRR solve, LSTM sequence, coupling
// flow, random Fourier features, Laplace attention). They work in float64,
// parallelize over tasks with fixed chunking so that results are
// bit-identical however many cores run them, and the rest of the model is
// ordinary gorgonia graph code built once per shape.
//
// engine never imports UI packages: a UI watches a run through the Observer
// it passes to Run.
package engine
