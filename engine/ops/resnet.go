package ops

import (
	"errors"
	"fmt"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/opencl"
)

// resScratch is the working memory of one goroutine in a pass.
type resScratch[F float] struct {
	ws   sgemm.Workspace
	col  []F       // im2col rows of a group of images, or their gradient
	ucol []F       // a weight-gradient unit's im2col columns of resUnitRows rows
	tmp  []F       // a weight-gradient unit's product
	acc  []float64 // a weight-gradient unit's sum over the batch
	// Winograd: transformed inputs, products, a zero-bordered image
	wv, wm, pad []F
}

// resCore is the ResNet kernel in working precision F. Batch norm couples
// the images, so a pass goes layer by layer: each convolution runs over
// the images in fixed chunks spread over the pool's workers, its batch
// statistics are combined serially in image order, and the normalization
// runs over the chunks again. Weight gradients are summed over all images
// in units of im2col columns, each unit by one goroutine in a fixed row
// order; results are therefore the same for any number of cores.
type resCore[F float] struct {
	spec ResNetSpec
	cv   []resConv
	blk  []resBlock
	pl   resPool
	fm   *convMath[F]
	team *team

	N      int
	chunks [][2]int
	chunk  int
	wt     [][]F // per conv: kk×Out, row tap·In + c holds W[·][c·K² + tap]
	ut     [][]F // per Winograd conv: its transformed filters (winoFilters)
	bn     []bnState[F]
	z      [][]F // per conv: its output (N·po×Out); in backward the gradient w.r.t. it
	src    [][]F // per conv: its input
	x      []F
	stem   []F // the stem's BN+ReLU output; in backward the gradient w.r.t. it
	pool   []F
	arg    []uint8
	h, out [][]F           // per block: ReLU(BN(c1)) and the block's output
	feat   []float64       // N×Widths[3], the pooled features
	dws    dgemm.Workspace // the linear layer's products (a pool's would drop it at GCs)
	gb     [2][]F          // gradients w.r.t. block outputs and inputs, in turn
	gh     []F             // the gradient w.r.t. a block's h
	gfeat  []float64
	units  [][3]int // weight-gradient units: conv, first and end column
	unitAt []int    // per conv, its first unit
	free   chan *resScratch[F]

	// the pass under way
	params, grads [][]float64
	xIn, gxOut    []float64
	run           []BNStats
	b, ca, cb     int // block; the convolutions of a convolution phase (cb −1: one)
	g, gin        []F // the gradients w.r.t. the current block's output and input
	gx            []F // the gradient w.r.t. the input images, when wanted
	u0, u1        int // weight-gradient units of the phase
	j             resJobs
}

// resJobs are the bodies of a pass's parallel loops, made once: method
// values allocate.
type resJobs struct {
	setup, conv, stem, relu, join        job // forward
	bsums, bin, c1sums, c1in, ssums, sin job // backward, by chunk
	wgrad                                job // backward, by weight-gradient unit
}

func newResCore[F float](p *Pool, spec ResNetSpec, fm *convMath[F]) *resCore[F] {
	k := &resCore[F]{spec: spec, fm: fm}
	k.cv, k.blk = resLayers(spec)
	k.pl = newResPool(k.cv[0].ResNetConv)
	k.team = newTeam(p, k)
	k.wt, k.ut = make([][]F, len(k.cv)), make([][]F, len(k.cv))
	k.bn = make([]bnState[F], len(k.cv))
	for l, cv := range k.cv {
		k.unitAt = append(k.unitAt, len(k.units))
		for c := 0; c < cv.kk; c += cv.uw {
			k.units = append(k.units, [3]int{l, c, min(c+cv.uw, cv.kk)})
		}
	}
	k.unitAt = append(k.unitAt, len(k.units))
	k.j = resJobs{setup: funcJob(k.setupConv), conv: funcJob(k.convChunk), stem: funcJob(k.stemChunk),
		relu: funcJob(k.reluChunk), join: funcJob(k.joinChunk), wgrad: funcJob(k.weightUnit),
		bsums: funcJob(k.blockSumsChunk), bin: funcJob(k.blockInChunk), c1sums: funcJob(k.c1SumsChunk),
		c1in: funcJob(k.c1InChunk), ssums: funcJob(k.stemSumsChunk), sin: funcJob(k.stemInChunk)}
	return k
}

