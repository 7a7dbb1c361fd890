package ops

import (
	"errors"
	"fmt"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/opencl"
)

// convScratch is the working memory of one goroutine in a pass.
type convScratch[F float] struct {
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
type convCore[F float] struct {
	spec ConvSpec
	ls   []convLayer
	fm   *convMath[F]
	team *team

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

func newConvCore[F float](p *Pool, spec ConvSpec, fm *convMath[F], path convPath) *convCore[F] {
	k := &convCore[F]{spec: spec, ls: spec.layers(), fm: fm}
	k.team = newTeam(p, k)
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
			k.u[l] = alignedAlloc[F](16 * ly.cin * nf)
			k.ut[l] = alignedAlloc[F](16 * nf * ly.cin)
			k.bias[l] = alignedAlloc[F](nf)
			// Units of 8 channels keep both cores busy on the reduction.
			for c := 0; c < ly.cin; c += 8 {
				k.units = append(k.units, [3]int{l, c, min(c+8, ly.cin)})
			}
		} else {
			ly.group = max(1, convGroupRows/ly.p)
			ly.part = ly.k1 * nf
			k.wt[l] = alignedAlloc[F](ly.k1 * nf)
			if l > 0 {
				k.wrot[l] = alignedAlloc[F](9 * nf * ly.cin)
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
		k.act[l] = alignedAlloc[F](N * ly.p * ly.cin)
		k.arg[l] = make([]uint8, N*ly.po*nf)
	}
	k.act[L] = alignedAlloc[F](N * k.ls[L-1].po * nf)
	k.part = make([][]F, nc)
	for ci := range k.part {
		k.part[ci] = alignedAlloc[F](k.partOff[L])
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
	return &convScratch[F]{col: alignedAlloc[F](col), z: alignedAlloc[F](z), mask: alignedAlloc[F](mask),
		gA: alignedAlloc[F](g), gB: alignedAlloc[F](g), wv: alignedAlloc[F](wv), wm: alignedAlloc[F](wm), pad: alignedAlloc[F](pad)}
}

func (k *convCore[F]) release(sc *convScratch[F]) {
	select {
	case k.free <- sc:
	default:
	}
}

// convSetup converts the weights of one block to working precision.
type convSetup[F float] struct {
	k      *convCore[F]
	ws, bs [][]float64
}

func (j *convSetup[F]) run(l int) {
	k := j.k
	if k.ls[l].wino {
		k.setupWino(l, j.ws[l], j.bs[l])
		return
	}
	convPackIm2col(k.wt[l], k.wrot[l], j.ws[l], j.bs[l], k.ls[l].cin, k.spec.Filters)
}

// convPackIm2col writes a block's weights w and bias b in the layouts of
// its im2col products, in working precision: wt ((9·cin+1)×F, row
// tap·cin + c holding W[·][c·9 + tap], the last row the bias) and, unless
// wrot is nil (block 0, whose input needs no gradient), the filters of the
// input gradient.
func convPackIm2col[F float](wt, wrot []F, w, b []float64, cin, nf int) {
	k1 := 9*cin + 1
	for f := 0; f < nf; f++ {
		for c := 0; c < cin; c++ {
			for tap := 0; tap < 9; tap++ {
				wt[(tap*cin+c)*nf+f] = F(w[f*9*cin+c*9+tap])
			}
		}
		wt[(k1-1)*nf+f] = F(b[f])
	}
	if wrot == nil {
		return
	}
	// The input gradient is a convolution of the pre-activation gradient
	// with the filters turned by 180° and transposed (input and output
	// channels swapped): wrot[(tap·F + f)·cin + c] = W[f][c·9 + 8 − tap].
	for tap := 0; tap < 9; tap++ {
		for f := 0; f < nf; f++ {
			row := wrot[(tap*nf+f)*cin : (tap*nf+f+1)*cin]
			for c := range row {
				row[c] = F(w[f*9*cin+c*9+8-tap])
			}
		}
	}
}

// convForward runs the forward pass of the images of one chunk.
type convForward[F float] struct {
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
type convBackward[F float] struct {
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
type convReduce[F float] struct {
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
	k.team.parallel(len(k.ls), false, &k.jSetup)
	k.jFwd = convForward[F]{k: k, x: x, out: out}
	k.team.parallel(len(k.chunks), false, &k.jFwd)
	k.jSetup, k.jFwd = convSetup[F]{}, convForward[F]{} // drop the caller's slices
}

func (k *convCore[F]) backward(gOut []float64, gws, gbs [][]float64) {
	k.jBwd = convBackward[F]{k: k, gOut: gOut}
	// Chunks in reverse order: the last ones forward are still in cache.
	k.team.parallel(len(k.chunks), true, &k.jBwd)
	k.jReduce = convReduce[F]{k: k, gws: gws, gbs: gbs}
	k.team.parallel(len(k.units), false, &k.jReduce)
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
// (or AVX-512, the same bytes) kernels where the CPU has them: blocks with at least 16 input channels
// by Winograd F(2×2, 3×3) (16 products over the channels per tile, the
// output transform fused with bias, ReLU, dropout and pooling), the first
// block of an image by im2col and one product; images are split into 8
// chunks that the cores share. Outputs and gradients agree with a float64
// evaluation to ~1e-6 relative and are bit-identical for any GOMAXPROCS.
// When its pool has an OpenCL device, the kernel runs there instead
// (convDev, in float32: agreeing with the CPU within ~1e-6, equal bytes
// run after run on one device), unless a test forces float64 or a path.
// Buffers are sized on the first pass for a batch size and then reused, so
// later passes allocate nothing. A ConvKernel is not safe for concurrent
// use.
type ConvKernel struct {
	spec ConvSpec
	pool *Pool
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
	// device is the pool's device when the kernel was made (nil: the CPU),
	// and dev the core that runs there (conv_dev.go).
	device *opencl.Device
	dev    *convDev
	cur    convImpl

	N                int
	fwdDone, bwdDone bool
}

// NewConvKernel returns a kernel for spec whose passes spread their chunks
// over p's workers.
func NewConvKernel(p *Pool, spec ConvSpec) (*ConvKernel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &ConvKernel{spec: spec, pool: p, device: p.Device()}, nil
}

// UseFloat64 makes the following passes run in float64 (the same code,
// with blas64 and plain Go for the float32 kernels): slower, and exact
// enough for finite-difference checks of the gradients.
func (k *ConvKernel) UseFloat64() { k.f64 = true }

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
	switch {
	case k.f64:
		if k.c64 == nil {
			k.c64 = newConvCore(k.pool, s, &convMath64, k.path)
		}
		k.cur = k.c64
	case k.path == convPathAuto && k.device != nil:
		if k.dev == nil {
			d, err := newConvDev(k.device, s)
			if err != nil {
				return err
			}
			k.dev = d
		}
		k.shareDevice()
		k.cur = k.dev
	default:
		if k.c32 == nil {
			k.c32 = newConvCore(k.pool, s, &convMath32, k.path)
		}
		k.cur = k.c32
	}
	k.cur.setStep(seed, k.stream, train, s.Keep)
	k.cur.forward(N, x, ws, bs, out)
	if err := convFailed(k.cur); err != nil {
		k.fwdDone = false
		return err
	}
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
	if err := convFailed(k.cur); err != nil {
		return err
	}
	k.bwdDone = true
	return nil
}
