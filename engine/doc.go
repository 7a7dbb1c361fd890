// Package engine implements MetaKernel (Du et al., "MetaKernel: Learning
// Variational Random Features with Limited Labels") on gorgonia: kernel ridge
// regression base-learners over random Fourier features whose bases ω are
// inferred per task, optionally in the context of an LSTM over the tasks of a
// meta-batch and enriched by conditional affine-coupling flows.
//
// The hot pieces are custom gorgonia ops with hand-written, finite-difference
// checked gradients (batched Cholesky KRR solve, LSTM sequence, coupling
// flow, random Fourier features, Laplace attention). They take and return
// float64 and parallelize over tasks with fixed chunking, so results are
// bit-identical however many cores run them. The coupling flow, by far the
// largest cost, computes in float32 with an AVX2/FMA GEMM of our own
// (internal/sgemm); its float64 instantiation of the same code is what the
// finite-difference tests check. The rest of the model is ordinary gorgonia
// graph code built once per shape, with our own ops where gorgonia's cost
// more than the arithmetic (Dense, BatchedMatMul, Rows, ConcatCols, the
// Gaussian terms of the ELBO).
//
// gorgonia's tape machine clears its registers on every Reset, so an op's
// Do runs each step; our ops write into storage they own (ownedTensor)
// instead of allocating, which makes a value of one run dead by the next:
// callers copy what they read out of a run before running it again.
//
// A training step is staged (staged.go): the meta-batch is split into two
// task ranges whose graphs run concurrently, with the context LSTM run
// between them on our own kernels, while the next step's tasks and noise
// are drawn on whatever core is free.
//
// engine never imports UI packages: a UI watches a run through the Observer
// it passes to Run.
package engine
