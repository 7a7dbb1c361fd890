package engine

import (
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/internal/gemmcore"
	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// FlowSpec describes a stack of conditional affine coupling layers (RealNVP
// double coupling, conditioned on a per-task context vector).
//
// Layer k (0-based) splits the Dim coordinates into a first target set A and
// a second target set B: for even k, A = [0, ⌊Dim/2⌋) and B = [⌊Dim/2⌋, Dim);
// for odd k, A = even indices and B = odd indices. Coordinates are never
// permuted, so dimension j of every intermediate ω keeps its meaning. Each
// layer maps x to y by
//
//	y_A = x_A ⊙ exp(s1) + t1,  (s1, t1) = net1(x_B, h)
//	y_B = x_B ⊙ exp(s2) + t2,  (s2, t2) = net2(y_A, h)
//
// where net(x, h): hid = ReLU(W1ᵀx + Wcᵀh + b1), out = W2ᵀhid + b2,
// s = tanh(out[:m]), t = out[m:], m = |target|. Its log|det| is Σs1 + Σs2.
//
// Theta layout: for k = 0..Layers-1, the block of net1 then the block of
// net2; each block is, row-major and contiguous,
//
//	W1 (nIn × Hidden), Wc (Cond × Hidden), b1 (Hidden), W2 (Hidden × 2m), b2 (2m)
//
// with nIn = |other half| and m = |target half|. Row i of W1 weighs the i-th
// coordinate of the other half in increasing index order; columns [0, m) of
// W2 and b2 produce s and columns [m, 2m) produce t, column j of each for
// the j-th coordinate of the target half.
type FlowSpec struct {
	Layers int // K, number of coupling layers (each with two halves)
	Dim    int // d, dimension of ω
	Cond   int // c, dimension of the context vector h
	Hidden int // H, hidden width of each coupling network
}

// Validate reports whether the spec describes a flow the kernels support.
// Layers == 0 is rejected rather than treated as the identity: a model
// without a flow should use ω0 directly with log-det 0 and skip the op.
func (s FlowSpec) Validate() error {
	switch {
	case s.Layers < 1:
		return fmt.Errorf("flow: Layers = %d, want ≥ 1 (without a flow use ω0 itself, log-det 0)", s.Layers)
	case s.Dim < 2:
		return fmt.Errorf("flow: Dim = %d, want ≥ 2 (both coupling halves need a coordinate)", s.Dim)
	case s.Cond < 1:
		return fmt.Errorf("flow: Cond = %d, want ≥ 1", s.Cond)
	case s.Hidden < 1:
		return fmt.Errorf("flow: Hidden = %d, want ≥ 1", s.Hidden)
	}
	return nil
}

// flowHalf locates one coupling network inside theta.
type flowHalf struct {
	nIn, m             int // input width (other half) and target width
	w1, wc, b1, w2, b2 int // offsets into theta
	end                int
}

// flowLayer holds the partition of one layer and its two networks: h[0]
// updates the coordinates in a from those in b, h[1] then updates b from the
// new a. va and vb locate a and b as rows of a feature-major matrix.
type flowLayer struct {
	a, b   []int
	va, vb flowRows
	h      [2]flowHalf
}

func (s FlowSpec) layout() []flowLayer {
	layers := make([]flowLayer, s.Layers)
	off := 0
	half := func(nIn, m int) flowHalf {
		h := flowHalf{nIn: nIn, m: m, w1: off}
		h.wc = h.w1 + nIn*s.Hidden
		h.b1 = h.wc + s.Cond*s.Hidden
		h.w2 = h.b1 + s.Hidden
		h.b2 = h.w2 + s.Hidden*2*m
		h.end = h.b2 + 2*m
		off = h.end
		return h
	}
	for k := range layers {
		var a, b []int
		if k%2 == 0 {
			for j := 0; j < s.Dim; j++ {
				if j < s.Dim/2 {
					a = append(a, j)
				} else {
					b = append(b, j)
				}
			}
		} else {
			for j := 0; j < s.Dim; j++ {
				if j%2 == 0 {
					a = append(a, j)
				} else {
					b = append(b, j)
				}
			}
		}
		l := &layers[k]
		l.a, l.b = a, b
		l.va, l.vb = flowRows{0, 1}, flowRows{len(a), 1}
		if k%2 == 1 {
			l.va, l.vb = flowRows{0, 2}, flowRows{1, 2}
		}
		l.h[0] = half(len(b), len(a))
		l.h[1] = half(len(a), len(b))
	}
	return layers
}

// NumParams returns the length of theta.
func (s FlowSpec) NumParams() int {
	if s.Layers <= 0 {
		return 0
	}
	// Per layer the two halves together hold W1: d·H, Wc: 2·c·H, b1: 2·H,
	// W2: 2·d·H, b2: 2·d.
	return s.Layers * (3*s.Dim*s.Hidden + 2*s.Cond*s.Hidden + 2*s.Hidden + 2*s.Dim)
}

// Init fills theta (len NumParams) for a near-identity start: W1 and Wc are
// He-normal over the joint fan-in nIn+Cond of the hidden pre-activation,
// b1 = 0, W2 ~ N(0, 0.01²) and b2 = 0, so s and t start small. Not exactly
// zero: with W2 = 0 the first Adam steps move every output weight of a
// coupling net in the same direction (the ReLU activations are all ≥ 0, so
// all of ∂L/∂W2's signs agree), t jumps by O(1) within a few steps and the
// sine model never recovered (measured: loss stuck at 4 after 2,000
// iterations, against 0.16 after 1,200 with this init).
func (s FlowSpec) Init(rng *rand.Rand, theta []float64) {
	if len(theta) != s.NumParams() {
		panic(fmt.Sprintf("flow: Init got %d parameters, want %d", len(theta), s.NumParams()))
	}
	for _, l := range s.layout() {
		for _, h := range l.h {
			std := math.Sqrt(2 / float64(h.nIn+s.Cond))
			for i := h.w1; i < h.b1; i++ {
				theta[i] = std * rng.NormFloat64()
			}
			for i := h.b1; i < h.w2; i++ {
				theta[i] = 0
			}
			for i := h.w2; i < h.b2; i++ {
				theta[i] = 0.01 * rng.NormFloat64()
			}
			for i := h.b2; i < h.end; i++ {
				theta[i] = 0
			}
		}
	}
}

// flowChunks is the fixed number of task chunks the work is split into.
// Parameter gradients are summed per chunk and then over chunks in order,
// so the result never depends on how many cores run the chunks; 4 keeps
// two cores balanced while the partial buffers stay small.
const flowChunks = 4

// flowRows views the rows of a feature-major D-column matrix that belong to
// one half of a partition: row j of the view is row row0 + j·step.
type flowRows struct{ row0, step int }

func (v flowRows) of(D int) (off, ld int) { return v.row0 * D, v.step * D }

// flowFloat is the working precision of a flow kernel. The op's inputs and
// outputs are float64 either way; production runs in float32 (AVX2 GEMM and
// fast element-wise kernels from internal/sgemm), while float64 runs the
// same code through gonum and the math package so that finite-difference
// tests can check it to ~1e-7.
type flowFloat interface{ float32 | float64 }

// flowMath is the precision-specific part of the kernels.
type flowMath[F flowFloat] struct {
	// gemm computes C = op(A)·op(B) + beta·C, then the epilogue; serial.
	gemm func(ws *sgemm.Workspace, tA, tB bool, m, n, k int, a []F, lda int, b []F, ldb int, beta F, c []F, ldc int, ep gemmcore.Epilogue[F])
	// coupling: s = tanh(o), e = exp(s), y = x·e + t, ld += s (per
	// element); e is not kept.
	coupling func(y, x, o, t, s, ld []F)
	// couplingGrad: with e = exp(s) recomputed as coupling computed it,
	// gs = (g·x·e + gl)(1 − s²), gt = g, g = g·e.
	couplingGrad func(gs, gt, g, x, s, gl []F)
	// addRowSums adds the row sums of a rows×cols matrix (stride ld) to dst.
	addRowSums func(dst, src []F, rows, cols, ld int)
	// transpose writes the transpose of a rows×cols matrix.
	transpose func(dst []F, ldd int, src []F, lds, rows, cols int)
	// fromF64 and toF64 convert a rows×cols matrix from and to float64.
	fromF64 func(dst []F, ldd int, src []float64, lds, rows, cols int)
	toF64   func(dst []float64, ldd int, src []F, lds, rows, cols int)
}

var flowMath32 = flowMath[float32]{
	gemm: func(ws *sgemm.Workspace, tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep gemmcore.Epilogue[float32]) {
		ws.GemmEpilogue(tA, tB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc,
			sgemm.Epilogue(ep))
	},
	coupling:     sgemm.AffineCoupling,
	couplingGrad: sgemm.AffineCouplingGrad,
	addRowSums:   sgemm.AddRowSums,
	transpose:    sgemm.Transpose,
	fromF64:      sgemm.ToFloat32,
	toF64:        sgemm.ToFloat64,
}

var flowMath64 = flowMath[float64]{
	gemm: func(_ *sgemm.Workspace, tA, tB bool, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, ep gemmcore.Epilogue[float64]) {
		dgemm.GemmEpilogue(tA, tB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc,
			dgemm.Epilogue(ep))
	},
	coupling: func(y, x, o, t, s, ld []float64) {
		for r := range y {
			sv := math.Tanh(o[r])
			ev := math.Exp(sv)
			s[r] = sv
			y[r] = x[r]*ev + t[r]
			ld[r] += sv
		}
	},
	couplingGrad: func(gs, gt, g, x, s, gl []float64) {
		for r, gv := range g {
			sv := s[r]
			ev := math.Exp(sv)
			gs[r] = (gv*x[r]*ev + gl[r]) * (1 - sv*sv)
			gt[r] = gv
			g[r] = gv * ev
		}
	},
	addRowSums: func(dst, src []float64, rows, cols, ld int) {
		for i := 0; i < rows; i++ {
			s := 0.0
			for _, v := range src[i*ld : i*ld+cols] {
				s += v
			}
			dst[i] += s
		}
	},
	transpose: flowTranspose[float64],
	fromF64:   flowCopyRows,
	toF64:     flowCopyRows,
}

func flowCopyRows(dst []float64, ldd int, src []float64, lds, rows, cols int) {
	for i := 0; i < rows; i++ {
		copy(dst[i*ldd:i*ldd+cols], src[i*lds:i*lds+cols])
	}
}

// flowTask is the forward cache of one task. Everything is stored
// feature-major (one row of D samples per feature) so that every product
// runs along the long sample axis and the coupling halves are plain strided
// row views: no gathering or scattering between layers.
//
// The hidden activations and exp(s) are not cached: the backward pass
// recomputes them (hid with one product with K = nIn, +11% flops at the
// engine's size). Caching them would take the cache from 180 KB to 770 KB
// per task at the realistic size (19 MB per pass), and writing that out and
// reading it back through L3 and memory costs more than recomputing it in
// L2 (measured: the products reading a cached hid ran at ~66 GFLOP/s, at
// ~105 with the recomputed one).
type flowTask[F flowFloat] struct {
	w [][]F    // ω_0..ω_K, each Dim×D
	s [][2][]F // per layer and half: m×D tanh scales
}

// flowScratch is per-chunk working memory; a chunk is processed by one
// goroutine at a time.
type flowScratch[F flowFloat] struct {
	ws     sgemm.Workspace // packing buffers of the float32 products
	ld, gl []F             // D
	out    []F             // 2m×D network output (forward) or its gradient
	hid    []F             // H×D hidden activations of the current half
	ghid   []F             // H×D
	gw     []F             // Dim×D gradient w.r.t. the current ω
	rows   []F             // D×(Dim+1) sample-major staging for conversions
}

// flowCore holds the state of a kernel in working precision F. Half q =
// 2·layer + i of the flow owns column block q (H wide) of the context
// matrices, so that one product computes the context terms of all halves.
type flowCore[F flowFloat] struct {
	fm     *flowMath[F]
	spec   flowSpecInfo
	T, D   int
	chunks [][2]int

	th    []F   // theta converted to F (W1, b1, W2, b2 blocks; theta layout)
	wcAll []F   // Cond × NH: Wc of half q in columns q·H…q·H+H-1
	condF []F   // T×Cond
	ctx   []F   // T × NH: Wcᵀh_t + b1 of every half
	gctx  []F   // T × NH: gradient w.r.t. ctx
	gWc   []F   // Cond × NH: Wc gradient of every half
	gCond []F   // T×Cond
	w1t   [][]F // per half: W1ᵀ (H×nIn)
	w2t   [][]F // per half: W2ᵀ (2m×H)
	tasks []flowTask[F]
	scr   []flowScratch[F]
	// part holds per chunk the W1, W2 and b2 gradients of every half, in
	// theta layout.
	part [][]F

	pool *flowPool
	// The parallel loop bodies live here, so that starting one allocates
	// nothing.
	jSetup  flowSetup[F]
	jFwd    flowForward[F]
	jBwd    flowBackward[F]
	jReduce flowReduce[F]
	jGemm   flowSplitGemm[F]
}

// flowSpecInfo is what a core needs of its kernel's spec.
type flowSpecInfo struct {
	FlowSpec
	layers []flowLayer
	nP     int
	nh     int // halves: 2·Layers
}

// flowImpl is a flowCore of either precision; inputs are validated by the
// FlowKernel.
type flowImpl interface {
	forward(T, D int, omega0, cond, theta, out []float64)
	backwardCore(gOut, gOmega0 []float64)
	gradTheta(gTheta []float64)
	gradCond(gCond []float64)
	steps(t int) [][]float64
}

// FlowKernel evaluates a conditional coupling flow on plain float64 slices,
// keeping the forward intermediates needed by Backward. It computes in
// float32 internally (products and element-wise kernels from
// internal/sgemm, AVX2+FMA assembly where the CPU has it): outputs and
// gradients agree with a float64 evaluation to ~1e-6 relative (normwise)
// and are bit-identical for any GOMAXPROCS. Buffers are sized on first use
// and reused, so passes after the first allocate nothing; a FlowKernel is
// not safe for concurrent use.
type FlowKernel struct {
	info flowSpecInfo

	// f64 makes the next Forward (and its Backward) run in float64, for
	// tests that check gradients by finite differences.
	f64 bool
	c32 *flowCore[float32]
	c64 *flowCore[float64]
	cur flowImpl // the core of the last Forward

	T, D        int
	cond, theta []float64 // inputs of the last Forward (not copied)
	fwdDone     bool
	bwdDone     bool
}

// NewFlowKernel returns a kernel for spec.
func NewFlowKernel(spec FlowSpec) (*FlowKernel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	info := flowSpecInfo{FlowSpec: spec, layers: spec.layout(), nP: spec.NumParams(), nh: 2 * spec.Layers}
	return &FlowKernel{info: info}, nil
}

// Spec returns the kernel's spec.
func (k *FlowKernel) Spec() FlowSpec { return k.info.FlowSpec }

func newFlowCore[F flowFloat](info flowSpecInfo, fm *flowMath[F]) *flowCore[F] {
	k := &flowCore[F]{fm: fm, spec: info, pool: newFlowPool()}
	runtime.AddCleanup(k, func(p *flowPool) { close(p.start) }, k.pool)
	H, c := info.Hidden, info.Cond
	k.th = flowAlloc[F](info.nP)
	k.wcAll = flowAlloc[F](c * info.nh * H)
	k.gWc = flowAlloc[F](c * info.nh * H)
	for _, L := range info.layers {
		for _, h := range L.h {
			k.w1t = append(k.w1t, flowAlloc[F](H*h.nIn))
			k.w2t = append(k.w2t, flowAlloc[F](2*h.m*H))
		}
	}
	return k
}

// flowAlloc returns n zeros starting on a 64-byte boundary: with D a
// multiple of 16 every row of D floats is then a whole number of cache
// lines, which the GEMM reads in place.
func flowAlloc[F flowFloat](n int) []F {
	var z F
	sz := int(unsafe.Sizeof(z))
	raw := make([]F, n+64/sz)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % 64); r != 0 {
		off = (64 - r) / sz
	}
	return raw[off : off+n : off+n]
}

