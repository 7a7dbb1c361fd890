package ops

import (
	"fmt"
	"math"
	"runtime"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/task"
)

// flowDev is a coupling flow on an OpenCL device, the flowImpl a
// FlowKernel uses when its pool has a device. It computes what flowCore
// computes, in float32, with the tasks side by side instead of one after
// another: every ω is feature-major over all T·D samples (task t in columns
// t·D…), so each network product is one CLBlast sgemm along the long sample
// axis, and the weight gradients are one strided-batched sgemm over the
// tasks into per-task partials that conv_reduce sums in task order (the
// CPU sums per chunk, then the chunks in order: here the "chunks" are the
// tasks). cl/flow.cl does the element-wise work: the hidden layer's context
// bias and ReLU, the coupling and its gradient, the ReLU mask, per-task
// row sums, and the transposes to and from the host's sample-major rows.
//
// Theta goes up and the gradients come down once per pass, converted on
// the host as float32() and float64() convert; ω after each step, the tanh
// scales and the hidden activations stay on the device between Forward and
// Backward (the CPU recomputes the activations to save memory traffic; a
// device has the memory, and one product fewer a half).
//
// The buffers are leased from the pool's device arena (device_arena.go),
// in a flow slot: a pass holds it from Forward until both parameter and
// context gradients are taken after Backward, or until Forward's end for
// an op no gradient is taken of, so the graphs of varying episode shapes
// share the buffers instead of each kernel allocating its own. Steps after
// the slot went back takes it again: ω is there if no other pass held the
// slot since, else the Forward is run again on its inputs (kept by
// reference, like cond and theta for Backward).
type flowDev struct {
	spec  flowSpecInfo
	dev   *opencl.Device
	r     *flowDevRes
	lease devLease

	T, D, n int   // n = T·D, the columns of every feature-major matrix
	sOff    []int // per half: its tanh scales in r.s (m×n)
	// A task's partial holds, per half q from pOff[q], the W1 (nIn×H),
	// b1 (H), W2 (H×2m) and b2 (2m) gradients: theta's layout without Wc,
	// whose gradient one product over the tasks gives (r.gwc).
	pOff []int
	nPc  int

	// Host staging in float32: theta, cond, sample-major rows (ω₀, the
	// output, their gradients), the summed partials, Wc's and cond's
	// gradients.
	th32, cond32, rows32, sum32, wc32, gc32 []float32

	// The last Forward's inputs, for Steps to run it again.
	omega0, cond, theta []float64
	// parts are the gradients (theta's, cond's) not yet taken after
	// Backward; the slot goes back when none is left.
	parts int

	err error
}

// flowDevRes is what a flowDev holds on the device: its kernel objects,
// released when the flowDev is collected (a FlowKernel has no Close), and
// the buffers of the arena slot it holds (bind).
type flowDevRes struct {
	load, store, biasRelu, coupling, couplingGrad, mask, taskSums, reduce *opencl.Kernel

	th, cond, ctx, w, s, hid, out, gw, ghid, rows, part, sum, gwc, gcond *opencl.Buffer
}

func (r *flowDevRes) release() {
	for _, k := range [...]*opencl.Kernel{r.load, r.store, r.biasRelu, r.coupling, r.couplingGrad, r.mask, r.taskSums, r.reduce} {
		k.Release()
	}
}

