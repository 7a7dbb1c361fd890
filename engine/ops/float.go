package ops

import "unsafe"

// float is the working precision of the flow and convolution kernels. Their
// inputs and outputs are float64 either way; production runs in float32
// (AVX2 GEMM and fast element-wise kernels from internal/sgemm), while
// float64 runs the same code through our dgemm and plain Go so that
// finite-difference tests can check it to ~1e-7.
type float interface{ float32 | float64 }

// alignedAlloc returns n zeros starting on a 64-byte boundary: with a row
// length that is a multiple of 16 every row is then a whole number of cache
// lines, which the GEMM reads in place.
func alignedAlloc[F float](n int) []F {
	var z F
	sz := int(unsafe.Sizeof(z))
	raw := make([]F, n+64/sz)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % 64); r != 0 {
		off = (64 - r) / sz
	}
	return raw[off : off+n : off+n]
}

// transpose writes the transpose of the r×c matrix src (row stride lds)
// into dst (row stride ldd): sgemm.Transpose in any precision.
func transpose[F float](dst []F, ldd int, src []F, lds, r, c int) {
	for i := 0; i < r; i++ {
		row := src[i*lds : i*lds+c]
		for j, v := range row {
			dst[j*ldd+i] = v
		}
	}
}

// copyRows copies a rows×cols matrix between row strides: the float64
// twin of sgemm.ToFloat32 and sgemm.ToFloat64.
func copyRows(dst []float64, ldd int, src []float64, lds, rows, cols int) {
	for i := 0; i < rows; i++ {
		copy(dst[i*ldd:i*ldd+cols], src[i*lds:i*lds+cols])
	}
}