func (k *flowCore[F]) resize(T, D int) {
	if T == k.T && D == k.D && k.scr != nil {
		return
	}
	k.T, k.D = T, D
	s := k.spec
	d, c, H, K, NH := s.Dim, s.Cond, s.Hidden, s.Layers, s.nh*s.Hidden
	nc := min(T, flowChunks)
	k.chunks = make([][2]int, nc)
	for ci := range k.chunks {
		k.chunks[ci] = [2]int{ci * T / nc, (ci + 1) * T / nc}
	}
	k.condF = flowAlloc[F](T * c)
	k.ctx = flowAlloc[F](T * NH)
	k.gctx = flowAlloc[F](T * NH)
	k.gCond = flowAlloc[F](T * c)
	// One slab per task keeps a task's cache contiguous for the core that
	// runs it.
	per := (K+1)*d*D + K*d*D
	k.tasks = make([]flowTask[F], T)
	for t := range k.tasks {
		slab := flowAlloc[F](per)
		take := func(n int) []F {
			b := slab[:n:n]
			slab = slab[n:]
			return b
		}
		ft := &k.tasks[t]
		ft.w = make([][]F, K+1)
		for j := range ft.w {
			ft.w[j] = take(d * D)
		}
		ft.s = make([][2][]F, K)
		for l := range s.layers {
			for i, h := range s.layers[l].h {
				ft.s[l][i] = take(h.m * D)
			}
		}
	}
	maxM := d - d/2
	k.scr = make([]flowScratch[F], nc)
	k.part = make([][]F, nc)
	for ci := range k.scr {
		k.scr[ci] = flowScratch[F]{
			ld: flowAlloc[F](D), gl: flowAlloc[F](D),
			out: flowAlloc[F](2 * maxM * D), hid: flowAlloc[F](H * D), ghid: flowAlloc[F](H * D), gw: flowAlloc[F](d * D),
			rows: flowAlloc[F](D * (d + 1)),
		}
		k.part[ci] = flowAlloc[F](s.nP)
	}
}

