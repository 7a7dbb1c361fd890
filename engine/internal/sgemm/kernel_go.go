package sgemm

import "unsafe"

// kernGo16 and kernGo8 are the portable micro-kernels (see kernelFunc).
func kernGo16(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int) {
	kernGoTiles(tileCols, nt, base, extra, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
}

func kernGo8(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int) {
	kernGoTiles(tileCols/2, nt, base, extra, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
}

func kernGoTiles(width, nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int) {
	for t := 0; t < nt; t++ {
		rows := base
		if t < extra {
			rows++
		}
		kernGo(width, rows, kc, a, sa, ra, b, sb, c, ldc, alpha, beta, flags, bias, mask, ldm)
		a = (*float32)(unsafe.Add(unsafe.Pointer(a), 4*rows*ra))
		c = (*float32)(unsafe.Add(unsafe.Pointer(c), 4*rows*ldc))
		if bias != nil {
			bias = (*float32)(unsafe.Add(unsafe.Pointer(bias), 4*rows))
		}
		if mask != nil {
			mask = (*float32)(unsafe.Add(unsafe.Pointer(mask), 4*rows*ldm))
		}
	}
}

func kernGo(width, rows, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int) {
	var acc [tileRows][tileCols]float32
	A := unsafe.Slice(a, (kc-1)*sa+(rows-1)*ra+1)
	B := unsafe.Slice(b, (kc-1)*sb+width)
	for p := 0; p < kc; p++ {
		bp := B[p*sb : p*sb+width]
		for i := 0; i < rows; i++ {
			av := A[p*sa+i*ra]
			row := acc[i][:width]
			for j, bv := range bp {
				row[j] += av * bv
			}
		}
	}
	C := unsafe.Slice(c, (rows-1)*ldc+width)
	var M []float32
	if flags&flagMask != 0 {
		M = unsafe.Slice(mask, (rows-1)*ldm+width)
	}
	var bs []float32
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