func (k *resCore[F]) resize(N int) {
	if N == k.N && k.x != nil {
		return
	}
	k.N = N
	nc := min(N, convChunks)
	k.chunks, k.chunk = make([][2]int, nc), 0
	for ci := range k.chunks {
		k.chunks[ci] = [2]int{ci * N / nc, (ci + 1) * N / nc}
		k.chunk = max(k.chunk, k.chunks[ci][1]-k.chunks[ci][0])
	}
	k.x = alignedAlloc[F](N * k.spec.InDim())
	k.z, k.src = make([][]F, len(k.cv)), make([][]F, len(k.cv))
	for l, cv := range k.cv {
		k.z[l] = alignedAlloc[F](N * cv.po * cv.Out)
	}
	k.stem = alignedAlloc[F](N * k.pl.pin)
	k.pool, k.arg = alignedAlloc[F](N*k.pl.pou), make([]uint8, N*k.pl.pou)
	k.h, k.out = make([][]F, len(k.blk)), make([][]F, len(k.blk))
	gmax, hmax := k.pl.pou, 0
	k.src[0] = k.x
	in := k.pool
	for b, bl := range k.blk {
		c1 := k.cv[bl.c1]
		k.h[b] = alignedAlloc[F](N * c1.po * c1.Out)
		k.out[b] = alignedAlloc[F](N * c1.po * c1.Out)
		k.src[bl.c1], k.src[bl.c2] = in, k.h[b]
		if bl.proj >= 0 {
			k.src[bl.proj] = in
		}
		in = k.out[b]
		gmax, hmax = max(gmax, c1.po*c1.Out), max(hmax, c1.po*c1.Out)
	}
	k.gb = [2][]F{alignedAlloc[F](N * gmax), alignedAlloc[F](N * gmax)}
	k.gh = alignedAlloc[F](N * hmax)
	k.feat = make([]float64, N*k.spec.Widths[3])
	k.gfeat = make([]float64, N*k.spec.Widths[3])
	k.free = make(chan *resScratch[F], 64)
}

// scratch takes a scratch from the free list or makes one sized for the
// current N; release puts it back.
func (k *resCore[F]) scratch() *resScratch[F] {
	select {
	case sc := <-k.free:
		return sc
	default:
	}
	var col, ucol, tmp, wv, pad int
	for _, cv := range k.cv {
		n := min(cv.group, k.chunk)
		col = max(col, n*cv.po*cv.kk)
		ucol = max(ucol, resUnitRows*cv.uw)
		tmp = max(tmp, cv.uw*cv.Out)
		if cv.im3 {
			v, p := cv.winoSizes(n)
			wv, pad = max(wv, v), max(pad, p)
		}
	}
	return &resScratch[F]{col: alignedAlloc[F](col), ucol: alignedAlloc[F](ucol), tmp: alignedAlloc[F](tmp), acc: make([]float64, tmp),
		wv: alignedAlloc[F](wv), wm: alignedAlloc[F](wv), pad: alignedAlloc[F](pad)}
}

func (k *resCore[F]) release(sc *resScratch[F]) {
	select {
	case k.free <- sc:
	default:
	}
}

// overChunks runs j over the chunks of images.
func (k *resCore[F]) overChunks(j job) { k.team.parallel(len(k.chunks), false, j) }

