package ops

import (
	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/task"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// convMath is the precision-specific part of the kernels.
type convMath[F float] struct {
	// gemm computes C = alpha·op(A)·op(B) + beta·C, then clamps at zero if
	// relu (NaN stays); serial.
	gemm func(ws *sgemm.Workspace, tA, tB bool, m, n, k int, alpha F, a []F, lda int, b []F, ldb int, beta F, c []F, ldc int, relu bool)
	// pool, maskedPool and unpool: see sgemm.MaxPool4,
	// sgemm.MaskedMaxPool4 and sgemm.Unpool4.
	pool       func(out []F, arg []uint8, a, b, c, d []F)
	maskedPool func(out []F, arg []uint8, a, b, c, d, ma, mb, mc, md []F)
	unpool     func(a, b, c, d, g, out []F, arg []uint8, scale F)
	// fromF64 and toF64 convert a rows×cols matrix from and to float64.
	fromF64 func(dst []F, ldd int, src []float64, lds, rows, cols int)
	toF64   func(dst []float64, ldd int, src []F, lds, rows, cols int)
	// mask fills a dropout mask: element i of the stream that starts at key
	// is kept when its 32-bit uniform is below thr (see
	// sgemm.BernoulliMask). A counter-based stream lets any worker fill any
	// image's mask, and the vectorized SplitMix64 costs ~0.3 ns per element
	// where a PCG draw per element cost 2.4.
	mask func(m []F, key, thr uint64)
	// addF64 adds src to dst (see sgemm.AddToFloat64).
	addF64 func(dst []float64, src []F)
	// transpose writes the transpose of a rows×cols matrix (see
	// sgemm.Transpose).
	transpose func(dst []F, ldd int, src []F, lds, rows, cols int)
	// Winograd tile kernels: see sgemm.WinoIn, WinoOutPool, WinoGradOut,
	// WinoInT and WinoOut.
	winoIn      func(v []F, ldv int, src []F, lds, c int)
	winoOutPool func(out []F, arg []uint8, m []F, ldm int, bias []F, alpha F, mask []F, flags int)
	winoGradOut func(dm []F, ldm int, db, g, out []F, arg []uint8, alpha F)
	winoInT     func(dst []F, ldd int, dv []F, ldv, c int)
	winoOut     func(dst []F, ldd int, m []F, ldm, n, flags int)
}

var convMath32 = convMath[float32]{
	gemm: func(ws *sgemm.Workspace, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, relu bool) {
		ws.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, sgemm.Epilogue{ReLU: relu})
	},
	pool:       sgemm.MaxPool4,
	maskedPool: sgemm.MaskedMaxPool4,
	unpool:     sgemm.Unpool4,
	fromF64:    sgemm.ToFloat32,
	toF64:      sgemm.ToFloat64,
	mask:       sgemm.BernoulliMask,
	addF64:     sgemm.AddToFloat64,
	transpose:  sgemm.Transpose,

	winoIn:      sgemm.WinoIn,
	winoOutPool: sgemm.WinoOutPool,
	winoGradOut: sgemm.WinoGradOut,
	winoInT:     sgemm.WinoInT,
	winoOut:     sgemm.WinoOut,
}

var convMath64 = convMath[float64]{
	gemm: func(_ *sgemm.Workspace, tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, relu bool) {
		ta, tb := blas.NoTrans, blas.NoTrans
		A := blas64.General{Rows: m, Cols: k, Stride: lda, Data: a}
		if tA {
			ta, A.Rows, A.Cols = blas.Trans, k, m
		}
		B := blas64.General{Rows: k, Cols: n, Stride: ldb, Data: b}
		if tB {
			tb, B.Rows, B.Cols = blas.Trans, n, k
		}
		blas64.Gemm(ta, tb, alpha, A, B, beta, blas64.General{Rows: m, Cols: n, Stride: ldc, Data: c})
		if !relu {
			return
		}
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			for j, v := range row {
				if v < 0 {
					row[j] = 0
				}
			}
		}
	},
	pool:       convMaxPool4[float64],
	maskedPool: convMaskedMaxPool4[float64],
	unpool:     convUnpool4[float64],
	fromF64:    copyRows,
	toF64:      copyRows,
	mask:       sgemm.BernoulliMaskAny[float64],
	addF64: func(dst, src []float64) {
		for i, v := range src {
			dst[i] += v
		}
	},
	transpose: transpose[float64],

	winoIn:      sgemm.WinoInGo[float64],
	winoOutPool: sgemm.WinoOutPoolGo[float64],
	winoGradOut: sgemm.WinoGradOutGo[float64],
	winoInT:     sgemm.WinoInTGo[float64],
	winoOut:     sgemm.WinoOutGo[float64],
}

// convMaxPool4, convMaskedMaxPool4 and convUnpool4 are sgemm.MaxPool4,
// sgemm.MaskedMaxPool4 and sgemm.Unpool4 in any precision; pooling without
// masks keeps every cell.
func convMaxPool4[F float](out []F, arg []uint8, a, b, c, d []F) {
	convMaskedMaxPool4(out, arg, a, b, c, d, nil, nil, nil, nil)
}

