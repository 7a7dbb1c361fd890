// Package sgemm is a small serial float32 matrix multiply for the engine's
// hot kernels: C = alpha·op(A)·op(B) + beta·C on row-major matrices, with an
// optional fused epilogue (row bias, ReLU, zero mask) and a few fused
// element-wise kernels the coupling flow runs between its products.
//
// The products that occur in the engine are small (every dimension among
// 20…128), so the design favours low fixed costs over large-matrix
// blocking: operands that already have the layout the micro-kernel reads
// (A stored transposed, B stored as is) are used in place, and only the
// others are packed, into buffers owned by a Workspace that are reused from
// call to call. The micro-kernel keeps a tile of up to 6×16 results of C in
// YMM registers and is written in Go assembly for AVX2+FMA; CPUs without
// those (and builds with the purego tag) use a pure-Go kernel that runs the
// same blocking code.
//
// Every routine is serial and sums in an order fixed by the shapes alone, so
// results are bit-for-bit reproducible for the same inputs on the same
// machine, whatever GOMAXPROCS is; callers parallelize over independent
// products themselves.
package sgemm