// flowJob is a parallel loop body; jobs are methods of long-lived values so
// that starting a loop allocates nothing but the helper goroutines.
type flowJob interface{ run(i int) }

// flowPool runs n jobs on min(GOMAXPROCS, n) goroutines that claim indices
// dynamically. That is safe for determinism because every job writes only
// memory of its own (a chunk's scratch, partials and task rows, or one
// half's parameter blocks). The helper goroutines are started on first need
// and then parked on start between loops, so a loop allocates nothing;
// they hold only the pool, and a cleanup on the owning core closes start
// (ending them) once the core is unreachable.
type flowPool struct {
	n       int
	rev     bool
	job     flowJob
	next    atomic.Int32
	wg      sync.WaitGroup
	start   chan struct{}
	helpers int
}

func newFlowPool() *flowPool { return &flowPool{start: make(chan struct{})} }

func (p *flowPool) work() {
	for {
		i := int(p.next.Add(1)) - 1
		if i >= p.n {
			return
		}
		if p.rev {
			i = p.n - 1 - i
		}
		p.job.run(i)
	}
}

func (p *flowPool) helper() {
	for range p.start {
		p.work()
		p.wg.Done()
	}
}

// parallel runs job.run(i) for i < n, in decreasing order of i if rev.
func (p *flowPool) parallel(n int, rev bool, job flowJob) {
	w := min(opWorkers(), n)
	p.n, p.rev, p.job = n, rev, job
	p.next.Store(0)
	for ; p.helpers < w-1; p.helpers++ {
		go p.helper()
	}
	p.wg.Add(w - 1)
	for i := 0; i < w-1; i++ {
		p.start <- struct{}{}
	}
	p.work()
	p.wg.Wait()
	p.job = nil
}

