package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
)

// ConvSpec describes a stack of convolutional blocks, the feature extractor
// ψ of the few-shot image presets (Conv-4 in the paper's appendix). Every
// block is
//
//	conv 3×3 (stride 1, SAME zero padding, Filters filters) + bias → ReLU →
//	dropout (training only) → max-pool 2×2 (stride 2, SAME)
//
// with no batch normalization. SAME pooling of an odd size pads one row at
// the bottom and one column at the right that never win the maximum
// (7×7 → 4×4), as TensorFlow does. Dropout is inverted: kept activations
// are scaled by 1/Keep, so evaluation runs the blocks unchanged.
//
// Layouts (all row-major):
//   - an image is channels-last, pixel (y, x) channel c at (y·Width + x)·Channels + c
//     (one grey value per pixel for Omniglot; interleaved RGB otherwise);
//   - the weights of block l are (Filters, Cin·9) with Cin = Channels for
//     the first block and Filters after it, element [f][c·9 + ky·3 + kx]
//     (PyTorch's (F, Cin, 3, 3) flattened), and the bias is (Filters);
//   - the output of an image is the last block's map flattened
//     channels-last, (y·W' + x)·Filters + f, as in the authors' TensorFlow
//     code (OutDim values).
type ConvSpec struct {
	Channels int     `json:"channels"`
	Height   int     `json:"height"`
	Width    int     `json:"width"`
	Blocks   int     `json:"blocks"`
	Filters  int     `json:"filters"`
	Keep     float64 `json:"keep"` // dropout keep probability in training; 1 = no dropout
	// FloorPool keeps only whole 2×2 pooling windows (an odd map loses its
	// last row or column), as the paper's miniImageNet table does
	// (84→42→21→10→5→2, 256-d); otherwise pooling is SAME (7→4 for
	// Omniglot).
	FloorPool bool `json:"floor_pool,omitempty"`
}

// Validate reports whether the spec describes a network the kernels run.
func (s ConvSpec) Validate() error {
	switch {
	case s.Channels < 1 || s.Height < 1 || s.Width < 1:
		return fmt.Errorf("conv: input %d×%d×%d, want every size ≥ 1", s.Height, s.Width, s.Channels)
	case s.Blocks < 1:
		return fmt.Errorf("conv: %d blocks, want ≥ 1", s.Blocks)
	case s.Filters < 1:
		return fmt.Errorf("conv: %d filters, want ≥ 1", s.Filters)
	case !(s.Keep > 0 && s.Keep <= 1):
		return fmt.Errorf("conv: keep probability %g, want in (0, 1]", s.Keep)
	case s.FloorPool && s.OutDim() == 0:
		return fmt.Errorf("conv: %d blocks of floor pooling shrink %d×%d to nothing", s.Blocks, s.Height, s.Width)
	}
	return nil
}

// InDim is the length of one input image.
func (s ConvSpec) InDim() int { return s.Channels * s.Height * s.Width }

// OutDim is the length of one output feature vector: 256 for Conv-4 on
// 28×28 images with 64 filters (2×2×64).
func (s ConvSpec) OutDim() int {
	h, w := s.Height, s.Width
	for range s.Blocks {
		h, w = s.pooled(h), s.pooled(w)
	}
	return h * w * s.Filters
}

// pooled is the size a map side of n pools to.
func (s ConvSpec) pooled(n int) int {
	if s.FloorPool {
		return n / 2
	}
	return (n + 1) / 2
}

// FanIn is the number of inputs of one filter of block l.
func (s ConvSpec) FanIn(l int) int {
	if l == 0 {
		return 9 * s.Channels
	}
	return 9 * s.Filters
}

// convLayer is the geometry of one block and how it is computed.
type convLayer struct {
	cin, h, w int // input channels and size (the convolution keeps the size)
	ho, wo    int // pooled size, also the Winograd tiles (one per window)
	p, po     int // h·w and ho·wo
	k1        int // 9·cin taps plus a column of ones that carries the bias
	wino      bool
	group     int // images per product (see convGroupRows, convGroupTiles)
	part      int // length of the block's weight-gradient partial
}

// convGroupRows is the number of pixel rows that one im2col product should
// have at least: small maps (a 7×7 map has 49 pixels) are batched over
// images, so that the weight-gradient product runs in one pass over a depth
// of ~200 rather than re-reading its (9·cin+1)×F result for every image.
const convGroupRows = 240