// newFlowDev is a flow core on arena's device, leasing its buffers there.
func newFlowDev(arena *devArena, info flowSpecInfo) (*flowDev, error) {
	dev := arena.dev
	prog, err := deviceProgram(dev, "flow")
	if err != nil {
		return nil, err
	}
	// conv_reduce is the fixed-order sum of partials this core needs too.
	conv, err := deviceProgram(dev, "conv")
	if err != nil {
		return nil, err
	}
	d := &flowDev{spec: info, dev: dev, r: &flowDevRes{}}
	runtime.AddCleanup(d, (*flowDevRes).release, d.r)
	d.lease.kind = "flow"
	joinArena(d, &d.lease, arena)
	// Kernel objects of this kernel alone: setting arguments is not safe
	// from two goroutines, and the staged step runs two flows at once.
	for _, kk := range []struct {
		k    **opencl.Kernel
		p    *opencl.Program
		name string
	}{{&d.r.load, prog, "flow_load"}, {&d.r.store, prog, "flow_store"}, {&d.r.biasRelu, prog, "flow_bias_relu"},
		{&d.r.coupling, prog, "flow_coupling"}, {&d.r.couplingGrad, prog, "flow_coupling_grad"}, {&d.r.mask, prog, "flow_mask"},
		{&d.r.taskSums, prog, "flow_task_sums"}, {&d.r.reduce, conv, "conv_reduce"}} {
		if *kk.k, err = kk.p.Kernel(kk.name); err != nil {
			return nil, err
		}
	}
	off := 0
	for _, L := range info.layers {
		for _, h := range L.h {
			d.sOff = append(d.sOff, off)
			off += h.m
		}
	}
	d.pOff, d.nPc = flowPartLayout(info)
	fixed := flowDevFixed(info, d.nPc)
	d.th32 = make([]float32, fixed[0])
	d.sum32 = make([]float32, fixed[1])
	d.wc32 = make([]float32, fixed[2])
	return d, nil
}

// flowPartLayout is where each half's gradients start in a task's
// partial (theta's layout without Wc), and the partial's length.
func flowPartLayout(info flowSpecInfo) (pOff []int, nPc int) {
	H := info.Hidden
	for _, L := range info.layers {
		for _, h := range L.h {
			pOff = append(pOff, nPc)
			nPc += h.nIn*H + H + 2*h.m*H + 2*h.m
		}
	}
	return pOff, nPc
}

// fixed are the buffers whose lengths only the spec sets (flowDevFixed's
// order): theta, the summed partials, Wc's gradient.
func (r *flowDevRes) fixed() [3]**opencl.Buffer { return [3]**opencl.Buffer{&r.th, &r.sum, &r.gwc} }

func flowDevFixed(s flowSpecInfo, nPc int) [3]int {
	return [3]int{s.nP, nPc, s.nh * s.Cond * s.Hidden}
}

// pass are the buffers a pass of T tasks of D samples sizes (flowDevLens'
// order).
func (r *flowDevRes) pass() [11]**opencl.Buffer {
	return [11]**opencl.Buffer{&r.cond, &r.ctx, &r.w, &r.s, &r.hid, &r.out, &r.gw, &r.ghid, &r.rows, &r.part, &r.gcond}
}

// flowDevLens is what a pass of T tasks of D samples asks of each of
// pass's buffers, in float32 values.
func flowDevLens(s flowSpecInfo, nPc, T, D int) [11]int {
	n, dim, c, H, K := T*D, s.Dim, s.Cond, s.Hidden, s.Layers
	maxM := dim - dim/2
	return [11]int{T * c, T * s.nh * H, (K+1)*dim*n + n, K * dim * n, s.nh * H * n, 2 * maxM * n, (dim + 1) * n, H * n,
		n * (dim + 1), T * nPc, T * c}
}

// FlowDeviceBytes is what a flow of spec needs on an OpenCL device for a
// pass of T tasks of D samples (ω's D bases): the buffers of the arena
// slot the pass holds, which the flows' passes share (a slot grows to the
// largest pass it served, and there are as many as passes run at once).
func FlowDeviceBytes(spec FlowSpec, T, D int) float64 {
	info := flowSpecInfo{FlowSpec: spec, layers: spec.layout(), nP: spec.NumParams(), nh: 2 * spec.Layers}
	_, nPc := flowPartLayout(info)
	sum := 0.0
	for _, v := range flowDevFixed(info, nPc) {
		sum += float64(v)
	}
	for _, v := range flowDevLens(info, nPc, T, D) {
		sum += float64(v)
	}
	return 4 * sum
}

// flowDevBuf is the held slot's float32 buffer i of the flows, of at
// least n values; one it allocates it zeroes, so that products with beta
// = 0 never meet what the memory held before.
func flowDevBuf(l *devLease, i, n int) (*opencl.Buffer, error) {
	role := devRole{"flow", i}
	old := l.slot.bufs[role]
	b, err := devBuf[float32](l, role, n)
	if err == nil && b != old {
		err = b.Zero()
	}
	return b, err
}