// flowGemm computes C = A·B + beta·C (A, B optionally transposed) in
// float64, for the finite-difference instantiation of the flow.
func flowGemm(tA, tB bool, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	dgemm.Gemm(tA, tB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
}

// flowTranspose writes the transpose of the r×c matrix src (row stride
// lds) into dst (row stride ldd).
func flowTranspose[F flowFloat](dst []F, ldd int, src []F, lds, r, c int) {
	for i := 0; i < r; i++ {
		row := src[i*lds : i*lds+c]
		for j, v := range row {
			dst[j*ldd+i] = v
		}
	}
}

// flowSplitGemm computes C = op(A)·B + beta·C (B stored as is if !tB, else
// transposed) as parts column blocks in parallel, each with its own
// workspace. The split points are fixed (multiples of 16 columns, the
// kernel's panel width), and each element is summed the same way in any
// part, so the result does not depend on the number of cores.
type flowSplitGemm[F flowFloat] struct {
	k             *flowCore[F]
	tA, tB        bool
	m, n, kk      int
	a, b, c       []F
	lda, ldb, ldc int
	beta          F
	parts         int
}

func (j *flowSplitGemm[F]) cols(i int) (lo, hi int) {
	per := (j.n/j.parts + 15) &^ 15
	return min(i*per, j.n), min((i+1)*per, j.n)
}

func (j *flowSplitGemm[F]) run(i int) {
	lo, hi := j.cols(i)
	if lo == hi {
		return
	}
	b := j.b[lo:]
	if j.tB {
		b = j.b[lo*j.ldb:]
	}
	j.k.fm.gemm(&j.k.scr[i].ws, j.tA, j.tB, j.m, hi-lo, j.kk, j.a, j.lda, b, j.ldb, j.beta, j.c[lo:], j.ldc, gemmcore.Epilogue[F]{})
}

// splitGemm runs a serial-phase product on up to two cores (see
// flowSplitGemm).
func (k *flowCore[F]) splitGemm(tA, tB bool, m, n, kk int, a []F, lda int, b []F, ldb int, beta F, c []F, ldc int) {
	k.jGemm = flowSplitGemm[F]{k: k, tA: tA, tB: tB, m: m, n: n, kk: kk, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc, parts: min(2, len(k.scr))}
	k.pool.parallel(k.jGemm.parts, false, &k.jGemm)
	k.jGemm = flowSplitGemm[F]{}
}

// core returns the core for the precision of the next Forward.
func (k *FlowKernel) core() flowImpl {
	if k.f64 {
		if k.c64 == nil {
			k.c64 = newFlowCore(k.info, &flowMath64)
		}
		return k.c64
	}
	if k.c32 == nil {
		k.c32 = newFlowCore(k.info, &flowMath32)
	}
	return k.c32
}

// Forward maps omega0 (T×D×Dim) through the flow conditioned on cond (T×Cond)
// with parameters theta (NumParams) and writes out (T×D×(Dim+1)): the last
// column of each row is the summed log|det| of that sample. cond and theta
// are kept by reference for Backward and must not change in between.
func (k *FlowKernel) Forward(T, D int, omega0, cond, theta, out []float64) error {
	s := k.info
	d, c := s.Dim, s.Cond
	switch {
	case T < 1 || D < 1:
		return fmt.Errorf("flow: T = %d, D = %d, want ≥ 1", T, D)
	case len(omega0) != T*D*d:
		return fmt.Errorf("flow: omega0 has %d values, want T·D·Dim = %d", len(omega0), T*D*d)
	case len(cond) != T*c:
		return fmt.Errorf("flow: cond has %d values, want T·Cond = %d", len(cond), T*c)
	case len(theta) != s.nP:
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), s.nP)
	case len(out) != T*D*(d+1):
		return fmt.Errorf("flow: out has %d values, want T·D·(Dim+1) = %d", len(out), T*D*(d+1))
	}
	k.cur = k.core()
	k.T, k.D = T, D
	k.cond, k.theta = cond, theta
	k.cur.forward(T, D, omega0, cond, theta, out)
	k.fwdDone, k.bwdDone = true, false
	return nil
}

// flowSetup converts theta for one half q and prepares its context terms
// and transposed weights.
type flowSetup[F flowFloat] struct {
	k     *flowCore[F]
	theta []float64
}

func (j *flowSetup[F]) run(q int) {
	k := j.k
	s := k.spec
	h := &s.layers[q/2].h[q%2]
	H, c, NH, m2 := s.Hidden, s.Cond, s.nh*s.Hidden, 2*h.m
	th := k.th
	for i := h.w1; i < h.wc; i++ {
		th[i] = F(j.theta[i])
	}
	for i := h.b1; i < h.end; i++ {
		th[i] = F(j.theta[i])
	}
	for r := 0; r < c; r++ {
		dst := k.wcAll[r*NH+q*H : r*NH+(q+1)*H]
		for u, v := range j.theta[h.wc+r*H : h.wc+(r+1)*H] {
			dst[u] = F(v)
		}
	}
	// ctx starts as b1 and receives Wcᵀh from one product over all halves.
	b1 := th[h.b1 : h.b1+H]
	for t := 0; t < k.T; t++ {
		copy(k.ctx[t*NH+q*H:t*NH+(q+1)*H], b1)
	}
	k.fm.transpose(k.w1t[q], h.nIn, th[h.w1:], H, h.nIn, H)
	k.fm.transpose(k.w2t[q], H, th[h.w2:], m2, H, m2)
}

// flowForward runs the forward pass of the tasks of one chunk.
type flowForward[F flowFloat] struct {
	k           *flowCore[F]
	omega0, out []float64
}

func (j *flowForward[F]) run(ci int) {
	k := j.k
	sc := &k.scr[ci]
	for t := k.chunks[ci][0]; t < k.chunks[ci][1]; t++ {
		k.forwardTask(t, sc, j.omega0, j.out)
	}
}

func (k *flowCore[F]) forward(T, D int, omega0, cond, theta, out []float64) {
	k.resize(T, D)
	s := k.spec
	c, NH := s.Cond, s.nh*s.Hidden
	for i, v := range cond {
		k.condF[i] = F(v)
	}
	k.jSetup = flowSetup[F]{k: k, theta: theta}
	k.pool.parallel(s.nh, false, &k.jSetup)
	k.splitGemm(false, false, T, NH, c, k.condF, c, k.wcAll, NH, 1, k.ctx, NH)
	k.jFwd = flowForward[F]{k: k, omega0: omega0, out: out}
	k.pool.parallel(len(k.chunks), false, &k.jFwd)
	k.jSetup, k.jFwd = flowSetup[F]{}, flowForward[F]{} // drop the caller's slices
}

// loadRows converts rows×cols of src (row stride lds, float64) into the
// feature-major dst (cols×rows, row stride rows), through the staging
// buffer st.
func (k *flowCore[F]) loadRows(dst []F, src []float64, lds, rows, cols int, st []F) {
	k.fm.fromF64(st, cols, src, lds, rows, cols)
	k.fm.transpose(dst, rows, st, cols, rows, cols)
}

// storeRows is the inverse of loadRows: the cols×rows feature-major src
// becomes rows×cols of dst (row stride ldd, float64).
func (k *flowCore[F]) storeRows(dst []float64, ldd int, src []F, rows, cols int, st []F) {
	k.fm.transpose(st, cols, src, rows, cols, rows)
	k.fm.toF64(dst, ldd, st, cols, rows, cols)
}

func (k *flowCore[F]) forwardTask(t int, sc *flowScratch[F], omega0, out []float64) {
	d, D := k.spec.Dim, k.D
	ft := &k.tasks[t]
	k.loadRows(ft.w[0], omega0[t*D*d:(t+1)*D*d], d, D, d, sc.rows)
	ld := sc.ld[:D]
	clear(ld)
	for l := range k.spec.layers {
		L := &k.spec.layers[l]
		in, nw := ft.w[l], ft.w[l+1]
		va, vb := L.va, L.vb
		// Half 1 writes the A rows of ω_{l+1} from the B rows of ω_l, half 2
		// its B rows from those new A rows: together every row.
		k.halfForward(l, 0, t, in, vb, in, va, nw, sc)
		k.halfForward(l, 1, t, nw, va, in, vb, nw, sc)
	}
	o := out[t*D*(d+1) : (t+1)*D*(d+1)]
	k.storeRows(o, d+1, ft.w[len(k.spec.layers)], D, d, sc.rows)
	for r, v := range ld {
		o[r*(d+1)+d] = float64(v)
	}
}

