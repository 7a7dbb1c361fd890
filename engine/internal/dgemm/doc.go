// Package dgemm is the float64 twin of package sgemm: a small serial matrix
// multiply C = alpha·op(A)·op(B) + beta·C on row-major matrices, with the
// same optional fused epilogue (row bias, ReLU, zero mask), for the
// engine's float64 products: the random-feature op, the KRR and attention
// ops and, through BLAS, gorgonia's own matrix products.
//
// gonum's pure-Go Dgemm reaches 3–6 GFLOP/s on the engine's small shapes
// (every dimension among 5…128); the AVX2+FMA micro-kernel here reaches
// 40–55 on one core of the 2-core development machine. The design is
// sgemm's, and so is the Go code: the driver and portable kernels of package
// gemmcore, instantiated for float64. A is never packed but broadcast in
// place with a row and a k stride, B is read in place or packed into 8- and
// 4-column panels, a tile of up to 6×8 results lives in 12 YMM registers
// (the assembly here, which gen generates from sgemm's float32 kernels:
// never edit kernel_amd64.s by hand). CPUs without AVX2 and FMA, other
// architectures and builds with the purego tag use the portable Go kernels
// with the same blocking.
//
// Every routine is serial and sums in an order fixed by the shapes alone, so
// results are bit-for-bit reproducible for the same inputs whatever
// GOMAXPROCS is. The assembly and portable kernels round differently (FMA).
//
// The engine's other four-lane float64 kernels (Adam, Sincos, the step's
// noise) are in package vecmath.
package dgemm

//go:generate go run ./gen