// bind points the buffers at those of the slot the lease holds, grown to
// what T tasks of D samples ask, and lays out the host's staging.
func (d *flowDev) bind(T, D int) error {
	d.T, d.D, d.n = 0, 0, 0 // until every buffer is there
	s := d.spec
	n, dim, c := T*D, s.Dim, s.Cond
	lens := flowDevLens(s, d.nPc, T, D)
	for _, v := range lens {
		// The kernels index with 32-bit ints.
		if v > math.MaxInt32 {
			return fmt.Errorf("flow on %s: %d tasks of %d samples need a buffer past the kernels' 32-bit indices: use fewer tasks a batch or fewer bases", d.dev.Info.Name, T, D)
		}
	}
	fixed := flowDevFixed(s, d.nPc)
	var err error
	for i, b := range d.r.fixed() {
		if *b, err = flowDevBuf(&d.lease, i, fixed[i]); err != nil {
			return err
		}
	}
	for i, b := range d.r.pass() {
		if *b, err = flowDevBuf(&d.lease, len(fixed)+i, lens[i]); err != nil {
			return err
		}
	}
	d.cond32 = task.Grow(d.cond32, T*c)
	d.gc32 = task.Grow(d.gc32, T*c)
	d.rows32 = task.Grow(d.rows32, n*(dim+1))
	d.T, d.D, d.n = T, D, n
	return nil
}

// flowFailed is the error of the pass impl just ran, for a device core
// (whose flowImpl methods cannot return one); a CPU core never fails.
func flowFailed(impl flowImpl) error {
	if d, ok := impl.(*flowDev); ok {
		err := d.err
		d.err = nil
		return err
	}
	return nil
}

func (d *flowDev) forward(T, D int, omega0, cond, theta, out []float64) {
	d.omega0, d.cond, d.theta, d.parts = omega0, cond, theta, 0
	d.lease.claim()
	d.err = d.bind(T, D)
	if d.err == nil {
		d.err = d.runForward(T, D, omega0, cond, theta, out)
	}
	if d.err != nil {
		d.lease.release()
	}
}

func (d *flowDev) backwardCore(gOut, gOmega0 []float64) {
	d.parts = 0
	if !d.lease.holds() {
		d.err = errDevReleased("flow")
		return
	}
	if d.err = d.runBackward(gOut, gOmega0); d.err != nil {
		d.lease.release()
		return
	}
	d.parts = 2
}

func (d *flowDev) gradTheta(gTheta []float64) {
	d.err = d.part(func() error { return d.runGradTheta(gTheta) })
}
func (d *flowDev) gradCond(gCond []float64) {
	d.err = d.part(func() error { return d.runGradCond(gCond) })
}

// part takes one of the gradients Backward left in the slot, and gives the
// slot back once both are taken (or one fails).
func (d *flowDev) part(run func() error) error {
	if d.parts == 0 || !d.lease.holds() {
		return errDevReleased("flow")
	}
	err := run()
	if d.parts--; d.parts == 0 || err != nil {
		d.parts = 0
		d.lease.release()
	}
	return err
}

// load sends rows×cols of sample-major float64 src (row stride cols) up
// and writes it feature-major into dst from dstOff.
func (d *flowDev) load(src []float64, cols int, dst *opencl.Buffer, dstOff int) error {
	n := d.n
	st := d.rows32[:n*cols]
	sgemm.ToFloat32(st, cols, src, cols, n, cols)
	if err := opencl.Write(d.r.rows, 0, st); err != nil {
		return err
	}
	a := convArgs{k: d.r.load}
	a.buf(d.r.rows)
	a.int(cols)
	a.buf(dst)
	a.int(dstOff)
	a.int(n)
	return a.launch(n, cols)
}

// store writes cols feature-major rows of src from srcOff, sample-major,
// into the staging buffer; the caller reads what it needs of it.
func (d *flowDev) store(src *opencl.Buffer, srcOff, cols int) error {
	a := convArgs{k: d.r.store}
	a.buf(src)
	a.int(srcOff)
	a.int(d.n)
	a.buf(d.r.rows)
	a.int(cols)
	return a.launch(cols, d.n)
}