// setupConv converts the weights of convolution l to working precision in
// the im2col layout, or transforms them for Winograd.
func (k *resCore[F]) setupConv(l int) {
	cv, w := &k.cv[l], k.params[3*l]
	if cv.wino {
		k.setupWino(l)
		return
	}
	if len(k.wt[l]) == 0 {
		k.wt[l] = alignedAlloc[F](cv.kk * cv.Out)
	}
	wt := k.wt[l]
	kk2 := cv.K * cv.K
	// Blocks of resTransBlock filters: each row of wt is written a cache
	// line at a time while the filters' rows of w stay in L1, where
	// walking w in order wrote every element to another line.
	for f0 := 0; f0 < cv.Out; f0 += resTransBlock {
		f1 := min(f0+resTransBlock, cv.Out)
		for c := range cv.In {
			for tap := range kk2 {
				dst := wt[(tap*cv.In+c)*cv.Out+f0 : (tap*cv.In+c)*cv.Out+f1]
				o := c*kk2 + tap
				for f := range dst {
					dst[f] = F(w[(f0+f)*cv.kk+o])
				}
			}
		}
	}
}

// resTransBlock is the number of filters the weights' layout changes
// handle at a time (setupConv, weightUnit).
const resTransBlock = 16

// convChunk runs convolutions ca (and cb) over a chunk's images and sums
// their outputs for the batch statistics.
func (k *resCore[F]) convChunk(ci int) {
	sc := k.scratch()
	defer k.release(sc)
	lo, hi := k.chunks[ci][0], k.chunks[ci][1]
	if k.ca == 0 {
		in := k.spec.InDim()
		k.fm.fromF64(k.x[lo*in:], in, k.xIn[lo*in:], in, hi-lo, in)
	}
	for _, l := range [2]int{k.ca, k.cb} {
		if l < 0 {
			continue
		}
		cv, src, z := &k.cv[l], k.src[l], k.z[l]
		for g0 := lo; g0 < hi; g0 += cv.group {
			g1 := min(g0+cv.group, hi)
			if cv.wino {
				k.winoConv(sc, cv, src, z, g0, g1, cv.In, cv.Out, k.ut[l], true, &resWinoId, false)
				continue
			}
			a := sc.col
			switch {
			case cv.direct:
				a = src[g0*cv.p*cv.In:]
			case cv.im3:
				convIm2col(sc.col, cv.kk, src[g0*cv.p*cv.In:g1*cv.p*cv.In], g1-g0, cv.Height, cv.Width, cv.In, false)
			default:
				resIm2col(sc.col, cv.kk, src, cv, g0*cv.po, g1*cv.po, 0, cv.kk)
			}
			k.fm.gemm(&sc.ws, false, false, (g1-g0)*cv.po, cv.Out, cv.kk, 1, a, cv.kk, k.wt[l], cv.Out, 0, z[g0*cv.po*cv.Out:], cv.Out, false)
		}
		for i := lo; i < hi; i++ {
			k.bn[l].sumImage(i, z[i*cv.po*cv.Out:(i+1)*cv.po*cv.Out])
		}
	}
}

// convs runs convolutions a and b (−1: none) over the batch and sets their
// normalization.
func (k *resCore[F]) convs(a, b int) {
	k.ca, k.cb = a, b
	k.overChunks(k.j.conv)
	for _, l := range [2]int{a, b} {
		if l >= 0 {
			var run *BNStats
			if k.run != nil {
				run = &k.run[l]
			}
			k.bn[l].moments(k.params[3*l+1], k.params[3*l+2], run)
		}
	}
}

// normRelu writes ReLU(BN_l(z)) of image i into dst, adding add (the
// shortcut's values, nil for none) before the ReLU.
func (k *resCore[F]) normRelu(l, i int, dst, add []F) {
	n := k.cv[l].po * k.cv[l].Out
	z, d := k.z[l][i*n:(i+1)*n], dst[i*n:(i+1)*n]
	scale, shift := k.bn[l].coef(i)
	c := len(scale)
	for q := 0; q < n; q += c {
		zr, dr := z[q:q+c], d[q:q+c]
		for ch, v := range zr {
			y := v*scale[ch] + shift[ch]
			if add != nil {
				y += add[i*n+q+ch]
			}
			dr[ch] = max(y, 0)
		}
	}
}