func (s ConvSpec) layers() []convLayer {
	ls := make([]convLayer, s.Blocks)
	h, w, c := s.Height, s.Width, s.Channels
	for l := range ls {
		ly := convLayer{cin: c, h: h, w: w, ho: s.pooled(h), wo: s.pooled(w), p: h * w, k1: 9*c + 1}
		ly.po = ly.ho * ly.wo
		ls[l] = ly
		h, w, c = ly.ho, ly.wo, s.Filters
	}
	return ls
}

// convChunks is the fixed number of image chunks of a pass. A chunk runs
// on one goroutine and sums its own weight gradients, which are then added
// in chunk order, so results do not depend on the number of cores; 8
// chunks keep two cores balanced when another process takes a share of
// one.
const convChunks = 8

// convFloat is the working precision of a conv kernel: float32 in
// production (internal/sgemm), float64 for finite-difference tests.
type convFloat interface{ float32 | float64 }

// convMath is the precision-specific part of the kernels.
type convMath[F convFloat] struct {
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
	// mask fills a dropout mask (see convDropMask).
	mask func(m []F, key, thr uint64)
	// addF64 adds src to dst (see sgemm.AddToFloat64).
	addF64 func(dst []float64, src []F)
	// transpose writes the transpose of a rows×cols matrix (see
	// sgemm.Transpose).
	transpose func(dst []F, ldd int, src []F, lds, rows, cols int)
	// Winograd tile kernels: see sgemm.WinoIn, WinoOutPool, WinoGradOut and
	// WinoInT.
	winoIn      func(v []F, ldv int, src []F, lds, c int)
	winoOutPool func(out []F, arg []uint8, m []F, ldm int, bias []F, alpha F, mask []F, flags int)
	winoGradOut func(dm []F, ldm int, db, g, out []F, arg []uint8, alpha F)
	winoInT     func(dst []F, ldd int, dv []F, ldv, c int)
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
	fromF64:    convCopyRows,
	toF64:      convCopyRows,
	mask:       convDropMask[float64],
	addF64: func(dst, src []float64) {
		for i, v := range src {
			dst[i] += v
		}
	},
	transpose: flowTranspose[float64],

	winoIn:      convWinoIn[float64],
	winoOutPool: convWinoOutPool[float64],
	winoGradOut: convWinoGradOut[float64],
	winoInT:     convWinoInT[float64],
}

// convMaxPool4 and convUnpool4 are sgemm.MaxPool4 and sgemm.Unpool4 in any
// precision.
func convMaxPool4[F convFloat](out []F, arg []uint8, a, b, c, d []F) {
	n := len(out)
	arg, a, b, c, d = arg[:n], a[:n], b[:n], c[:n], d[:n]
	for i := range out {
		m, k := a[i], uint8(0)
		if v := b[i]; v > m || v != v {
			m, k = v, 1
		}
		if v := c[i]; v > m || v != v {
			m, k = v, 2
		}
		if v := d[i]; v > m || v != v {
			m, k = v, 3
		}
		out[i], arg[i] = m, k
	}
}

func convMaskedMaxPool4[F convFloat](out []F, arg []uint8, a, b, c, d, ma, mb, mc, md []F) {
	n := len(out)
	arg, a, b, c, d = arg[:n], a[:n], b[:n], c[:n], d[:n]
	ma, mb, mc, md = ma[:n], mb[:n], mc[:n], md[:n]
	keep := func(v, m F) F {
		if m > 0 {
			return v
		}
		return 0
	}
	for i := range out {
		m, k := keep(a[i], ma[i]), uint8(0)
		if v := keep(b[i], mb[i]); v > m || v != v {
			m, k = v, 1
		}
		if v := keep(c[i], mc[i]); v > m || v != v {
			m, k = v, 2
		}
		if v := keep(d[i], md[i]); v > m || v != v {
			m, k = v, 3
		}
		out[i], arg[i] = m, k
	}
}