func (d *flowDev) runForward(T, D int, omega0, cond, theta, out []float64) error {
	s, r, n := d.spec, d.r, d.n
	dim, c, H, NH := s.Dim, s.Cond, s.Hidden, s.nh*s.Hidden
	sgemm.ToFloat32(d.th32, s.nP, theta, s.nP, 1, s.nP)
	sgemm.ToFloat32(d.cond32, c, cond, c, T, c)
	for _, e := range []error{opencl.Write(r.th, 0, d.th32), opencl.Write(r.cond, 0, d.cond32),
		d.load(omega0, dim, r.w, 0), opencl.Fill[float32](r.w, d.ldOff(), n, 0)} {
		if e != nil {
			return e
		}
	}
	// The context term of every half: Wc_qᵀh_t into columns q·H… of ctx
	// (b1 is added with it in flow_bias_relu).
	for q := range s.nh {
		h := &s.layers[q/2].h[q%2]
		if err := d.dev.Sgemm(false, false, T, H, c, 1, r.cond, 0, c, r.th, h.wc, H, 0, r.ctx, q*H, NH); err != nil {
			return err
		}
	}
	for l := range s.layers {
		L := &s.layers[l]
		in, nw := l*dim*n, (l+1)*dim*n
		// As flowCore.forwardTask: half 1 writes the A rows of ω_{l+1}
		// from the B rows of ω_l, half 2 its B rows from those new A rows.
		if err := d.halfForward(l, 0, in, L.vb, in, L.va, nw); err != nil {
			return err
		}
		if err := d.halfForward(l, 1, nw, L.va, in, L.vb, nw); err != nil {
			return err
		}
	}
	// ω_K and the log-det row after it come down as the output's rows.
	if err := d.store(r.w, s.Layers*dim*n, dim+1); err != nil {
		return err
	}
	st := d.rows32[:n*(dim+1)]
	if err := opencl.Read(r.rows, 0, st); err != nil {
		return err
	}
	sgemm.ToFloat64(out, dim+1, st, dim+1, n, dim+1)
	return nil
}

// ldOff is where the log-det row lies in r.w: right after ω_K, so that the
// output comes down with one transpose.
func (d *flowDev) ldOff() int { return (d.spec.Layers + 1) * d.spec.Dim * d.n }

// halfForward is flowCore.halfForward for all tasks at once: the ω at src
// (rows vo) feeds the network of half i of layer l, whose output updates
// rows vt of the ω at xin into the ω at y; its scales are kept in r.s and
// its hidden activations in r.hid.
func (d *flowDev) halfForward(l, i, src int, vo flowRows, xin int, vt flowRows, y int) error {
	s, r, n := d.spec, d.r, d.n
	h := &s.layers[l].h[i]
	q := 2*l + i
	H, m := s.Hidden, h.m
	hidOff := q * H * n
	oo, ldo := vo.of(n)
	// hid = ReLU(W1ᵀx + ctx_t), W1 (nIn×H) read transposed in place.
	if err := d.dev.Sgemm(true, false, H, n, h.nIn, 1, r.th, h.w1, H, r.w, src+oo, ldo, 0, r.hid, hidOff, n); err != nil {
		return err
	}
	a := convArgs{k: r.biasRelu}
	a.buf(r.hid)
	a.int(hidOff)
	a.int(n)
	a.int(d.D)
	a.buf(r.ctx)
	a.int(q * H)
	a.int(s.nh * H)
	a.buf(r.th)
	a.int(h.b1)
	if err := a.launch(n, H); err != nil {
		return err
	}
	// out = W2ᵀhid; b2 is added in flow_coupling.
	if err := d.dev.Sgemm(true, false, 2*m, n, H, 1, r.th, h.w2, 2*m, r.hid, hidOff, n, 0, r.out, 0, n); err != nil {
		return err
	}
	a = convArgs{k: r.coupling}
	a.buf(r.out)
	a.buf(r.th)
	a.int(h.b2)
	a.int(m)
	a.buf(r.w)
	a.int(xin)
	a.int(y)
	a.int(vt.row0)
	a.int(vt.step)
	a.buf(r.s)
	a.int(d.sOff[q] * n)
	a.int(d.ldOff())
	a.int(n)
	return a.launch(n)
}

