package ops

import (
	"fmt"
	"math"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/internal/gemmcore"
	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/opencl"
)

// flowChunks is the fixed number of task chunks the work is split into.
// Parameter gradients are summed per chunk and then over chunks in order,
// so the result never depends on how many cores run the chunks; 4 keeps
// two cores balanced while the partial buffers stay small.
const flowChunks = 4

// flowMath is the precision-specific part of the kernels.
type flowMath[F float] struct {
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
	transpose: transpose[float64],
	fromF64:   copyRows,
	toF64:     copyRows,
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
type flowTask[F float] struct {
	w [][]F    // ω_0..ω_K, each Dim×D
	s [][2][]F // per layer and half: m×D tanh scales
}

// flowScratch is per-chunk working memory; a chunk is processed by one
// goroutine at a time.
type flowScratch[F float] struct {
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
type flowCore[F float] struct {
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

	team *team
	// The parallel loop bodies live here, so that starting one allocates
	// nothing.
	jSetup  flowSetup[F]
	jFwd    flowForward[F]
	jBwd    flowBackward[F]
	jReduce flowReduce[F]
	jGemm   flowSplitGemm[F]
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
// and are bit-identical for any GOMAXPROCS. When its pool has an OpenCL
// device, the kernel runs there instead (flowDev, in float32: agreeing with
// the CPU within ~1e-6, equal bytes run after run on one device), unless a
// test forces float64. Buffers are sized on first use and reused (grown,
// never shrunk), so passes after the first allocate nothing on the CPU; a
// FlowKernel is not safe for concurrent use.
type FlowKernel struct {
	info flowSpecInfo
	pool *Pool

	// f64 makes the next Forward (and its Backward) run in float64, for
	// tests that check gradients by finite differences.
	f64 bool
	c32 *flowCore[float32]
	c64 *flowCore[float64]
	// device is the pool's device when the kernel was made (nil: the CPU),
	// and dev the core that runs there (flow_dev.go).
	device *opencl.Device
	dev    *flowDev
	cur    flowImpl // the core of the last Forward

	T, D        int
	cond, theta []float64 // inputs of the last Forward (not copied)
	fwdDone     bool
	bwdDone     bool
}

// NewFlowKernel returns a kernel for spec whose passes spread their chunks
// over p's workers.
func NewFlowKernel(p *Pool, spec FlowSpec) (*FlowKernel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	info := flowSpecInfo{FlowSpec: spec, layers: spec.layout(), nP: spec.NumParams(), nh: 2 * spec.Layers}
	return &FlowKernel{info: info, pool: p, device: p.Device()}, nil
}

// UseFloat64 makes the following passes run in float64 (the same code,
// with our dgemm and plain Go for the float32 kernels): slower, and exact
// enough for finite-difference checks of the gradients.
func (k *FlowKernel) UseFloat64() { k.f64 = true }

// Spec returns the kernel's spec.
func (k *FlowKernel) Spec() FlowSpec { return k.info.FlowSpec }

func newFlowCore[F float](p *Pool, info flowSpecInfo, fm *flowMath[F]) *flowCore[F] {
	k := &flowCore[F]{fm: fm, spec: info}
	k.team = newTeam(p, k)
	H, c := info.Hidden, info.Cond
	k.th = alignedAlloc[F](info.nP)
	k.wcAll = alignedAlloc[F](c * info.nh * H)
	k.gWc = alignedAlloc[F](c * info.nh * H)
	for _, L := range info.layers {
		for _, h := range L.h {
			k.w1t = append(k.w1t, alignedAlloc[F](H*h.nIn))
			k.w2t = append(k.w2t, alignedAlloc[F](2*h.m*H))
		}
	}
	return k
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
	k.condF = alignedAlloc[F](T * c)
	k.ctx = alignedAlloc[F](T * NH)
	k.gctx = alignedAlloc[F](T * NH)
	k.gCond = alignedAlloc[F](T * c)
	// One slab per task keeps a task's cache contiguous for the core that
	// runs it.
	per := (K+1)*d*D + K*d*D
	k.tasks = make([]flowTask[F], T)
	for t := range k.tasks {
		slab := alignedAlloc[F](per)
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
			ld: alignedAlloc[F](D), gl: alignedAlloc[F](D),
			out: alignedAlloc[F](2 * maxM * D), hid: alignedAlloc[F](H * D), ghid: alignedAlloc[F](H * D), gw: alignedAlloc[F](d * D),
			rows: alignedAlloc[F](D * (d + 1)),
		}
		k.part[ci] = alignedAlloc[F](s.nP)
	}
}

// flowSplitGemm computes C = op(A)·B + beta·C (B stored as is if !tB, else
// transposed) as parts column blocks in parallel, each with its own
// workspace. The split points are fixed (multiples of 16 columns, the
// kernel's panel width), and each element is summed the same way in any
// part, so the result does not depend on the number of cores.
type flowSplitGemm[F float] struct {
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
	k.team.parallel(k.jGemm.parts, false, &k.jGemm)
	k.jGemm = flowSplitGemm[F]{}
}

// core returns the core for the precision of the next Forward: float64
// when a test asks for it, else the pool's device if it has one, else the
// CPU's float32.
func (k *FlowKernel) core() (flowImpl, error) {
	switch {
	case k.f64:
		if k.c64 == nil {
			k.c64 = newFlowCore(k.pool, k.info, &flowMath64)
		}
		return k.c64, nil
	case k.device != nil:
		if k.dev == nil {
			d, err := newFlowDev(k.pool.deviceArena(k.device), k.info)
			if err != nil {
				return nil, err
			}
			k.dev = d
		}
		return k.dev, nil
	}
	if k.c32 == nil {
		k.c32 = newFlowCore(k.pool, k.info, &flowMath32)
	}
	return k.c32, nil
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
	cur, err := k.core()
	if err != nil {
		return err
	}
	k.cur = cur
	k.T, k.D = T, D
	k.cond, k.theta = cond, theta
	k.cur.forward(T, D, omega0, cond, theta, out)
	if err := flowFailed(k.cur); err != nil {
		k.fwdDone, k.bwdDone = false, false
		return err
	}
	k.fwdDone, k.bwdDone = true, false
	return nil
}

// flowSetup converts theta for one half q and prepares its context terms
// and transposed weights.
type flowSetup[F float] struct {
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
type flowForward[F float] struct {
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
	k.team.parallel(s.nh, false, &k.jSetup)
	k.splitGemm(false, false, T, NH, c, k.condF, c, k.wcAll, NH, 1, k.ctx, NH)
	k.jFwd = flowForward[F]{k: k, omega0: omega0, out: out}
	k.team.parallel(len(k.chunks), false, &k.jFwd)
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