// halfForward applies coupling half i of layer l to task t: the target rows
// vt of y (feature-major) become x ⊙ exp(s) + t, with x the same rows of xin
// and (s, t) computed from rows vo of src. It caches s and adds Σs to the
// per-sample log-det.
func (k *flowCore[F]) halfForward(l, i, t int, src []F, vo flowRows, xin []F, vt flowRows, y []F, sc *flowScratch[F]) {
	s := k.spec
	h := &s.layers[l].h[i]
	ft := &k.tasks[t]
	D, H, m := k.D, s.Hidden, h.m
	m2 := 2 * m
	hid := k.hidden(l, i, t, src, vo, sc)
	// out = W2ᵀhid + b2.
	out := sc.out[:m2*D]
	k.fm.gemm(&sc.ws, true, false, m2, D, H, k.th[h.w2:], m2, hid, D, 0, out, D,
		gemmcore.Epilogue[F]{RowBias: k.th[h.b2 : h.b2+m2]})
	ot, ldt := vt.of(D)
	ss := ft.s[l][i]
	ld := sc.ld[:D]
	for j := 0; j < m; j++ {
		r := ot + j*ldt
		k.fm.coupling(y[r:r+D], xin[r:r+D], out[j*D:(j+1)*D], out[(m+j)*D:(m+j+1)*D],
			ss[j*D:(j+1)*D], ld)
	}
}

// hidden computes into sc.hid the hidden activations of coupling half i of
// layer l for task t, whose network reads rows vo of src: hid =
// ReLU(W1ᵀx + ctx_t). W1 (nIn×H) is op(A) transposed, read in place; the
// context term is a per-row bias and ReLU runs in the product's epilogue.
func (k *flowCore[F]) hidden(l, i, t int, src []F, vo flowRows, sc *flowScratch[F]) []F {
	s := k.spec
	h := &s.layers[l].h[i]
	q := 2*l + i
	D, H, NH := k.D, s.Hidden, s.nh*s.Hidden
	hid := sc.hid[:H*D]
	oo, ldo := vo.of(D)
	k.fm.gemm(&sc.ws, true, false, H, D, h.nIn, k.th[h.w1:], H, src[oo:], ldo, 0, hid, D,
		gemmcore.Epilogue[F]{RowBias: k.ctx[t*NH+q*H : t*NH+(q+1)*H], ReLU: true})
	return hid
}

// Backward propagates gOut (T×D×(Dim+1), the gradient of a loss w.r.t. the
// output of the last Forward) and overwrites gOmega0 (T×D×Dim), gCond
// (T×Cond) and gTheta (NumParams) with the loss gradients.
func (k *FlowKernel) Backward(gOut, gOmega0, gCond, gTheta []float64) error {
	if err := k.backwardCore(k.theta, gOut, gOmega0); err != nil {
		return err
	}
	if err := k.gradTheta(k.cond, gTheta); err != nil {
		return err
	}
	return k.gradCond(k.theta, gCond)
}

// backwardCore does the per-task work of Backward: it writes gOmega0 and
// leaves per-chunk parameter partials and the context gradients for
// gradTheta and gradCond. theta must hold the values of the matching
// Forward (the kernel computes with its own converted copy).
func (k *FlowKernel) backwardCore(theta, gOut, gOmega0 []float64) error {
	if !k.fwdDone {
		return fmt.Errorf("flow: Backward before Forward")
	}
	T, D, d := k.T, k.D, k.info.Dim
	switch {
	case len(theta) != k.info.nP:
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), k.info.nP)
	case len(gOut) != T*D*(d+1):
		return fmt.Errorf("flow: output gradient has %d values, want %d", len(gOut), T*D*(d+1))
	case len(gOmega0) != T*D*d:
		return fmt.Errorf("flow: omega0 gradient has %d values, want %d", len(gOmega0), T*D*d)
	}
	k.cur.backwardCore(gOut, gOmega0)
	k.bwdDone = true
	return nil
}

// flowBackward runs the backward pass of the tasks of one chunk.
type flowBackward[F flowFloat] struct {
	k             *flowCore[F]
	gOut, gOmega0 []float64
}

func (j *flowBackward[F]) run(ci int) {
	k := j.k
	p := k.part[ci]
	for l := range k.spec.layers {
		for _, h := range k.spec.layers[l].h {
			clear(p[h.w1:h.wc])
			clear(p[h.w2:h.end])
		}
	}
	sc := &k.scr[ci]
	for t := k.chunks[ci][1] - 1; t >= k.chunks[ci][0]; t-- {
		k.backwardTask(t, sc, p, j.gOut, j.gOmega0)
	}
}

func (k *flowCore[F]) backwardCore(gOut, gOmega0 []float64) {
	// Tasks run in the reverse of the forward order, so the most recently
	// written caches, still in the shared L3, are read first.
	k.jBwd = flowBackward[F]{k: k, gOut: gOut, gOmega0: gOmega0}
	k.pool.parallel(len(k.chunks), true, &k.jBwd)
	k.jBwd = flowBackward[F]{}
}

func (k *flowCore[F]) backwardTask(t int, sc *flowScratch[F], part []F, gOut, gOmega0 []float64) {
	d, D := k.spec.Dim, k.D
	ft := &k.tasks[t]
	gw := sc.gw
	g := gOut[t*D*(d+1) : (t+1)*D*(d+1)]
	k.loadRows(gw, g, d+1, D, d, sc.rows)
	gl := sc.gl[:D]
	for r := range gl {
		gl[r] = F(g[r*(d+1)+d])
	}
	// gw holds the gradient w.r.t. ω_{l+1} and is turned, in place, into the
	// gradient w.r.t. ω_l: each half overwrites its target rows with the
	// gradient w.r.t. its input x and adds into the rows it was computed from.
	for l := len(k.spec.layers) - 1; l >= 0; l-- {
		L := &k.spec.layers[l]
		in, nw := ft.w[l], ft.w[l+1]
		va, vb := L.va, L.vb
		k.halfBackward(l, 1, t, nw, va, in, vb, gw, part, sc)
		k.halfBackward(l, 0, t, in, vb, in, va, gw, part, sc)
	}
	k.storeRows(gOmega0[t*D*d:(t+1)*D*d], d, gw, D, d, sc.rows)
}

// halfBackward back-propagates coupling half i of layer l for task t. src
// rows vo fed its network and xin rows vt were its target input. In gw the
// target rows hold the gradient w.r.t. its output and are overwritten with
// the gradient w.r.t. its input; the gradient w.r.t. the network input is
// added to rows vo. Parameter gradients go to the chunk partial part, the
// context gradient to gctx.
func (k *flowCore[F]) halfBackward(l, i, t int, src []F, vo flowRows, xin []F, vt flowRows, gw []F, part []F, sc *flowScratch[F]) {
	s := k.spec
	h := &s.layers[l].h[i]
	q := 2*l + i
	ft := &k.tasks[t]
	D, H, m, NH := k.D, s.Hidden, h.m, s.nh*s.Hidden
	m2 := 2 * m
	ss := ft.s[l][i]
	gout := sc.out[:m2*D]
	gl := sc.gl[:D]
	ot, ldt := vt.of(D)
	for j := 0; j < m; j++ {
		r := ot + j*ldt
		k.fm.couplingGrad(gout[j*D:(j+1)*D], gout[(m+j)*D:(m+j+1)*D], gw[r:r+D], xin[r:r+D],
			ss[j*D:(j+1)*D], gl)
	}
	k.fm.addRowSums(part[h.b2:h.b2+m2], gout, m2, D, D)
	// The same product as in the forward pass, so the same bits.
	hid := k.hidden(l, i, t, src, vo, sc)
	// W2 gradient (H×2m) += hid·goutᵀ: hid is read in place, only the
	// smaller gout is transposed into panels.
	k.fm.gemm(&sc.ws, false, true, H, m2, D, hid, D, gout, D, 1, part[h.w2:], m2, gemmcore.Epilogue[F]{})
	// ghid = W2·gout where the ReLU was active (hid > 0), in the epilogue.
	ghid := sc.ghid[:H*D]
	k.fm.gemm(&sc.ws, true, false, H, D, m2, k.w2t[q], H, gout, D, 0, ghid, D, gemmcore.Epilogue[F]{Mask: hid, LdMask: D})
	gctx := k.gctx[t*NH+q*H : t*NH+(q+1)*H]
	clear(gctx)
	k.fm.addRowSums(gctx, ghid, H, D, D)
	oo, ldo := vo.of(D)
	// W1 gradient (nIn×H) += x·ghidᵀ, and the input gradient += W1·ghid.
	k.fm.gemm(&sc.ws, false, true, h.nIn, H, D, src[oo:], ldo, ghid, D, 1, part[h.w1:], H, gemmcore.Epilogue[F]{})
	k.fm.gemm(&sc.ws, true, false, h.nIn, D, H, k.w1t[q], h.nIn, ghid, D, 1, gw[oo:], ldo, gemmcore.Epilogue[F]{})
}