func convUnpool4[F convFloat](a, b, c, d, g, out []F, arg []uint8, scale F) {
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

func convCopyRows(dst []float64, ldd int, src []float64, lds, rows, cols int) {
	for i := 0; i < rows; i++ {
		copy(dst[i*ldd:i*ldd+cols], src[i*lds:i*lds+cols])
	}
}

// convIm2col writes, for each pixel of n images of h×w×c (channels-last,
// consecutive in src), one row of dst (row stride ldd): the 3×3
// neighbourhood tap by tap (ky, kx row-major), c values per tap, zeros
// outside the image, then a 1 if ones.
func convIm2col[F convFloat](dst []F, ldd int, src []F, n, h, w, c int, ones bool) {
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
func convIm2col1[F convFloat](dst []F, ldd int, src []F, n, h, w int, ones bool) {
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

const convGamma = 0x9e3779b97f4a7c15 // SplitMix64's increment

// convMaskKey is the SplitMix64 state that starts the dropout stream of one
// image in one block: a function of the step's seed, the op's stream (its
// creation order in the net), the image's index in the batch and the block
// alone, so masks do not depend on chunking or on the number of cores.
func convMaskKey(seed, stream uint64, image, block int) uint64 {
	return sgemm.SplitMix(sgemm.SplitMix(seed+convGamma) ^ (stream<<48 | uint64(image)<<8 | uint64(block)))
}

// convDropMask fills m with 1 (kept) or 0 (dropped) as
// sgemm.BernoulliMask does, in any precision (the float32 kernels call
// BernoulliMask itself): element i of the stream that starts at key is
// kept when its 32-bit uniform is below thr. A counter-based stream lets
// any worker fill any image's mask, and the vectorized SplitMix64 costs
// ~0.3 ns per element where a PCG draw per element cost 2.4.
func convDropMask[F convFloat](m []F, key uint64, thr uint64) {
	for i := range m {
		z := sgemm.SplitMix(key + uint64(i/2+1)*convGamma)
		u := z & math.MaxUint32
		if i%2 == 1 {
			u = z >> 32
		}
		m[i] = 0
		if u < thr {
			m[i] = 1
		}
	}
}

// convMaskIndex is where the mask of pixel (y, x) of a block starts in the
// image's dropout stream, which is laid out window-major: window by window
// (row-major over the pooled map), the window's cells (0,0), (0,1), (1,0),
// (1,1), the filters of a cell contiguous; cells that an odd size cuts off
// keep their places. Both paths apply dropout as they pool, one window at a
// time, and so read the stream in order.
func convMaskIndex(ly convLayer, y, x, nf int) int {
	return (((y/2)*ly.wo+x/2)*4 + (y%2)*2 + x%2) * nf
}

// convScratch is the working memory of one goroutine in a pass.
type convScratch[F convFloat] struct {
	ws      sgemm.Workspace
	col     []F // im2col rows of a group of images
	z, mask []F // pre-pool activations (forward) or their gradient (backward); dropout masks
	gA, gB  []F // gradients w.r.t. the input and output of a block, for a chunk
	wv, wm  []F // Winograd: the 16 transformed-input (V, later dV) and product (M, dM) matrices
	pad     []F // Winograd: one zero-padded image, or the gradient accumulated onto one
}

// convPath chooses how blocks are computed; tests force one or the other.
type convPath int

const (
	convPathAuto     convPath = iota // Winograd where the block has ≥ convWinoMinCin input channels
	convPathIm2col                   // every block by im2col and one product
	convPathWinograd                 // every block by Winograd F(2×2, 3×3)
)

// convWinoMinCin is the input channel count from which a block runs
// Winograd F(2×2, 3×3): 2.25 times fewer multiplications (1.7 on a 7×7
// map, whose tiles stick out), for transforms whose cost per tile does not
// grow with the filters, so they pay off once the channel sums are long.
// The first block of a grey or RGB image stays on im2col, where the
// product over 9·cin+1 taps is cheap anyway.
const convWinoMinCin = 16

// convGroupTiles is the number of tiles a Winograd group should have: the
// 16 matrices of transformed inputs and of products of ~100 tiles × 64
// channels (400 KB each) stay in a core's L2.
const convGroupTiles = 128

// convCore holds the state of a kernel in working precision F.
type convCore[F convFloat] struct {
	spec ConvSpec
	ls   []convLayer
	fm   *convMath[F]
	pool *flowPool

	N       int
	chunks  [][2]int
	chunk   int   // the largest chunk
	wt      [][]F // im2col blocks, k1×F: row tap·cin + c is W[·][c·9+tap], the last row the bias
	wrot    [][]F // im2col blocks ≥ 1, 9F×cin: the transposed, rotated filters of the input gradient
	u, ut   [][]F // Winograd blocks: G g Gᵀ as 16 matrices cin×F, and transposed (16 of F×cin)
	bias    [][]F // Winograd blocks: the bias
	act     [][]F // act[l]: input of block l for all images (act[L]: the output)
	arg     [][]uint8
	part    [][]F // per chunk: weight-gradient partials of every block
	partOff []int
	free    chan *convScratch[F]

	alpha        F
	train        bool
	seed, stream uint64
	thr          uint64

	jSetup  convSetup[F]
	jFwd    convForward[F]
	jBwd    convBackward[F]
	jReduce convReduce[F]
	units   [][3]int    // reduce work units: block and a range of rows (im2col) or channels (Winograd)
	sums    [][]float64 // per unit, convReduceLen sums of chunk partials
}

// convReduceLen is the length of a reduction unit's buffer: 16 Winograd
// matrices × 64 filters, or 1024 filters of an im2col row, at a time.
const convReduceLen = 1024

func newConvCore[F convFloat](spec ConvSpec, fm *convMath[F], path convPath) *convCore[F] {
	k := &convCore[F]{spec: spec, ls: spec.layers(), fm: fm, pool: newFlowPool()}
	runtime.AddCleanup(k, func(p *flowPool) { close(p.start) }, k.pool)
	nf, L := spec.Filters, len(k.ls)
	k.wt, k.wrot = make([][]F, L), make([][]F, L)
	k.u, k.ut, k.bias = make([][]F, L), make([][]F, L), make([][]F, L)
	off := 0
	for l := range k.ls {
		ly := &k.ls[l]
		ly.wino = path == convPathWinograd || path == convPathAuto && ly.cin >= convWinoMinCin
		k.partOff = append(k.partOff, off)
		if ly.wino {
			ly.group = max(1, convGroupTiles/ly.po)
			ly.part = 16*ly.cin*nf + nf
			k.u[l] = flowAlloc[F](16 * ly.cin * nf)
			k.ut[l] = flowAlloc[F](16 * nf * ly.cin)
			k.bias[l] = flowAlloc[F](nf)
			// Units of 8 channels keep both cores busy on the reduction.
			for c := 0; c < ly.cin; c += 8 {
				k.units = append(k.units, [3]int{l, c, min(c+8, ly.cin)})
			}
		} else {
			ly.group = max(1, convGroupRows/ly.p)
			ly.part = ly.k1 * nf
			k.wt[l] = flowAlloc[F](ly.k1 * nf)
			if l > 0 {
				k.wrot[l] = flowAlloc[F](9 * nf * ly.cin)
			}
			for r := 0; r < ly.k1; r += 64 {
				k.units = append(k.units, [3]int{l, r, min(r+64, ly.k1)})
			}
		}
		off += ly.part
	}
	k.partOff = append(k.partOff, off)
	// Heap buffers: the sums pass through a function value, so stack
	// arrays would escape and be allocated on every pass.
	k.sums = make([][]float64, len(k.units))
	for u := range k.sums {
		k.sums[u] = make([]float64, convReduceLen)
	}
	return k
}

func (k *convCore[F]) resize(N int) {
	if N == k.N && k.act != nil {
		return
	}
	k.N = N
	nc := min(N, convChunks)
	k.chunks = make([][2]int, nc)
	k.chunk = 0
	for ci := range k.chunks {
		k.chunks[ci] = [2]int{ci * N / nc, (ci + 1) * N / nc}
		k.chunk = max(k.chunk, k.chunks[ci][1]-k.chunks[ci][0])
	}
	nf, L := k.spec.Filters, len(k.ls)
	k.act = make([][]F, L+1)
	k.arg = make([][]uint8, L)
	for l, ly := range k.ls {
		k.act[l] = flowAlloc[F](N * ly.p * ly.cin)
		k.arg[l] = make([]uint8, N*ly.po*nf)
	}
	k.act[L] = flowAlloc[F](N * k.ls[L-1].po * nf)
	k.part = make([][]F, nc)
	for ci := range k.part {
		k.part[ci] = flowAlloc[F](k.partOff[L])
	}
	k.free = make(chan *convScratch[F], 64)
}

// scratch takes a scratch from the free list or makes one sized for the
// current N; release puts it back.
func (k *convCore[F]) scratch() *convScratch[F] {
	select {
	case sc := <-k.free:
		return sc
	default:
	}
	nf := k.spec.Filters
	var col, z, mask, g, wv, wm, pad int
	for l, ly := range k.ls {
		n := min(ly.group, k.chunk)
		if l > 0 {
			g = max(g, k.chunk*ly.p*ly.cin)
		}
		if ly.wino {
			T := n * ly.po
			wv = max(wv, 16*T*max(ly.cin, nf))
			wm = max(wm, 16*T*nf)
			mask = max(mask, T*4*nf)
			pad = max(pad, (2*ly.ho+2)*(2*ly.wo+2)*ly.cin)
			continue
		}
		rows := n * ly.p
		width := ly.k1
		if l > 0 {
			width = max(width, 9*nf)
		}
		col = max(col, rows*width)
		z = max(z, rows*nf)
		mask = max(mask, ly.po*4*nf)
	}
	g = max(g, k.chunk*k.ls[len(k.ls)-1].po*nf)
	return &convScratch[F]{col: flowAlloc[F](col), z: flowAlloc[F](z), mask: flowAlloc[F](mask),
		gA: flowAlloc[F](g), gB: flowAlloc[F](g), wv: flowAlloc[F](wv), wm: flowAlloc[F](wm), pad: flowAlloc[F](pad)}
}

func (k *convCore[F]) release(sc *convScratch[F]) {
	select {
	case k.free <- sc:
	default:
	}
}

// convSetup converts the weights of one block to working precision.
type convSetup[F convFloat] struct {
	k      *convCore[F]
	ws, bs [][]float64
}

func (j *convSetup[F]) run(l int) {
	k := j.k
	if k.ls[l].wino {
		k.setupWino(l, j.ws[l], j.bs[l])
		return
	}
	ly, nf := k.ls[l], k.spec.Filters
	w, b, wt := j.ws[l], j.bs[l], k.wt[l]
	cin := ly.cin
	for f := 0; f < nf; f++ {
		for c := 0; c < cin; c++ {
			for tap := 0; tap < 9; tap++ {
				wt[(tap*cin+c)*nf+f] = F(w[f*9*cin+c*9+tap])
			}
		}
		wt[(ly.k1-1)*nf+f] = F(b[f])
	}
	if l == 0 {
		return
	}
	// The input gradient is a convolution of the pre-activation gradient
	// with the filters turned by 180° and transposed (input and output
	// channels swapped): wrot[(tap·F + f)·cin + c] = W[f][c·9 + 8 − tap].
	wr := k.wrot[l]
	for tap := 0; tap < 9; tap++ {
		for f := 0; f < nf; f++ {
			row := wr[(tap*nf+f)*cin : (tap*nf+f+1)*cin]
			for c := range row {
				row[c] = F(w[f*9*cin+c*9+8-tap])
			}
		}
	}
}

// convForward runs the forward pass of the images of one chunk.
type convForward[F convFloat] struct {
	k      *convCore[F]
	x, out []float64
}

func (j *convForward[F]) run(ci int) {
	k := j.k
	sc := k.scratch()
	defer k.release(sc)
	lo, hi := k.chunks[ci][0], k.chunks[ci][1]
	nf, L := k.spec.Filters, len(k.ls)
	in := k.spec.InDim()
	k.fm.fromF64(k.act[0][lo*in:], in, j.x[lo*in:], in, hi-lo, in)
	for l, ly := range k.ls {
		for g0 := lo; g0 < hi; g0 += ly.group {
			g1 := min(g0+ly.group, hi)
			if ly.wino {
				k.forwardWino(l, g0, g1, sc)
				continue
			}
			n, rows := g1-g0, (g1-g0)*ly.p
			convIm2col(sc.col, ly.k1, k.act[l][g0*ly.p*ly.cin:g1*ly.p*ly.cin], n, ly.h, ly.w, ly.cin, true)
			// z = ReLU(alpha·(im2col·wt)), the bias riding on the column of
			// ones; dropout is applied as the windows are pooled.
			z := sc.z[:rows*nf]
			k.fm.gemm(&sc.ws, false, false, rows, nf, ly.k1, k.alpha, sc.col, ly.k1, k.wt[l], nf, 0, z, nf, true)
			for i := 0; i < n; i++ {
				zi := z[i*ly.p*nf : (i+1)*ly.p*nf]
				o := (g0 + i) * ly.po * nf
				out, arg := k.act[l+1][o:o+ly.po*nf], k.arg[l][o:o+ly.po*nf]
				if !k.train {
					convWindows(ly, func(wi int, c, _ [4]int) {
						k.fm.pool(out[wi*nf:(wi+1)*nf], arg[wi*nf:(wi+1)*nf],
							zi[c[0]*nf:(c[0]+1)*nf], zi[c[1]*nf:(c[1]+1)*nf], zi[c[2]*nf:(c[2]+1)*nf], zi[c[3]*nf:(c[3]+1)*nf])
					})
					continue
				}
				m := sc.mask[:ly.po*4*nf]
				k.fm.mask(m, convMaskKey(k.seed, k.stream, g0+i, l), k.thr)
				convWindows(ly, func(wi int, c, q [4]int) {
					mw := m[wi*4*nf:]
					k.fm.maskedPool(out[wi*nf:(wi+1)*nf], arg[wi*nf:(wi+1)*nf],
						zi[c[0]*nf:(c[0]+1)*nf], zi[c[1]*nf:(c[1]+1)*nf], zi[c[2]*nf:(c[2]+1)*nf], zi[c[3]*nf:(c[3]+1)*nf],
						mw[q[0]*nf:(q[0]+1)*nf], mw[q[1]*nf:(q[1]+1)*nf], mw[q[2]*nf:(q[2]+1)*nf], mw[q[3]*nf:(q[3]+1)*nf])
				})
			}
		}
	}
	od := k.ls[L-1].po * nf
	k.fm.toF64(j.out[lo*od:], od, k.act[L][lo*od:], od, hi-lo, od)
}

// convBackward runs the backward pass of the images of one chunk into the
// chunk's weight-gradient partials.
type convBackward[F convFloat] struct {
	k    *convCore[F]
	gOut []float64
}

func (j *convBackward[F]) run(ci int) {
	k := j.k
	sc := k.scratch()
	defer k.release(sc)
	lo, hi := k.chunks[ci][0], k.chunks[ci][1]
	nf, L := k.spec.Filters, len(k.ls)
	od := k.ls[L-1].po * nf
	// gin is the gradient w.r.t. the output of the current block, gout
	// becomes the one w.r.t. its input (the previous block's output).
	gin, gout := sc.gA, sc.gB
	k.fm.fromF64(gin, od, j.gOut[lo*od:], od, hi-lo, od)
	part := k.part[ci]
	for l := L - 1; l >= 0; l-- {
		ly := k.ls[l]
		gw := part[k.partOff[l]:k.partOff[l+1]]
		if ly.wino {
			clear(gw[16*ly.cin*nf:]) // the bias gradient is accumulated
		}
		for g0 := lo; g0 < hi; g0 += ly.group {
			g1 := min(g0+ly.group, hi)
			var beta F
			if g0 > lo {
				beta = 1
			}
			if ly.wino {
				k.backwardWino(l, lo, g0, g1, gin, gout, gw, beta, sc)
				continue
			}
			n, rows := g1-g0, (g1-g0)*ly.p
			// dz: the gradient w.r.t. the pre-activation, non-zero only at
			// each window's maximum where it was positive.
			dz := sc.z[:rows*nf]
			for i := 0; i < n; i++ {
				di := dz[i*ly.p*nf : (i+1)*ly.p*nf]
				if 2*ly.ho < ly.h || 2*ly.wo < ly.w {
					clear(di) // floor pooling: cells in no window get no gradient
				}
				o := (g0 + i) * ly.po * nf
				gi := gin[(g0-lo+i)*ly.po*nf:][:ly.po*nf]
				out, arg := k.act[l+1][o:o+ly.po*nf], k.arg[l][o:o+ly.po*nf]
				convWindows(ly, func(wi int, c, _ [4]int) {
					k.fm.unpool(di[c[0]*nf:(c[0]+1)*nf], di[c[1]*nf:(c[1]+1)*nf], di[c[2]*nf:(c[2]+1)*nf], di[c[3]*nf:(c[3]+1)*nf],
						gi[wi*nf:(wi+1)*nf], out[wi*nf:(wi+1)*nf], arg[wi*nf:(wi+1)*nf], k.alpha)
				})
			}
			convIm2col(sc.col, ly.k1, k.act[l][g0*ly.p*ly.cin:g1*ly.p*ly.cin], n, ly.h, ly.w, ly.cin, true)
			// Weight and (through the column of ones) bias gradients.
			k.fm.gemm(&sc.ws, true, false, ly.k1, nf, rows, 1, sc.col, ly.k1, dz, nf, beta, gw, nf, false)
			if l > 0 {
				convIm2col(sc.col, 9*nf, dz, n, ly.h, ly.w, nf, false)
				k.fm.gemm(&sc.ws, false, false, rows, ly.cin, 9*nf, 1, sc.col, 9*nf, k.wrot[l], ly.cin, 0,
					gout[(g0-lo)*ly.p*ly.cin:], ly.cin, false)
			}
		}
		gin, gout = gout, gin
	}
}

// convReduce sums the chunk partials of a unit of one block's gradient in
// chunk order and writes them in the caller's layout.
type convReduce[F convFloat] struct {
	k        *convCore[F]
	gws, gbs [][]float64
}

func (j *convReduce[F]) run(u int) {
	k := j.k
	l, r0, r1 := k.units[u][0], k.units[u][1], k.units[u][2]
	if k.ls[l].wino {
		k.reduceWino(l, r0, r1, j.gws[l], j.gbs[l], k.sums[u])
		return
	}
	ly, nf := k.ls[l], k.spec.Filters
	cin := ly.cin
	acc := k.sums[u]
	for r := r0; r < r1; r++ {
		for f0 := 0; f0 < nf; f0 += len(acc) {
			f1 := min(f0+len(acc), nf)
			a := acc[:f1-f0]
			k.sumParts(a, k.partOff[l]+r*nf+f0)
			if r == ly.k1-1 {
				copy(j.gbs[l][f0:f1], a)
				continue
			}
			tap, c := r/cin, r%cin
			for i, v := range a {
				j.gws[l][(f0+i)*9*cin+c*9+tap] = v
			}
		}
	}
}

// sumParts sets dst to the sum over chunks, in chunk order, of the
// partials at off.
func (k *convCore[F]) sumParts(dst []float64, off int) {
	clear(dst)
	for _, p := range k.part {
		k.fm.addF64(dst, p[off:off+len(dst)])
	}
}

func (k *convCore[F]) forward(N int, x []float64, ws, bs [][]float64, out []float64) {
	k.resize(N)
	k.jSetup = convSetup[F]{k: k, ws: ws, bs: bs}
	k.pool.parallel(len(k.ls), false, &k.jSetup)
	k.jFwd = convForward[F]{k: k, x: x, out: out}
	k.pool.parallel(len(k.chunks), false, &k.jFwd)
	k.jSetup, k.jFwd = convSetup[F]{}, convForward[F]{} // drop the caller's slices
}

func (k *convCore[F]) backward(gOut []float64, gws, gbs [][]float64) {
	k.jBwd = convBackward[F]{k: k, gOut: gOut}
	// Chunks in reverse order: the last ones forward are still in cache.
	k.pool.parallel(len(k.chunks), true, &k.jBwd)
	k.jReduce = convReduce[F]{k: k, gws: gws, gbs: gbs}
	k.pool.parallel(len(k.units), false, &k.jReduce)
	k.jBwd, k.jReduce = convBackward[F]{}, convReduce[F]{}
}

// convImpl is a convCore of either precision.
type convImpl interface {
	forward(N int, x []float64, ws, bs [][]float64, out []float64)
	backward(gOut []float64, gws, gbs [][]float64)
	setStep(seed, stream uint64, train bool, keep float64)
}

func (k *convCore[F]) setStep(seed, stream uint64, train bool, keep float64) {
	k.seed, k.stream, k.train = seed, stream, train && keep < 1
	k.alpha, k.thr = 1, 1<<32
	if k.train {
		k.alpha = F(1 / keep)
		k.thr = uint64(keep * (1 << 32))
	}
}

// ConvKernel evaluates a ConvSpec network on plain float64 slices, keeping
// what Backward needs (each block's pooled output and the position of each
// window's maximum). It computes in float32 with internal/sgemm's AVX2+FMA
// kernels where the CPU has them: blocks with at least 16 input channels
// by Winograd F(2×2, 3×3) (16 products over the channels per tile, the
// output transform fused with bias, ReLU, dropout and pooling), the first
// block of an image by im2col and one product; images are split into 8
// chunks that the cores share. Outputs and gradients agree with a float64
// evaluation to ~1e-6 relative and are bit-identical for any GOMAXPROCS.
// Buffers are sized on the first pass for a batch size and then reused, so
// later passes allocate nothing. A ConvKernel is not safe for concurrent
// use.
type ConvKernel struct {
	spec ConvSpec
	// stream separates the dropout masks of kernels that share seeds (the
	// ops of one ConvNet).
	stream uint64
	// f64 makes the next Forward (and its Backward) run in float64, for
	// tests that check gradients by finite differences; path, if not
	// convPathAuto, forces how blocks are computed (set both before the first
	// Forward).
	f64  bool
	path convPath
	c32  *convCore[float32]
	c64  *convCore[float64]
	cur  convImpl

	N                int
	fwdDone, bwdDone bool
}

// NewConvKernel returns a kernel for spec.
func NewConvKernel(spec ConvSpec) (*ConvKernel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &ConvKernel{spec: spec}, nil
}

// Spec returns the kernel's spec.
func (k *ConvKernel) Spec() ConvSpec { return k.spec }

// Forward computes the features of N images x (N×InDim) with weights ws
// and biases bs (one per block, layouts in ConvSpec) into out (N×OutDim).
// With train, dropout masks are drawn from seed (the same seed and batch
// position give the same masks); without, no dropout. Inputs are converted
// on entry and not kept.
func (k *ConvKernel) Forward(N int, x []float64, ws, bs [][]float64, seed uint64, train bool, out []float64) error {
	s := k.spec
	if err := k.check(N, ws, bs); err != nil {
		return err
	}
	switch {
	case len(x) != N*s.InDim():
		return fmt.Errorf("conv: x has %d values, want N·InDim = %d", len(x), N*s.InDim())
	case len(out) != N*s.OutDim():
		return fmt.Errorf("conv: out has %d values, want N·OutDim = %d", len(out), N*s.OutDim())
	}
	if k.f64 {
		if k.c64 == nil {
			k.c64 = newConvCore(s, &convMath64, k.path)
		}
		k.cur = k.c64
	} else {
		if k.c32 == nil {
			k.c32 = newConvCore(s, &convMath32, k.path)
		}
		k.cur = k.c32
	}
	k.cur.setStep(seed, k.stream, train, s.Keep)
	k.cur.forward(N, x, ws, bs, out)
	k.N, k.fwdDone, k.bwdDone = N, true, false
	return nil
}

func (k *ConvKernel) check(N int, ws, bs [][]float64) error {
	s := k.spec
	if N < 1 {
		return fmt.Errorf("conv: %d images, want ≥ 1", N)
	}
	if len(ws) != s.Blocks || len(bs) != s.Blocks {
		return fmt.Errorf("conv: %d weights and %d biases, want %d of each", len(ws), len(bs), s.Blocks)
	}
	for l := range ws {
		if len(ws[l]) != s.Filters*s.FanIn(l) {
			return fmt.Errorf("conv: block %d weights have %d values, want %d×%d", l, len(ws[l]), s.Filters, s.FanIn(l))
		}
		if len(bs[l]) != s.Filters {
			return fmt.Errorf("conv: block %d bias has %d values, want %d", l, len(bs[l]), s.Filters)
		}
	}
	return nil
}

// errConvNoForward reports a Backward without a Forward to differentiate.
var errConvNoForward = errors.New("conv: Backward before Forward")

// Backward propagates gOut (N×OutDim, the gradient of a loss w.r.t. the
// output of the last Forward) and overwrites gws and gbs with the loss
// gradients w.r.t. the weights and biases of that Forward.
func (k *ConvKernel) Backward(gOut []float64, gws, gbs [][]float64) error {
	if !k.fwdDone {
		return errConvNoForward
	}
	if err := k.check(k.N, gws, gbs); err != nil {
		return err
	}
	if len(gOut) != k.N*k.spec.OutDim() {
		return fmt.Errorf("conv: output gradient has %d values, want %d", len(gOut), k.N*k.spec.OutDim())
	}
	k.cur.backward(gOut, gws, gbs)
	k.bwdDone = true
	return nil
}

// InitConvParams fills the weights and biases of a spec's blocks as
// PyTorch initializes a Conv2d: every value uniform in ±1/√fanIn (its
// kaiming_uniform with a = √5 for the weights, the same bound for the
// biases).
func InitConvParams(spec ConvSpec, rng *rand.Rand, ws, bs [][]float64) {
	for l := range ws {
		bound := 1 / math.Sqrt(float64(spec.FanIn(l)))
		for i := range ws[l] {
			ws[l][i] = bound * (2*rng.Float64() - 1)
		}
		for i := range bs[l] {
			bs[l][i] = bound * (2*rng.Float64() - 1)
		}
	}
}
