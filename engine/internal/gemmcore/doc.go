// Package gemmcore is the blocking driver and the portable micro-kernels
// shared by packages sgemm (float32) and dgemm (float64): one copy of the
// Go code, instantiated once per element type, while each package keeps
// its own assembly kernels, kernel selection and exported API.
//
// The tile width is one 64-byte cache line of elements (16 float32 or 8
// float64: two YMM registers per tile row), derived from the element size
// rather than passed in. Go stencils generic code per GC shape, and
// float32 and float64 have different shapes, so the width folds to a
// constant in each instantiation: packing and the panel loop compile to the
// same shifts and bounds as hand-specialised code would. A width held in a
// variable or reached through a method of a type parameter made products
// with a transposed B 7–10% slower.
package gemmcore