// gradTheta writes the parameter gradient of the last Backward into gTheta;
// cond must be the cond of the matching Forward.
func (k *FlowKernel) gradTheta(cond, gTheta []float64) error {
	if !k.bwdDone {
		return fmt.Errorf("flow: parameter gradient requested before Backward")
	}
	if len(gTheta) != k.info.nP {
		return fmt.Errorf("flow: theta gradient has %d values, want %d", len(gTheta), k.info.nP)
	}
	if len(cond) != k.T*k.info.Cond {
		return fmt.Errorf("flow: cond has %d values, want %d", len(cond), k.T*k.info.Cond)
	}
	k.cur.gradTheta(gTheta)
	return nil
}

// flowReduce assembles the theta gradient of one half q: the chunk
// partials summed in chunk order in float64, and the Wc and b1 gradients
// from the context gradient.
type flowReduce[F flowFloat] struct {
	k      *flowCore[F]
	gTheta []float64
}

func (j *flowReduce[F]) run(q int) {
	k, g := j.k, j.gTheta
	s := k.spec
	h := &s.layers[q/2].h[q%2]
	H, c, NH := s.Hidden, s.Cond, s.nh*s.Hidden
	sum := func(dst []float64, off int) {
		for i := range dst {
			dst[i] = float64(k.part[0][off+i])
		}
		for _, p := range k.part[1:] {
			for i, v := range p[off : off+len(dst)] {
				dst[i] += float64(v)
			}
		}
	}
	sum(g[h.w1:h.wc], h.w1)
	sum(g[h.w2:h.end], h.w2)
	for r := 0; r < c; r++ {
		for u, v := range k.gWc[r*NH+q*H : r*NH+(q+1)*H] {
			g[h.wc+r*H+u] = float64(v)
		}
	}
	gb := g[h.b1 : h.b1+H]
	clear(gb)
	for t := 0; t < k.T; t++ {
		for u, v := range k.gctx[t*NH+q*H : t*NH+(q+1)*H] {
			gb[u] += float64(v)
		}
	}
}

func (k *flowCore[F]) gradTheta(gTheta []float64) {
	s := k.spec
	c, NH := s.Cond, s.nh*s.Hidden
	// Wc gradients of all halves in one product: condᵀ·gctx (Cond×NH).
	k.splitGemm(true, false, c, NH, k.T, k.condF, c, k.gctx, NH, 0, k.gWc, NH)
	k.jReduce = flowReduce[F]{k: k, gTheta: gTheta}
	k.pool.parallel(s.nh, false, &k.jReduce)
	k.jReduce = flowReduce[F]{}
}

// gradCond writes the cond gradient of the last Backward into gCond; theta
// must be the theta of the matching Forward.
func (k *FlowKernel) gradCond(theta, gCond []float64) error {
	if !k.bwdDone {
		return fmt.Errorf("flow: cond gradient requested before Backward")
	}
	if len(gCond) != k.T*k.info.Cond {
		return fmt.Errorf("flow: cond gradient has %d values, want %d", len(gCond), k.T*k.info.Cond)
	}
	if len(theta) != k.info.nP {
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), k.info.nP)
	}
	k.cur.gradCond(gCond)
	return nil
}

func (k *flowCore[F]) gradCond(gCond []float64) {
	s := k.spec
	c, NH := s.Cond, s.nh*s.Hidden
	// Σ over halves of gctx_q·Wc_qᵀ is one product with K = NH.
	k.splitGemm(false, true, k.T, c, NH, k.gctx, NH, k.wcAll, NH, 0, k.gCond, c)
	for i, v := range k.gCond {
		gCond[i] = float64(v)
	}
}

// Steps returns, after a Forward, copies of ω for task t after steps
// 0..Layers (Layers+1 slices of D·Dim, row-major D×Dim), or nil if no
// Forward ran or t is out of range.
func (k *FlowKernel) Steps(t int) [][]float64 {
	if !k.fwdDone || t < 0 || t >= k.T {
		return nil
	}
	return k.cur.steps(t)
}

func (k *flowCore[F]) steps(t int) [][]float64 {
	D, d := k.D, k.spec.Dim
	steps := make([][]float64, len(k.spec.layers)+1)
	st := make([]F, D*d)
	for j, w := range k.tasks[t].w {
		steps[j] = make([]float64, D*d)
		k.storeRows(steps[j], d, w, D, d, st)
	}
	return steps
}

var (
	flowT1 = gorgonia.TensorType{Dims: 1, Of: gorgonia.Float64}
	flowT2 = gorgonia.TensorType{Dims: 2, Of: gorgonia.Float64}
	flowT3 = gorgonia.TensorType{Dims: 3, Of: gorgonia.Float64}
)

// FlowOp is the gorgonia op built by CouplingFlow. Besides the op interface it
// exposes the intermediate steps of the last forward run.
type FlowOp struct {
	id     uint64
	kern   *FlowKernel
	buf    []float64 // output storage reused by Do
	diffed bool
}