func (k *resCore[F]) stemChunk(ci int) {
	pl := &k.pl
	for i := k.chunks[ci][0]; i < k.chunks[ci][1]; i++ {
		k.normRelu(0, i, k.stem, nil)
		resPoolForward(pl, k.pool[i*pl.pou:(i+1)*pl.pou], k.arg[i*pl.pou:(i+1)*pl.pou], k.stem[i*pl.pin:(i+1)*pl.pin])
	}
}

func (k *resCore[F]) reluChunk(ci int) {
	for i := k.chunks[ci][0]; i < k.chunks[ci][1]; i++ {
		k.normRelu(k.blk[k.b].c1, i, k.h[k.b], nil)
	}
}

// joinChunk writes the block outputs ReLU(BN(c2) + shortcut): the
// projection's normalized values are first written to the output, then
// added.
func (k *resCore[F]) joinChunk(ci int) {
	bl := k.blk[k.b]
	out, in := k.out[k.b], k.src[bl.c1]
	for i := k.chunks[ci][0]; i < k.chunks[ci][1]; i++ {
		add := in
		if bl.proj >= 0 {
			k.normAffine(bl.proj, i, out)
			add = out
		}
		k.normRelu(bl.c2, i, out, add)
	}
}

// normAffine writes BN_l(z) of image i into dst.
func (k *resCore[F]) normAffine(l, i int, dst []F) {
	n := k.cv[l].po * k.cv[l].Out
	z, d := k.z[l][i*n:(i+1)*n], dst[i*n:(i+1)*n]
	scale, shift := k.bn[l].coef(i)
	c := len(scale)
	for q := 0; q < n; q += c {
		for ch, v := range z[q : q+c] {
			d[q+ch] = v*scale[ch] + shift[ch]
		}
	}
}

func (k *resCore[F]) forward(x []float64, params [][]float64, lay BNLayout, mode BNMode, run []BNStats, out []float64) {
	N := lay.Images()
	k.resize(N)
	k.params, k.xIn, k.run = params, x, nil
	if mode == BNRunning {
		k.run = run
	}
	for l, cv := range k.cv {
		k.bn[l].setup(cv.Out, cv.po, lay, mode)
	}
	k.team.parallel(len(k.cv), false, k.j.setup)
	k.convs(0, -1)
	k.overChunks(k.j.stem)
	for b, bl := range k.blk {
		k.b = b
		k.convs(bl.c1, -1)
		k.overChunks(k.j.relu)
		k.convs(bl.c2, bl.proj)
		k.overChunks(k.j.join)
	}
	// Global average pooling and the linear layer, in float64.
	last := k.cv[k.blk[len(k.blk)-1].c2]
	C, P := last.Out, last.po
	fin := k.out[len(k.blk)-1]
	clear(k.feat)
	for i := range N {
		f := k.feat[i*C : (i+1)*C]
		for q := range P {
			for ch, v := range fin[(i*P+q)*C : (i*P+q+1)*C] {
				f[ch] += float64(v)
			}
		}
		for ch := range f {
			f[ch] /= float64(P)
		}
	}
	L := len(k.cv)
	resHead(&k.dws, N, C, k.spec.Out, k.feat, params[3*L], params[3*L+1], out)
	k.params, k.xIn = nil, nil
}

// resHead is the linear layer, out = feat·wᵀ + b for N rows of C pooled
// features and D outputs, in float64 (our dgemm whatever the process's
// BLAS); the CPU and device kernels share it.
func resHead(ws *dgemm.Workspace, N, C, D int, feat, w, b, out []float64) {
	ws.Gemm(false, true, N, D, C, 1, feat, C, w, C, 0, out, D)
	for i := range N {
		for j, v := range b {
			out[i*D+j] += v
		}
	}
}