func (d *flowDev) runBackward(gOut, gOmega0 []float64) error {
	s, r, n := d.spec, d.r, d.n
	dim := s.Dim
	// gw holds the gradient w.r.t. ω_{l+1}, its row dim the log-det's, and
	// is turned in place into the gradient w.r.t. ω_l (flowCore's order).
	if err := d.load(gOut, dim+1, r.gw, 0); err != nil {
		return err
	}
	for l := len(s.layers) - 1; l >= 0; l-- {
		L := &s.layers[l]
		in, nw := l*dim*n, (l+1)*dim*n
		if err := d.halfBackward(l, 1, nw, L.va, in, L.vb); err != nil {
			return err
		}
		if err := d.halfBackward(l, 0, in, L.vb, in, L.va); err != nil {
			return err
		}
	}
	if err := d.store(r.gw, 0, dim); err != nil {
		return err
	}
	st := d.rows32[:n*dim]
	if err := opencl.Read(r.rows, 0, st); err != nil {
		return err
	}
	sgemm.ToFloat64(gOmega0, dim, st, dim, n, dim)
	return nil
}

// halfBackward is flowCore.halfBackward for all tasks at once: the target
// rows vt of r.gw turn from the gradient w.r.t. the half's output into the
// one w.r.t. its input, the network's input gradient is added to rows vo,
// and the parameter and context gradients of each task go to its partial.
func (d *flowDev) halfBackward(l, i, src int, vo flowRows, xin int, vt flowRows) error {
	s, r, n, T, D := d.spec, d.r, d.n, d.T, d.D
	h := &s.layers[l].h[i]
	q := 2*l + i
	H, m := s.Hidden, h.m
	m2 := 2 * m
	hidOff := q * H * n
	pb1 := d.pOff[q] + h.nIn*H // the task's b1 (context) gradient, then W2's, then b2's
	pw2, pb2 := pb1+H, pb1+H+m2*H
	a := convArgs{k: r.couplingGrad}
	a.buf(r.out)
	a.int(m)
	a.buf(r.gw)
	a.int(s.Dim)
	a.buf(r.w)
	a.int(xin)
	a.int(vt.row0)
	a.int(vt.step)
	a.buf(r.s)
	a.int(d.sOff[q] * n)
	a.int(n)
	if err := a.launch(n); err != nil {
		return err
	}
	if err := d.taskSums(r.out, m2, pb2); err != nil {
		return err
	}
	// W2 gradient of task t (H×2m) = hid_t·goutᵀ_t.
	if err := d.dev.SgemmStridedBatched(false, true, H, m2, D, 1, r.hid, hidOff, n, D, r.out, 0, n, D,
		0, r.part, pw2, m2, d.nPc, T); err != nil {
		return err
	}
	// ghid = W2·gout where the ReLU was active.
	if err := d.dev.Sgemm(false, false, H, n, m2, 1, r.th, h.w2, m2, r.out, 0, n, 0, r.ghid, 0, n); err != nil {
		return err
	}
	a = convArgs{k: r.mask}
	a.buf(r.ghid)
	a.buf(r.hid)
	a.int(hidOff)
	if err := a.launch(H * n); err != nil {
		return err
	}
	if err := d.taskSums(r.ghid, H, pb1); err != nil {
		return err
	}
	oo, ldo := vo.of(n)
	// W1 gradient of task t (nIn×H) = x_t·ghidᵀ_t, and the input gradient
	// += W1·ghid.
	if err := d.dev.SgemmStridedBatched(false, true, h.nIn, H, D, 1, r.w, src+oo, ldo, D, r.ghid, 0, n, D,
		0, r.part, d.pOff[q], H, d.nPc, T); err != nil {
		return err
	}
	return d.dev.Sgemm(false, false, h.nIn, n, H, 1, r.th, h.w1, H, r.ghid, 0, n, 1, r.gw, oo, ldo)
}

