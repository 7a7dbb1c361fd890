// Package sgemm is a small serial float32 matrix multiply for the engine's
// hot kernels: C = alpha·op(A)·op(B) + beta·C on row-major matrices, with an
// optional fused epilogue (row bias, ReLU, zero mask), plus the element-wise
// kernels the coupling flow runs between its products (fast float32 tanh
// and exp, the affine-coupling step and its gradient, row sums, transposes,
// float64 conversions).
//
// The products that occur in the engine are small (every dimension among
// 20…128), so the design favours low fixed costs over large-matrix
// blocking. A is never packed: the micro-kernel broadcasts its elements
// from wherever they are, given a row and a k stride. B is read in place
// when stored as is and packed (8×8 transposes) when stored transposed,
// into buffers owned by a Workspace that are reused from call to call. The
// micro-kernel keeps a tile of up to 6×16 results in YMM registers and runs
// down all row tiles of a column panel in one call; it is written in Go
// assembly for AVX2+FMA. CPUs without those, other architectures and builds
// with the purego tag use portable Go kernels running the same blocking
// (about 20 times slower).
//
// Every routine is serial and sums in an order fixed by the shapes alone, so
// results are bit-for-bit reproducible for the same inputs on the same
// machine, whatever GOMAXPROCS is; callers parallelize over independent
// products themselves. The assembly and portable kernels round differently
// (FMA), so results differ between the two by float32 rounding.
//
// The blocking driver, the portable kernels and the product tests live in
// package gemmcore (and gemmcore/gemmtest), shared with dgemm: one copy of
// the Go code, instantiated for float32 and float64. This package keeps its
// assembly, the choice of kernels and the element-wise routines.
package sgemm
