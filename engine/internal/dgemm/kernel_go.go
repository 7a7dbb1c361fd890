package dgemm

import "unsafe"

// kernGo8 and kernGo4 are the portable micro-kernels (see kernelFunc).
func kernGo8(nt, base, extra, kc int, a *float64, sa, ra int, b *float64, sb int, c *float64, ldc int, alpha, beta float64, flags int, bias, mask *float64, ldm int) {
	kernGoTiles(tileCols, nt, base, extra, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
}

func kernGo4(nt, base, extra, kc int, a *float64, sa, ra int, b *float64, sb int, c *float64, ldc int, alpha, beta float64, flags int, bias, mask *float64, ldm int) {
	kernGoTiles(tileCols/2, nt, base, extra, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
}

func kernGoTiles(width, nt, base, extra, kc int, a *float64, sa, ra int, b *float64, sb int, c *float64, ldc int, alpha, beta float64, flags int, bias, mask *float64, ldm int) {
	for t := 0; t < nt; t++ {
		rows := base
		if t < extra {
			rows++
		}
		kernGo(width, rows, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
		if t == nt-1 {
			break // the next tile's pointers would point past the matrices
		}
		a = (*float64)(unsafe.Add(unsafe.Pointer(a), 8*rows*ra))
		c = (*float64)(unsafe.Add(unsafe.Pointer(c), 8*rows*ldc))
		if bias != nil {
			bias = (*float64)(unsafe.Add(unsafe.Pointer(bias), 8*rows))
		}
		if mask != nil {
			mask = (*float64)(unsafe.Add(unsafe.Pointer(mask), 8*rows*ldm))
		}
	}
}

func kernGo(width, rows, kc int, a *float64, sa, ra int, b *float64, sb int, c *float64, ldc int, alpha, beta float64, flags int, bias, mask *float64, ldm int) {
	var acc [tileRows][tileCols]float64
	A := unsafe.Slice(a, (kc-1)*sa+(rows-1)*ra+1)
	B := unsafe.Slice(b, (kc-1)*sb+width)
	// Blocks of 2 rows × 4 columns keep their 8 sums in registers.
	for i := 0; i < rows; i += 2 {
		for j := 0; j < width; j += 4 {
			if i+1 < rows {
				acc2x4(&acc, A, B, i, j, kc, sa, ra, sb)
			} else {
				acc1x4(&acc, A, B, i, j, kc, sa, ra, sb)
			}
		}
	}
	C := unsafe.Slice(c, (rows-1)*ldc+width)
	var M []float64
	if flags&flagMask != 0 {
		M = unsafe.Slice(mask, (rows-1)*ldm+width)
	}
	var bs []float64
	if flags&flagBias != 0 {
		bs = unsafe.Slice(bias, rows)
	}
	for i := 0; i < rows; i++ {
		cr := C[i*ldc : i*ldc+width]
		for j, v := range acc[i][:width] {
			if flags&flagAlpha != 0 {
				v *= alpha
			}
			if flags&flagBeta != 0 {
				v += beta * cr[j]
			}
			if flags&flagBias != 0 {
				v += bs[i]
			}
			if flags&flagReLU != 0 && v < 0 {
				v = 0
			}
			if flags&flagMask != 0 && !(M[i*ldm+j] > 0) {
				v = 0
			}
			cr[j] = v
		}
	}
}

func acc2x4(acc *[tileRows][tileCols]float64, A, B []float64, i, j, kc, sa, ra, sb int) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float64
	ai, bj := i*ra, j
	for p := 0; p < kc; p++ {
		a0, a1 := A[ai], A[ai+ra]
		bp := B[bj : bj+4 : bj+4]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		ai += sa
		bj += sb
	}
	acc[i][j], acc[i][j+1], acc[i][j+2], acc[i][j+3] = c00, c01, c02, c03
	acc[i+1][j], acc[i+1][j+1], acc[i+1][j+2], acc[i+1][j+3] = c10, c11, c12, c13
}

func acc1x4(acc *[tileRows][tileCols]float64, A, B []float64, i, j, kc, sa, ra, sb int) {
	var c0, c1, c2, c3 float64
	ai, bj := i*ra, j
	for p := 0; p < kc; p++ {
		a0 := A[ai]
		bp := B[bj : bj+4 : bj+4]
		c0 += a0 * bp[0]
		c1 += a0 * bp[1]
		c2 += a0 * bp[2]
		c3 += a0 * bp[3]
		ai += sa
		bj += sb
	}
	acc[i][j], acc[i][j+1], acc[i][j+2], acc[i][j+3] = c0, c1, c2, c3
}