// taskSums writes each task's sums of the rows of src into the tasks'
// partials at off.
func (d *flowDev) taskSums(src *opencl.Buffer, rows, off int) error {
	a := convArgs{k: d.r.taskSums}
	a.buf(src)
	a.int(d.n)
	a.int(d.D)
	a.buf(d.r.part)
	a.int(off)
	a.int(d.nPc)
	return a.launch(rows, d.T)
}

func (d *flowDev) runGradTheta(gTheta []float64) error {
	s, r := d.spec, d.r
	c, H := s.Cond, s.Hidden
	a := convArgs{k: r.reduce}
	a.buf(r.part)
	a.int(d.T)
	a.int(d.nPc)
	a.buf(r.sum)
	if err := a.launch(d.nPc); err != nil {
		return err
	}
	// Wc gradient of half q (Cond×H) = condᵀ·gctx_q, the tasks' context
	// gradients read from their partials.
	for q := range s.nh {
		h := &s.layers[q/2].h[q%2]
		if err := d.dev.Sgemm(true, false, c, H, d.T, 1, r.cond, 0, c, r.part, d.pOff[q]+h.nIn*H, d.nPc,
			0, r.gwc, q*c*H, H); err != nil {
			return err
		}
	}
	if err := opencl.Read(r.sum, 0, d.sum32); err != nil {
		return err
	}
	if err := opencl.Read(r.gwc, 0, d.wc32); err != nil {
		return err
	}
	for q := range s.nh {
		h := &s.layers[q/2].h[q%2]
		p := d.pOff[q]
		nw1 := h.nIn * H
		sgemm.ToFloat64(gTheta[h.w1:h.wc], nw1, d.sum32[p:p+nw1], nw1, 1, nw1)
		sgemm.ToFloat64(gTheta[h.wc:h.b1], c*H, d.wc32[q*c*H:(q+1)*c*H], c*H, 1, c*H)
		rest := h.end - h.b1
		sgemm.ToFloat64(gTheta[h.b1:h.end], rest, d.sum32[p+nw1:p+nw1+rest], rest, 1, rest)
	}
	return nil
}

func (d *flowDev) runGradCond(gCond []float64) error {
	s, r, T := d.spec, d.r, d.T
	c, H := s.Cond, s.Hidden
	// gCond = Σ_q gctx_q·Wc_qᵀ, the halves added in order.
	for q := range s.nh {
		h := &s.layers[q/2].h[q%2]
		var beta float32
		if q > 0 {
			beta = 1
		}
		if err := d.dev.Sgemm(false, true, T, c, H, 1, r.part, d.pOff[q]+h.nIn*H, d.nPc, r.th, h.wc, H,
			beta, r.gcond, 0, c); err != nil {
			return err
		}
	}
	if err := opencl.Read(r.gcond, 0, d.gc32); err != nil {
		return err
	}
	sgemm.ToFloat64(gCond, c, d.gc32, c, T, c)
	return nil
}

// steps copies ω of task t after each step down from the device; nil if
// the device fails (Steps has no error to return: it feeds the panes). A
// Forward whose slot went back takes it again for the copies: its ω is
// there unless another pass held the slot since, and then it runs again.
func (d *flowDev) steps(t int) [][]float64 {
	if d.lease.holds() {
		return d.readSteps(t)
	}
	defer d.lease.release()
	T, D := d.T, d.D
	kept := d.lease.reclaim()
	if d.bind(T, D) != nil {
		return nil
	}
	if !kept {
		out := make([]float64, T*D*(d.spec.Dim+1))
		if d.runForward(T, D, d.omega0, d.cond, d.theta, out) != nil {
			return nil
		}
	}
	return d.readSteps(t)
}

func (d *flowDev) readSteps(t int) [][]float64 {
	s, D, dim := d.spec, d.D, d.spec.Dim
	st := d.rows32[:D*dim]
	steps := make([][]float64, s.Layers+1)
	for l := range steps {
		if d.store(d.r.w, l*dim*d.n, dim) != nil || opencl.Read(d.r.rows, t*D*dim, st) != nil {
			return nil
		}
		steps[l] = make([]float64, D*dim)
		sgemm.ToFloat64(steps[l], dim, st, dim, D, dim)
	}
	return steps
}