// CouplingFlow applies the conditional coupling flow described by spec:
// omega0 (T, D, Dim) are the D samples of ω per task, cond (T, Cond) the task
// contexts and theta (NumParams) the parameters (layout in FlowSpec). The
// result has shape (T, D, Dim+1): [..., :Dim] is ω_K and [..., Dim] is
// Σ_k log|det ∂ω_k/∂ω_{k-1}| for that sample. It is differentiable w.r.t.
// all three inputs (one backward pass per op). spec.Layers must be ≥ 1 (see
// FlowSpec.Validate).
//
// The op and its gradient nodes keep their caches and output storage
// between runs of a machine, so a run overwrites the values of the previous
// one: copy what must outlive the next run. Values are float64 only.
func CouplingFlow(omega0, cond, theta *gorgonia.Node, spec FlowSpec) (*gorgonia.Node, *FlowOp, error) {
	kern, err := NewFlowKernel(spec)
	if err != nil {
		return nil, nil, err
	}
	for _, in := range []struct {
		n    *gorgonia.Node
		name string
		dims int
	}{{omega0, "omega0", 3}, {cond, "cond", 2}, {theta, "theta", 1}} {
		if in.n == nil {
			return nil, nil, fmt.Errorf("flow: %s is nil", in.name)
		}
		if in.n.Dtype() != gorgonia.Float64 {
			return nil, nil, fmt.Errorf("flow: %s has dtype %v, want float64", in.name, in.n.Dtype())
		}
		if in.n.Shape().Dims() != in.dims {
			return nil, nil, fmt.Errorf("flow: %s has shape %v, want %d dimensions", in.name, in.n.Shape(), in.dims)
		}
	}
	so, sc, st := omega0.Shape(), cond.Shape(), theta.Shape()
	switch {
	case so[2] != spec.Dim:
		return nil, nil, fmt.Errorf("flow: omega0 has shape %v, want (T, D, %d)", so, spec.Dim)
	case sc[0] != so[0] || sc[1] != spec.Cond:
		return nil, nil, fmt.Errorf("flow: cond has shape %v, want (%d, %d)", sc, so[0], spec.Cond)
	case st[0] != spec.NumParams():
		return nil, nil, fmt.Errorf("flow: theta has shape %v, want (%d)", st, spec.NumParams())
	case so[0] < 1 || so[1] < 1:
		return nil, nil, fmt.Errorf("flow: omega0 has shape %v, want T, D ≥ 1", so)
	}
	op := &FlowOp{id: opSeq.Add(1), kern: kern}
	out, err := gorgonia.ApplyOp(op, omega0, cond, theta)
	if err != nil {
		return nil, nil, fmt.Errorf("flow: %w", err)
	}
	return out, op, nil
}

// Kernel returns the plain kernel the op runs; its caches describe the last
// run of the op.
func (op *FlowOp) Kernel() *FlowKernel { return op.kern }

// Steps returns, after a forward run, copies of ω for task t after steps
// 0..K (K+1 slices of D·Dim, row-major D×Dim); nil before any run.
func (op *FlowOp) Steps(t int) [][]float64 { return op.kern.Steps(t) }

// Arity implements gorgonia.Op.
func (op *FlowOp) Arity() int { return 3 }

// Type implements gorgonia.Op.
func (op *FlowOp) Type() hm.Type { return hm.NewFnType(flowT3, flowT2, flowT1, flowT3) }

// InferShape implements gorgonia.Op.
func (op *FlowOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("flow: got %d inputs, want 3", len(in))
	}
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", in[0])
	}
	return tensor.Shape{s[0], s[1], s[2] + 1}, nil
}

// Do implements gorgonia.Op.
func (op *FlowOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("flow: got %d inputs, want 3", len(in))
	}
	s := in[0].Shape()
	if len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", s)
	}
	shape := tensor.Shape{s[0], s[1], s[2] + 1}
	out, _ := ownedTensor(&op.buf, shape)
	return op.UsePreallocDo(out, in...)
}

// UsePreallocDo implements gorgonia.UsePreallocDoer. A prealloc of the wrong
// shape (the tape machine offers whatever its register last held) is
// refused with an error, on which the machine falls back to Do.
func (op *FlowOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("flow: got %d inputs, want 3", len(in))
	}
	s := in[0].Shape()
	if len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", s)
	}
	out, err := flowOutput(prealloc, tensor.Shape{s[0], s[1], s[2] + 1})
	if err != nil {
		return nil, err
	}
	omega0, err := flowData(in[0], "omega0")
	if err != nil {
		return nil, err
	}
	cond, err := flowData(in[1], "cond")
	if err != nil {
		return nil, err
	}
	theta, err := flowData(in[2], "theta")
	if err != nil {
		return nil, err
	}
	if err := op.kern.Forward(s[0], s[1], omega0, cond, theta, out.Float64s()); err != nil {
		return nil, err
	}
	return out, nil
}

// flowData returns the float64 data of v in row-major order.
func flowData(v gorgonia.Value, name string) ([]float64, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("flow: %s is a %T, want *tensor.Dense", name, v)
	}
	if d.Dtype() != tensor.Float64 {
		return nil, fmt.Errorf("flow: %s has dtype %v, want float64", name, d.Dtype())
	}
	if d.RequiresIterator() {
		m, ok := d.Materialize().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("flow: cannot materialize %s", name)
		}
		d = m
	}
	data := d.Float64s()
	if len(data) != d.Shape().TotalSize() {
		return nil, fmt.Errorf("flow: %s holds %d values for shape %v", name, len(data), d.Shape())
	}
	return data, nil
}

func flowOutput(prealloc gorgonia.Value, want tensor.Shape) (*tensor.Dense, error) {
	d, ok := prealloc.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float64 || !d.Shape().Eq(want) || d.RequiresIterator() || len(d.Float64s()) != want.TotalSize() {
		return nil, fmt.Errorf("flow: preallocated value %v unusable for shape %v", prealloc.Shape(), want)
	}
	return d, nil
}

// ReturnsPtr implements gorgonia.Op.
func (op *FlowOp) ReturnsPtr() bool { return false }

// CallsExtern implements gorgonia.Op.
func (op *FlowOp) CallsExtern() bool { return false }

// OverwritesInput implements gorgonia.Op.
func (op *FlowOp) OverwritesInput() int { return -1 }

// WriteHash implements gorgonia.Op; the instance id keeps gorgonia from
// merging two flows (each has its own caches) applied to the same inputs.
func (op *FlowOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }

// Hashcode implements gorgonia.Op.
func (op *FlowOp) Hashcode() uint32 { return flowHash(op) }

func (op *FlowOp) String() string {
	s := op.kern.info
	return fmt.Sprintf("CouplingFlow#%d{K=%d,d=%d,c=%d,H=%d}", op.id, s.Layers, s.Dim, s.Cond, s.Hidden)
}

func flowHash(op gorgonia.Op) uint32 {
	return opHash(op)
}

// DiffWRT implements gorgonia.SDOp.
func (op *FlowOp) DiffWRT(n int) []bool { return []bool{true, true, true} }

// SymDiff implements gorgonia.SDOp. One backward node does all the per-task
// work and yields the omega0 gradient; two light nodes that depend on it
// assemble the cond and theta gradients from its caches, so the dependency
// also orders them after it.
func (op *FlowOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("flow: SymDiff got %d inputs, want 3", len(inputs))
	}
	// The backward nodes share the kernel's gradient buffers, so a second
	// set could interleave with the first.
	if op.diffed {
		return nil, fmt.Errorf("flow: %v is already differentiated; it supports one backward pass", op)
	}
	op.diffed = true
	core, err := gorgonia.ApplyOp(&flowGradOp{op: op}, inputs[0], inputs[1], inputs[2], output, grad)
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	gCond, err := gorgonia.ApplyOp(&flowPartOp{op: op, theta: false}, core, inputs[2])
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	gTheta, err := gorgonia.ApplyOp(&flowPartOp{op: op, theta: true}, core, inputs[1])
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	return gorgonia.Nodes{core, gCond, gTheta}, nil
}

// flowGradOp maps (omega0, cond, theta, output, grad) to the omega0
// gradient, leaving the material for the other gradients in the kernel.
// Taking output as an input orders it after the forward run.
type flowGradOp struct {
	op  *FlowOp
	buf []float64
}