// resHeadBackward writes the linear layer's weight and bias gradients (gw,
// gb) and the gradient w.r.t. the features (gfeat) from gOut.
func resHeadBackward(ws *dgemm.Workspace, N, C, D int, gOut, feat, w, gw, gb, gfeat []float64) {
	ws.Gemm(true, false, D, C, N, 1, gOut, D, feat, C, 0, gw, C)
	clear(gb)
	for i := range N {
		for j, v := range gOut[i*D : (i+1)*D] {
			gb[j] += v
		}
	}
	ws.Gemm(false, false, N, C, D, 1, gOut, D, w, C, 0, gfeat, C)
}

// resImpl is a resCore of either precision.
type resImpl interface {
	forward(x []float64, params [][]float64, lay BNLayout, mode BNMode, run []BNStats, out []float64)
	backward(gOut []float64, params, grads [][]float64, gx []float64)
	fold(run []BNStats)
}

func (k *resCore[F]) fold(run []BNStats) {
	for l := range k.bn {
		k.bn[l].fold(&run[l])
	}
}

// ResNetKernel evaluates a ResNetSpec network on plain float64 slices,
// keeping what Backward needs. It computes in float32 with
// internal/sgemm's kernels (im2col products, and Winograd F(2×2, 3×3) for
// the 3×3 stride-1 layers on maps of 4 pixels a side and more, forward and
// input gradient: resnet_wino.go; conv_math.go's helpers), or
// in float64 after UseFloat64, which the finite-difference tests check;
// float32 agrees with it to ~1e-5 relative. Results are bit-identical for
// any GOMAXPROCS. A kernel made from a pool with a device (Pool.SetDevice)
// runs its float32 passes there instead (resnet_dev.go), within 1e-4 of
// the CPU's and the same bytes run after run on one device. Buffers are sized on the first pass for a batch size and
// then reused. Not safe for concurrent use.
type ResNetKernel struct {
	spec   ResNetSpec
	pool   *Pool
	shapes []ResNetParam // Spec.Params, made once: it formats names
	nconv  int
	f64    bool
	c32    *resCore[float32]
	c64    *resCore[float64]
	dev    *opencl.Device // the pool's device when the kernel was made (nil: the CPU)
	cdev   *resDev
	cur    resImpl

	n                int
	params           [][]float64
	fwdDone, bwdDone bool
	train            bool
}

// NewResNetKernel returns a kernel for spec whose passes spread their work
// over p's workers.
func NewResNetKernel(p *Pool, spec ResNetSpec) (*ResNetKernel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &ResNetKernel{spec: spec, pool: p, dev: p.Device(), shapes: spec.Params(), nconv: len(spec.Convs())}, nil
}

// UseFloat64 makes the following passes run in float64.
func (k *ResNetKernel) UseFloat64() { k.f64 = true }

// Spec returns the kernel's spec.
func (k *ResNetKernel) Spec() ResNetSpec { return k.spec }