func convMaskedMaxPool4[F float](out []F, arg []uint8, a, b, c, d, ma, mb, mc, md []F) {
	n := len(out)
	arg, a, b, c, d = arg[:n], a[:n], b[:n], c[:n], d[:n]
	keep := func(v F, m []F, i int) F {
		if m == nil || m[i] > 0 {
			return v
		}
		return 0
	}
	for i := range out {
		m, k := keep(a[i], ma, i), uint8(0)
		if v := keep(b[i], mb, i); v > m || v != v {
			m, k = v, 1
		}
		if v := keep(c[i], mc, i); v > m || v != v {
			m, k = v, 2
		}
		if v := keep(d[i], md, i); v > m || v != v {
			m, k = v, 3
		}
		out[i], arg[i] = m, k
	}
}

func convUnpool4[F float](a, b, c, d, g, out []F, arg []uint8, scale F) {
	n := len(g)
	a, b, c, d, out, arg = a[:n], b[:n], c[:n], d[:n], out[:n], arg[:n]
	for i := range g {
		var v F
		if out[i] > 0 {
			v = scale * g[i]
		}
		k := arg[i]
		d[i], c[i], b[i], a[i] = 0, 0, 0, 0
		switch k {
		case 0:
			a[i] = v
		case 1:
			b[i] = v
		case 2:
			c[i] = v
		default:
			d[i] = v
		}
	}
}

// convIm2col writes, for each pixel of n images of h×w×c (channels-last,
// consecutive in src), one row of dst (row stride ldd): the 3×3
// neighbourhood tap by tap (ky, kx row-major), c values per tap, zeros
// outside the image, then a 1 if ones.
func convIm2col[F float](dst []F, ldd int, src []F, n, h, w, c int, ones bool) {
	if c == 1 {
		convIm2col1(dst, ldd, src, n, h, w, ones)
		return
	}
	for i := 0; i < n; i++ {
		img := src[i*h*w*c : (i+1)*h*w*c]
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				row := dst[((i*h+y)*w+x)*ldd:][:9*c]
				for ky := 0; ky < 3; ky++ {
					seg := row[3*ky*c : 3*(ky+1)*c]
					yy := y + ky - 1
					if yy < 0 || yy >= h {
						clear(seg)
						continue
					}
					line := img[yy*w*c : (yy+1)*w*c]
					if x > 0 && x < w-1 {
						copy(seg, line[(x-1)*c:(x+2)*c])
						continue
					}
					for kx := 0; kx < 3; kx++ {
						xx := x + kx - 1
						if xx < 0 || xx >= w {
							clear(seg[kx*c : (kx+1)*c])
						} else {
							copy(seg[kx*c:(kx+1)*c], line[xx*c:(xx+1)*c])
						}
					}
				}
				if ones {
					dst[((i*h+y)*w+x)*ldd+9*c] = 1
				}
			}
		}
	}
}

// convIm2col1 is convIm2col for one channel (grey images), where a copy
// call per tap would cost more than the value it moves.
func convIm2col1[F float](dst []F, ldd int, src []F, n, h, w int, ones bool) {
	for i := 0; i < n; i++ {
		img := src[i*h*w : (i+1)*h*w]
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				o := ((i*h+y)*w + x) * ldd
				row := dst[o : o+9]
				for ky := 0; ky < 3; ky++ {
					var a, b, c F
					if yy := y + ky - 1; yy >= 0 && yy < h {
						line := img[yy*w : (yy+1)*w]
						if x > 0 {
							a = line[x-1]
						}
						b = line[x]
						if x+1 < w {
							c = line[x+1]
						}
					}
					row[3*ky], row[3*ky+1], row[3*ky+2] = a, b, c
				}
				if ones {
					dst[o+9] = 1
				}
			}
		}
	}
}

// convWindows calls fn with the offsets (in pixels) of the four cells of
// every 2×2 pooling window of an h×w map, in window order, and their
// places q in the window (0 for (0,0) … 3 for (1,1)). A cell cut off by
// the border is replaced by an earlier cell of its window, offset and
// place (see sgemm.MaxPool4).
func convWindows(ly convLayer, fn func(wi int, c, q [4]int)) {
	h, w := ly.h, ly.w
	for oy := 0; oy < ly.ho; oy++ {
		y0, y1 := 2*oy, 2*oy+1
		for ox := 0; ox < ly.wo; ox++ {
			x0, x1 := 2*ox, 2*ox+1
			c0 := y0*w + x0
			c := [4]int{c0, c0, c0, c0}
			var q [4]int
			if x1 < w {
				c[1], q[1] = y0*w+x1, 1
			}
			if y1 < h {
				c[2], q[2] = y1*w+x0, 2
			}
			switch {
			case x1 < w && y1 < h:
				c[3], q[3] = y1*w+x1, 3
			case y1 < h:
				c[3], q[3] = c[2], q[2]
			default:
				c[3], q[3] = c[1], q[1]
			}
			fn(oy*ly.wo+ox, c, q)
		}
	}
}

// convMaskKey is the SplitMix64 state that starts the dropout stream of one
// image in one block: a function of the step's seed, the op's stream (its
// creation order in the net), the image's index in the batch and the block
// alone, so masks do not depend on chunking or on the number of cores.
//
// The stream is laid out window-major: window by window (row-major over the
// pooled map), the window's cells (0,0), (0,1), (1,0), (1,1), the filters of
// a cell contiguous; cells that an odd size cuts off keep their places. Both
// paths apply dropout as they pool, one window at a time, and so read the
// stream in order.
func convMaskKey(seed, stream uint64, image, block int) uint64 {
	return sgemm.SplitMix(sgemm.SplitMix(seed+task.Gamma) ^ (stream<<48 | uint64(image)<<8 | uint64(block)))
}