func (g *flowGradOp) Arity() int { return 5 }
func (g *flowGradOp) Type() hm.Type {
	return hm.NewFnType(flowT3, flowT2, flowT1, flowT3, flowT3, flowT3)
}
func (g *flowGradOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", in[0])
	}
	return s.Clone(), nil
}
func (g *flowGradOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 5 {
		return nil, fmt.Errorf("flow: gradient got %d inputs, want 5", len(in))
	}
	shape := in[0].Shape()
	out, _ := ownedTensor(&g.buf, shape)
	return g.UsePreallocDo(out, in...)
}
func (g *flowGradOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 5 {
		return nil, fmt.Errorf("flow: gradient got %d inputs, want 5", len(in))
	}
	out, err := flowOutput(prealloc, in[0].Shape())
	if err != nil {
		return nil, err
	}
	// The kernel computes with the copy of theta it converted in Forward
	// (the forward's reference is only known to be intact in the common
	// case where theta is a graph input); this node's input is checked.
	theta, err := flowData(in[2], "theta")
	if err != nil {
		return nil, err
	}
	gOut, err := flowData(in[4], "output gradient")
	if err != nil {
		return nil, err
	}
	if err := g.op.kern.backwardCore(theta, gOut, out.Float64s()); err != nil {
		return nil, err
	}
	return out, nil
}
func (g *flowGradOp) ReturnsPtr() bool      { return false }
func (g *flowGradOp) CallsExtern() bool     { return false }
func (g *flowGradOp) OverwritesInput() int  { return -1 }
func (g *flowGradOp) WriteHash(h hash.Hash) { fmt.Fprint(h, g.String()) }
func (g *flowGradOp) Hashcode() uint32      { return flowHash(g) }
func (g *flowGradOp) String() string        { return fmt.Sprintf("CouplingFlowGrad#%d", g.op.id) }
func (g *flowGradOp) DiffWRT(n int) []bool  { return make([]bool, n) }
func (g *flowGradOp) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, fmt.Errorf("flow: second derivatives are not implemented")
}

// flowPartOp assembles the theta gradient (inputs: core gradient, cond) or
// the cond gradient (inputs: core gradient, theta) after flowGradOp ran.
type flowPartOp struct {
	op    *FlowOp
	theta bool
	buf   []float64
}

func (p *flowPartOp) Arity() int { return 2 }
func (p *flowPartOp) Type() hm.Type {
	if p.theta {
		return hm.NewFnType(flowT3, flowT2, flowT1)
	}
	return hm.NewFnType(flowT3, flowT1, flowT2)
}
func (p *flowPartOp) shape(core tensor.Shape) tensor.Shape {
	if p.theta {
		return tensor.Shape{p.op.kern.info.nP}
	}
	return tensor.Shape{core[0], p.op.kern.info.Cond}
}
func (p *flowPartOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 3 {
		return nil, fmt.Errorf("flow: gradient shape %v, want (T, D, Dim)", in[0])
	}
	return p.shape(s), nil
}
func (p *flowPartOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("flow: gradient part got %d inputs, want 2", len(in))
	}
	shape := p.shape(in[0].Shape())
	out, _ := ownedTensor(&p.buf, shape)
	return p.UsePreallocDo(out, in...)
}
func (p *flowPartOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("flow: gradient part got %d inputs, want 2", len(in))
	}
	out, err := flowOutput(prealloc, p.shape(in[0].Shape()))
	if err != nil {
		return nil, err
	}
	other, err := flowData(in[1], "flow input")
	if err != nil {
		return nil, err
	}
	if p.theta {
		err = p.op.kern.gradTheta(other, out.Float64s())
	} else {
		err = p.op.kern.gradCond(other, out.Float64s())
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
func (p *flowPartOp) ReturnsPtr() bool      { return false }
func (p *flowPartOp) CallsExtern() bool     { return false }
func (p *flowPartOp) OverwritesInput() int  { return -1 }
func (p *flowPartOp) WriteHash(h hash.Hash) { fmt.Fprint(h, p.String()) }
func (p *flowPartOp) Hashcode() uint32      { return flowHash(p) }
func (p *flowPartOp) String() string {
	if p.theta {
		return fmt.Sprintf("CouplingFlowGradTheta#%d", p.op.id)
	}
	return fmt.Sprintf("CouplingFlowGradCond#%d", p.op.id)
}
func (p *flowPartOp) DiffWRT(n int) []bool { return make([]bool, n) }
func (p *flowPartOp) SymDiff(gorgonia.Nodes, *gorgonia.Node, *gorgonia.Node) (gorgonia.Nodes, error) {
	return nil, fmt.Errorf("flow: second derivatives are not implemented")
}

// FlowInverse inverts the flow: given omegaK (T×D×Dim, the first Dim columns
// of a forward output without the log-det column), cond and theta it writes
// the ω0 that the forward maps onto omegaK. It evaluates sample by sample
// without BLAS, so it also serves as an independent check of the kernels.
func FlowInverse(spec FlowSpec, T, D int, omegaK, cond, theta, omega0 []float64) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	d, c := spec.Dim, spec.Cond
	switch {
	case len(omegaK) != T*D*d || len(omega0) != T*D*d:
		return fmt.Errorf("flow: omegaK/omega0 have %d/%d values, want %d", len(omegaK), len(omega0), T*D*d)
	case len(cond) != T*c:
		return fmt.Errorf("flow: cond has %d values, want %d", len(cond), T*c)
	case len(theta) != spec.NumParams():
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), spec.NumParams())
	}
	layers := spec.layout()
	maxM := d - d/2
	in := make([]float64, maxM)
	st := make([]float64, 2*maxM)
	hid := make([]float64, spec.Hidden)
	for t := 0; t < T; t++ {
		h := cond[t*c : (t+1)*c]
		for r := 0; r < D; r++ {
			x := omega0[(t*D+r)*d : (t*D+r+1)*d]
			copy(x, omegaK[(t*D+r)*d:(t*D+r+1)*d])
			for l := len(layers) - 1; l >= 0; l-- {
				L := &layers[l]
				// Undo half 2 (B from A), then half 1 (A from B).
				for i, tgt, src := 1, L.b, L.a; i >= 0; i, tgt, src = i-1, L.a, L.b {
					hf := &L.h[i]
					for j, idx := range src {
						in[j] = x[idx]
					}
					flowNetEval(spec, hf, theta, in[:hf.nIn], h, hid, st[:2*hf.m])
					for j, idx := range tgt {
						x[idx] = (x[idx] - st[hf.m+j]) * math.Exp(-st[j])
					}
				}
			}
		}
	}
	return nil
}

// flowNetEval evaluates one coupling network for a single sample, writing
// s (tanh applied) to st[:m] and t to st[m:].
func flowNetEval(spec FlowSpec, hf *flowHalf, theta, in, h, hid, st []float64) {
	H, m := spec.Hidden, hf.m
	copy(hid, theta[hf.b1:hf.b1+H])
	for q, v := range h {
		w := theta[hf.wc+q*H : hf.wc+(q+1)*H]
		for u := range hid {
			hid[u] += v * w[u]
		}
	}
	for i, v := range in {
		w := theta[hf.w1+i*H : hf.w1+(i+1)*H]
		for u := range hid {
			hid[u] += v * w[u]
		}
	}
	copy(st, theta[hf.b2:hf.b2+2*m])
	for u, v := range hid {
		if v <= 0 {
			continue
		}
		w := theta[hf.w2+u*2*m : hf.w2+(u+1)*2*m]
		for j := range st {
			st[j] += v * w[j]
		}
	}
	for j := 0; j < m; j++ {
		st[j] = math.Tanh(st[j])
	}
}