// Forward computes the features (lay.Images()×OutDim) of the images x
// (lay.Images()×InDim) with params (in Spec.Params order) into out. Batch
// norms use the statistics mode chooses (see BNMode and BNLayout); run
// (one BNStats per convolution) is read in BNRunning mode only. Inputs are
// converted on entry; params must stay unchanged until Backward.
func (k *ResNetKernel) Forward(x []float64, params [][]float64, lay BNLayout, mode BNMode, run []BNStats, out []float64) error {
	s := k.spec
	if err := lay.Validate(mode); err != nil {
		return err
	}
	n := lay.Images()
	switch {
	case len(x) != n*s.InDim():
		return fmt.Errorf("resnet: x has %d values, want images·InDim = %d", len(x), n*s.InDim())
	case len(out) != n*s.OutDim():
		return fmt.Errorf("resnet: out has %d values, want images·OutDim = %d", len(out), n*s.OutDim())
	}
	if err := k.checkParams("parameter", params); err != nil {
		return err
	}
	if mode == BNRunning {
		if len(run) != k.nconv {
			return fmt.Errorf("resnet: %d running statistics, want one per convolution (%d)", len(run), k.nconv)
		}
		for l := range run {
			if c := k.shapes[3*l+1].Shape[0]; len(run[l].Mean) != c || len(run[l].Var) != c {
				return fmt.Errorf("resnet: running statistics of convolution %d have %d means and %d variances, want %d", l, len(run[l].Mean), len(run[l].Var), c)
			}
		}
	}
	switch {
	case k.f64:
		if k.c64 == nil {
			k.c64 = newResCore(k.pool, s, &convMath64)
		}
		k.cur = k.c64
	case k.dev != nil:
		if k.cdev == nil {
			d, err := newResDev(k.dev, s)
			if err != nil {
				return err
			}
			k.cdev = d
		}
		k.shareDevice()
		k.cur = k.cdev
	default:
		if k.c32 == nil {
			k.c32 = newResCore(k.pool, s, &convMath32)
		}
		k.cur = k.c32
	}
	k.fwdDone = false
	k.cur.forward(x, params, lay, mode, run, out)
	if k.cur == k.cdev && k.cdev.err != nil {
		return k.cdev.err
	}
	k.n, k.params, k.train = n, params, mode == BNTrain
	k.fwdDone, k.bwdDone = true, false
	return nil
}

func (k *ResNetKernel) checkParams(what string, ps [][]float64) error {
	want := k.shapes
	if len(ps) != len(want) {
		return fmt.Errorf("resnet: %d %ss, want %d", len(ps), what, len(want))
	}
	for i, p := range want {
		size := 1
		for _, d := range p.Shape {
			size *= d
		}
		if len(ps[i]) != size {
			return fmt.Errorf("resnet: %s %s has %d values, want %v", what, p.Name, len(ps[i]), p.Shape)
		}
	}
	return nil
}

// Backward propagates gOut (the gradient w.r.t. the last Forward's output)
// and overwrites grads (Spec.Params order) with the gradients w.r.t. the
// parameters and, if gx is not nil, gx with the gradient w.r.t. x. It may
// run once per Forward.
func (k *ResNetKernel) Backward(gOut []float64, grads [][]float64, gx []float64) error {
	switch {
	case !k.fwdDone:
		return errors.New("resnet: Backward before Forward")
	case k.bwdDone:
		return errors.New("resnet: second Backward of one Forward")
	case len(gOut) != k.n*k.spec.OutDim():
		return fmt.Errorf("resnet: output gradient has %d values, want %d", len(gOut), k.n*k.spec.OutDim())
	case gx != nil && len(gx) != k.n*k.spec.InDim():
		return fmt.Errorf("resnet: input gradient has %d values, want %d", len(gx), k.n*k.spec.InDim())
	}
	if err := k.checkParams("gradient", grads); err != nil {
		return err
	}
	k.cur.backward(gOut, k.params, grads, gx)
	k.bwdDone = true
	if k.cur == k.cdev && k.cdev.err != nil {
		return k.cdev.err
	}
	return nil
}

// FoldRunning folds the batch statistics of the last Forward, if it ran in
// BNTrain mode and was not folded yet, into run (one BNStats per
// convolution): episode by episode, running = BNMomentum·running +
// (1 − BNMomentum)·batch.
func (k *ResNetKernel) FoldRunning(run []BNStats) error {
	if !k.fwdDone || !k.train {
		return nil
	}
	if len(run) != k.nconv {
		return fmt.Errorf("resnet: %d running statistics, want %d", len(run), k.nconv)
	}
	k.cur.fold(run)
	return nil
}
