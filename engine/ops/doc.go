// Package ops is the numerics layer of the engine: the kernels of the
// MetaKernel model on plain float64 slices, and gorgonia ops that run them
// inside a graph, each with a hand-written gradient that a finite-difference
// test checks.
//
// Files go by piece and responsibility: a piece's spec (flow_spec.go,
// conv_spec.go, resnet_spec.go), its kernel (flow_kernel.go and
// flow_backward.go, conv.go, conv_wino.go and conv_math.go, resnet.go,
// resnet_backward.go, resnet_conv.go and resnet_wino.go with batchnorm.go,
// krr.go, lstm.go, rff.go, rbf.go, attention.go), its gorgonia ops
// (flow_op.go, conv_op.go, resnet_op.go, krr_op.go, lstm_op.go; the smaller
// pieces keep kernel and op in one file), and its float64 reference in the tests
// (flow_ref_test.go, conv_ref_test.go, resnet_ref_test.go). The flow and
// the convolutions share their float32/float64 helpers (float.go).
// The small ops of the ELBO and the graph plumbing (dense.go, gauss.go,
// classify.go, bmm.go, shapeops.go) are pairs of forward and backward
// kernels adapted by kernelOp (kernelop.go).
//
// Every op embeds opBase (op.go), which supplies the parts of gorgonia's Op
// interface that are the same for all of them and gives each instance its
// own identity: gorgonia merges nodes whose ops hash equal, and these ops
// keep per-instance caches. An op and its gradient ops share those caches
// (factors, weights, forward intermediates), so a graph must be run by one
// machine at a time, as gorgonia requires anyway. Ops write their outputs
// into storage they own (ownedTensor) rather than allocating each step, so
// a value read out of a run is overwritten by the next one. How ops read
// their inputs and choose where to write is in values.go. The feature
// extractors' ops can skip an evaluation pass whose inputs are the last
// pass's bit for bit (memo.go), which evaluations averaging several draws
// of ω turn on.
//
// Work is spread over goroutines by a Pool (pool.go), one per model: its
// For loops over tasks, and its teams run the flow's and the convolution's
// chunks without allocating. Each index runs wholly on one goroutine and
// kernels split their work at fixed points, so results are bit-identical
// whatever the number of cores. While a model runs its training step as
// concurrent stages (Pool.Stages), that model's ops keep to one goroutine
// each.
//
// The coupling flow and the convolutions, the largest costs, compute in
// float32 with the AVX2/FMA (or, with the same bytes, AVX-512) kernels of
// internal/sgemm; their float64 instantiation of the same code
// (UseFloat64) is what the finite-difference tests check. Everything else computes in float64, its matrix products on
// our dgemm, directly or through gonum's and gorgonia's BLAS once
// UseFastBLAS has installed it there.
//
// With an OpenCL device on its pool (Pool.SetDevice, device.go), a
// ConvKernel or ResNetKernel made from that pool runs its float32 passes
// there (conv_dev.go, resnet_dev.go and resnet_dev_backward.go, with the
// OpenCL C of cl/*.cl): channels-last im2col and CLBlast's sgemm, dropout
// from the CPU's own counter-based masks, max-pools with their argmax,
// batch norm whose statistics the host combines from per-image device sums
// with the CPU's bnState code. A FlowKernel made from such a pool runs its
// passes there too (flow_dev.go, cl/flow.cl): all tasks side by side in
// CLBlast products, each task's weight gradients summed in task order.
// Weights go up and gradients come down once a pass, unless a
// ResidentStore (resident_dev.go, cl/adam.cl) holds the network's
// parameters — a ConvResident a conv network's, a ResNetResident
// ResNet-18's convolution weights: its training ops then read the float32
// weights it makes from its masters and leave their weight gradients on
// the device for its fixed-order square norm and its Adam or SGD kernel
// (the host's order of operations: with double masters, the host's
// bits); an evaluation's ops read the same weights, which go up only when
// the host's values they are given differ from the ones they were made
// from. Activations stay on
// the device, in slots of the pool's device arena (device_arena.go), held
// from Forward to the end of Backward and grown, never shrunk, so graphs
// of new shapes (Meta-Dataset's varying episodes) reuse them; device_mem.go
// gives a pass's bytes for the engine's memory estimate. Results agree
// with the CPU within tolerances (the device
// sums in another order) and are the same bytes run after run on one
// device: every reduction has a fixed order, none uses atomics.
package ops
