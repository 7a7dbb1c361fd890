package gemmcore

import "unsafe"

// kernGoFull and kernGoHalf are the portable micro-kernels (see Kernel).
func kernGoFull[T Float](nt, base, extra, kc int, a *T, sa, ra int, b *T, sb int, c *T, ldc int, alpha, beta T, flags int, bias, mask *T, ldm int) {
	kernGoTiles(cols[T](), nt, base, extra, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
}

func kernGoHalf[T Float](nt, base, extra, kc int, a *T, sa, ra int, b *T, sb int, c *T, ldc int, alpha, beta T, flags int, bias, mask *T, ldm int) {
	kernGoTiles(cols[T]()/2, nt, base, extra, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
}

func kernGoTiles[T Float](width, nt, base, extra, kc int, a *T, sa, ra int, b *T, sb int, c *T, ldc int, alpha, beta T, flags int, bias, mask *T, ldm int) {
	size := 64 / cols[T]()
	for t := 0; t < nt; t++ {
		rows := base
		if t < extra {
			rows++
		}
		kernGo(width, rows, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
		if t == nt-1 {
			break // the next tile's pointers would point past the matrices
		}
		a = (*T)(unsafe.Add(unsafe.Pointer(a), size*rows*ra))
		c = (*T)(unsafe.Add(unsafe.Pointer(c), size*rows*ldc))
		if bias != nil {
			bias = (*T)(unsafe.Add(unsafe.Pointer(bias), size*rows))
		}
		if mask != nil {
			mask = (*T)(unsafe.Add(unsafe.Pointer(mask), size*rows*ldm))
		}
	}
}

func kernGo[T Float](width, rows, kc int, a *T, sa, ra int, b *T, sb int, c *T, ldc int, alpha, beta T, flags int, bias, mask *T, ldm int) {
	var acc [tileRows][maxCols]T
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
	var M []T
	if flags&FlagMask != 0 {
		M = unsafe.Slice(mask, (rows-1)*ldm+width)
	}
	var bs []T
	if flags&FlagBias != 0 {
		bs = unsafe.Slice(bias, rows)
	}
	for i := 0; i < rows; i++ {
		cr := C[i*ldc : i*ldc+width]
		for j, v := range acc[i][:width] {
			if flags&FlagAlpha != 0 {
				v *= alpha
			}
			if flags&FlagBeta != 0 {
				v += beta * cr[j]
			}
			if flags&FlagBias != 0 {
				v += bs[i]
			}
			if flags&FlagReLU != 0 && v < 0 {
				v = 0
			}
			if flags&FlagMask != 0 && !(M[i*ldm+j] > 0) {
				v = 0
			}
			cr[j] = v
		}
	}
}

func acc2x4[T Float](acc *[tileRows][maxCols]T, A, B []T, i, j, kc, sa, ra, sb int) {
	var c00, c01, c02, c03, c10, c11, c12, c13 T
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

func acc1x4[T Float](acc *[tileRows][maxCols]T, A, B []T, i, j, kc, sa, ra, sb int) {
	var c0, c1, c2, c3 T
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
