package ops

import (
	"fmt"
	"math"
	"runtime"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/task"
)

// convDev is a ConvSpec network on an OpenCL device, the convImpl a
// ConvKernel uses when its pool has a device: every block by channels-last
// im2col and one CLBlast product (the bias riding on a column of ones, as
// on the CPU), then cl/conv.cl's kernels for ReLU, dropout and pooling;
// backward by unpooling, the weight product colᵀ·dz and the input
// gradient as the CPU computes it (im2col of dz times the rotated
// filters). Weights go up and gradients come down once per pass, converted
// on the host exactly as the CPU converts them; activations and argmaxes
// stay on the device between Forward and Backward.
//
// The weight gradients are summed per chunk of images (the CPU's
// convChunks split) and the chunks added in order by conv_reduce, which
// keeps float32 sums short and the order fixed: one device gives the same
// bytes run after run.
type convDev struct {
	spec ConvSpec
	ls   []convLayer
	dev  *opencl.Device
	r    *convDevRes

	N      int
	chunks [][2]int
	group  []int // images per product, per block: as many as convDevColCap allows (backward: within a chunk)
	actOff []int // where block l's input starts in act (l = L: the output)
	argOff []int
	wOff   []int // block l's wt (k1×F), then its wrot (9F×cin) for l ≥ 1
	partOf []int // block l's k1×F weight gradient in a chunk's partial
	wLen   int
	part   int // a chunk partial's length

	// Host staging, in float32: images, weights, the output gradient, the
	// output and the summed gradients.
	x32, w32, g32, o32, s32 []float32

	alpha        float32
	train        bool
	seed, stream uint64
	thr          uint64
	err          error

	// residentCore's res, when set, holds the network's parameters on
	// the device (ConvResident): passes read its weights and leave their
	// weight gradients in its sum buffer for it; a reader's (an
	// evaluation's) passes read its weights once they are the host's
	// values (resTs: those, in the model's order), and take no gradient.
	residentCore
	resTs [][]float64

	// lease holds the pool's arena slot (device_arena.go) whose buffers
	// a pass uses, from Forward to the end of Backward; need is what a
	// pass of N images asks of them.
	lease devLease
	need  convDevNeed
}

// convDevRes is what a convDev uses on the device. Its kernels are its
// own, released when the convDev is collected (a ConvKernel has no
// Close); the buffers are the pass's arena slot's (bind), which the arena
// owns, but for w and sum where the parameters are resident: the
// ConvResident's (its weights, and the sums its step reads after the
// pass).
type convDevRes struct {
	im2col, mask, pool, unpool, reduce *opencl.Kernel

	act, col, z, gA, gB, w, part, sum *opencl.Buffer // float32
	arg, drop                         *opencl.Buffer // uint8: argmaxes, dropout masks
}

func (r *convDevRes) release() {
	for _, k := range [...]*opencl.Kernel{r.im2col, r.mask, r.pool, r.unpool, r.reduce} {
		k.Release()
	}
}

// convDevColCap bounds the column buffer (im2col rows of a group of
// images) and the pre-pool activations at 64 MB each: larger groups gain
// nothing once a product has thousands of rows, and a Conv-5 batch at
// 84×84 would need gigabytes.
const convDevColCap = 1 << 24

func newConvDev(dev *opencl.Device, spec ConvSpec) (*convDev, error) {
	prog, err := deviceProgram(dev, "conv")
	if err != nil {
		return nil, err
	}
	d := &convDev{spec: spec, ls: spec.layers(), dev: dev, r: &convDevRes{}}
	runtime.AddCleanup(d, (*convDevRes).release, d.r)
	// Kernel objects of this kernel alone: setting arguments is not safe
	// from two goroutines, and the staged step runs two ConvKernels at once.
	for _, kk := range []struct {
		k    **opencl.Kernel
		name string
	}{{&d.r.im2col, "conv_im2col"}, {&d.r.mask, "conv_mask"}, {&d.r.pool, "conv_pool"}, {&d.r.unpool, "conv_unpool"}, {&d.r.reduce, "conv_reduce"}} {
		if *kk.k, err = prog.Kernel(kk.name); err != nil {
			return nil, err
		}
	}
	nf := spec.Filters
	for l, ly := range d.ls {
		d.wOff = append(d.wOff, d.wLen)
		d.wLen += ly.k1 * nf
		if l > 0 {
			d.wLen += 9 * nf * ly.cin
		}
		d.partOf = append(d.partOf, d.part)
		d.part += ly.k1 * nf
	}
	d.w32 = make([]float32, d.wLen)
	d.s32 = make([]float32, d.part)
	return d, nil
}

// convDevEnsure makes *b a buffer of at least n elements, keeping the one
// there when it is large enough (passes of fewer images reuse it).
func convDevEnsure[T opencl.Element](dev *opencl.Device, b **opencl.Buffer, n int) error {
	if *b != nil && (*b).Len() >= n {
		return nil
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("conv on %s: a buffer of %d values is past the kernels' 32-bit indices: use fewer images a batch", dev.Info.Name, n)
	}
	(*b).Release()
	*b = nil
	nb, err := opencl.Alloc[T](dev, max(n, 1))
	if err != nil {
		return err
	}
	*b = nb
	return nil
}

// resize lays out the buffers for N images and binds them (bind).
func (d *convDev) resize(N int) error {
	if N == d.N {
		return d.bind()
	}
	d.N = 0 // until every buffer is there
	nc := min(N, convChunks)
	d.chunks = d.chunks[:0]
	for ci := range nc {
		d.chunks = append(d.chunks, [2]int{ci * N / nc, (ci + 1) * N / nc})
	}
	d.group, d.actOff, d.argOff, d.need = convDevPlan(d.ls, d.spec.Filters, N, d.part, d.group[:0], d.actOff[:0], d.argOff[:0])
	if err := d.bind(); err != nil {
		return err
	}
	d.x32 = task.Grow(d.x32, N*d.spec.InDim())
	d.g32 = task.Grow(d.g32, N*d.spec.OutDim())
	d.o32 = task.Grow(d.o32, N*d.spec.OutDim())
	d.N = N
	return nil
}

func (d *convDev) setStep(seed, stream uint64, train bool, keep float64) {
	d.seed, d.stream, d.train = seed, stream, train && keep < 1
	d.alpha, d.thr = 1, 1<<32
	if d.train {
		d.alpha = float32(1 / keep)
		d.thr = uint64(keep * (1 << 32))
	}
}

// takeErr returns the error of the last pass, once.
func (d *convDev) takeErr() error {
	err := d.err
	d.err = nil
	return err
}

// convFailed is the error of the pass impl just ran, for a device core
// (whose convImpl methods cannot return one); a CPU core never fails.
func convFailed(impl convImpl) error {
	if d, ok := impl.(*convDev); ok {
		return d.takeErr()
	}
	return nil
}

func (d *convDev) forward(N int, x []float64, ws, bs [][]float64, out []float64) {
	d.err = d.runForward(N, x, ws, bs, out)
}

func (d *convDev) backward(gOut []float64, gws, gbs [][]float64) {
	if !d.lease.holds() {
		d.err = errDevReleased("conv")
		return
	}
	d.err = d.runBackward(gOut, gws, gbs)
	d.lease.release()
}

// weights is the buffer of float32 weights the passes read: the resident
// parameters' when there are, else this core's own.
func (d *convDev) weights() *opencl.Buffer {
	if d.res != nil {
		return d.res.r.w
	}
	return d.r.w
}

// setWeights writes every block's wt and wrot (convSetup's layouts) in
// float32, converted as float32() does, and sends them in one write.
func (d *convDev) setWeights(ws, bs [][]float64) error {
	nf := d.spec.Filters
	for l, ly := range d.ls {
		wt := d.w32[d.wOff[l] : d.wOff[l]+ly.k1*nf]
		var wrot []float32
		if l > 0 {
			wrot = d.w32[d.wOff[l]+ly.k1*nf:][:9*nf*ly.cin]
		}
		convPackIm2col(wt, wrot, ws[l], bs[l], ly.cin, nf)
	}
	return opencl.Write(d.r.w, 0, d.w32)
}

// convArgs sets a kernel's arguments in order, keeping the first error;
// each setter returns the convArgs, so a launch reads as one chain. The
// device kernels (conv, ResNet, flow, the resident parameters) all set
// their arguments through it: typed setters box nothing, so a pass
// allocates nothing for them.
type convArgs struct {
	k   *opencl.Kernel
	i   int
	err error
}

func (a *convArgs) next(err error) *convArgs {
	if a.err == nil {
		a.err = err
	}
	a.i++
	return a
}

func (a *convArgs) buf(b *opencl.Buffer) *convArgs { return a.next(a.k.SetBuffer(a.i, b)) }
func (a *convArgs) int(v int) *convArgs            { return a.next(a.k.SetInt32(a.i, int32(v))) }
func (a *convArgs) u64(v uint64) *convArgs         { return a.next(a.k.SetUint64(a.i, v)) }
func (a *convArgs) f32(v float32) *convArgs        { return a.next(a.k.SetFloat32(a.i, v)) }

// flag sets a boolean argument as the int 0 or 1 the kernels take.
func (a *convArgs) flag(v bool) *convArgs { return a.int(convBool(v)) }

func (a *convArgs) launch(global ...int) error {
	if a.err != nil {
		return a.err
	}
	return a.k.Launch(global, nil)
}

// groups runs the kernel over n work-items in work-groups of 64, n
// rounded up (the kernels skip the items past n).
func (a *convArgs) groups(n int) error {
	const group = 64
	if a.err != nil {
		return a.err
	}
	return a.k.Launch([]int{(n + group - 1) / group * group}, []int{group})
}

// im2col writes the rows of n images of h×w×c at src+off into col.
func (d *convDev) im2col(src *opencl.Buffer, off, n, h, w, c int, ones bool) error {
	a := convArgs{k: d.r.im2col}
	ldd, o := 9*c, 0
	if ones {
		ldd, o = ldd+1, 1
	}
	a.buf(src)
	a.int(off)
	a.buf(d.r.col)
	a.int(ldd)
	a.int(h)
	a.int(w)
	a.int(c)
	a.int(o)
	return a.launch(ldd, n*h*w)
}

func (d *convDev) runForward(N int, x []float64, ws, bs [][]float64, out []float64) error {
	if err := d.resize(N); err != nil {
		return err
	}
	switch {
	case d.res == nil:
		if err := d.setWeights(ws, bs); err != nil {
			return err
		}
	case d.reader:
		d.resTs = d.resTs[:0]
		for l := range ws {
			d.resTs = append(d.resTs, ws[l], bs[l])
		}
		if err := d.res.readerWeights(d.resTs); err != nil {
			return err
		}
	}
	in, od := d.spec.InDim(), d.spec.OutDim()
	sgemm.ToFloat32(d.x32, in, x, in, N, in)
	r, nf := d.r, d.spec.Filters
	if err := opencl.Write(r.act, 0, d.x32[:N*in]); err != nil {
		return err
	}
	for l, ly := range d.ls {
		for g0 := 0; g0 < N; g0 += d.group[l] {
			n := min(d.group[l], N-g0)
			rows := n * ly.p
			if err := d.im2col(r.act, d.actOff[l]+g0*ly.p*ly.cin, n, ly.h, ly.w, ly.cin, true); err != nil {
				return err
			}
			// z = alpha·(im2col·wt): the bias rides on the column of ones,
			// and conv_pool applies ReLU and dropout as it pools.
			if err := d.dev.Sgemm(false, false, rows, nf, ly.k1, d.alpha, r.col, 0, ly.k1, d.weights(), d.wOff[l], nf, 0, r.z, 0, nf); err != nil {
				return err
			}
			if d.train {
				if err := d.masks(l, g0, n); err != nil {
					return err
				}
			}
			a := convArgs{k: r.pool}
			a.buf(r.z)
			a.buf(r.act)
			a.int(d.actOff[l+1] + g0*ly.po*nf)
			a.buf(r.arg)
			a.int(d.argOff[l] + g0*ly.po*nf)
			a.buf(r.drop)
			for _, v := range [...]int{ly.h, ly.w, ly.ho, ly.wo, nf, convBool(d.train)} {
				a.int(v)
			}
			if err := a.launch(nf, ly.po, n); err != nil {
				return err
			}
		}
	}
	if err := opencl.Read(r.act, d.actOff[len(d.ls)], d.o32[:N*od]); err != nil {
		return err
	}
	sgemm.ToFloat64(out, od, d.o32, od, N, od)
	d.fwds++
	d.fwdN += N
	return nil
}

// masks writes the dropout masks of block l of n images from g0 into the
// drop buffer, window-major (convMaskKey's stream, one byte a value).
func (d *convDev) masks(l, g0, n int) error {
	ln := d.ls[l].po * 4 * d.spec.Filters
	a := convArgs{k: d.r.mask}
	a.buf(d.r.drop)
	a.int(ln)
	a.int(g0)
	a.u64(sgemm.SplitMix(d.seed + task.Gamma))
	a.u64(d.stream<<48 | uint64(l))
	a.u64(d.thr)
	return a.launch(ln, n)
}

func convBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *convDev) runBackward(gOut []float64, gws, gbs [][]float64) error {
	N, od := d.N, d.spec.OutDim()
	r, nf, L := d.r, d.spec.Filters, len(d.ls)
	if d.reader {
		return fmt.Errorf("conv on the device: a backward pass of an op whose graph was to take no gradient (it reads the resident weights)")
	}
	sgemm.ToFloat32(d.g32, od, gOut, od, N, od)
	// gin is the gradient w.r.t. the output of the current block, gout
	// becomes the one w.r.t. its input (the previous block's output).
	gin, gout := r.gA, r.gB
	if err := opencl.Write(gin, 0, d.g32[:N*od]); err != nil {
		return err
	}
	for l := L - 1; l >= 0; l-- {
		ly := d.ls[l]
		for ci, ch := range d.chunks {
			for g0 := ch[0]; g0 < ch[1]; g0 += d.group[l] {
				n := min(d.group[l], ch[1]-g0)
				rows := n * ly.p
				o := g0 * ly.po * nf
				a := convArgs{k: r.unpool}
				a.buf(r.z)
				a.buf(gin)
				a.int(o)
				a.buf(r.act)
				a.int(d.actOff[l+1] + o)
				a.buf(r.arg)
				a.int(d.argOff[l] + o)
				for _, v := range [...]int{ly.h, ly.w, ly.ho, ly.wo, nf} {
					a.int(v)
				}
				a.f32(d.alpha)
				if err := a.launch(nf, ly.p, n); err != nil {
					return err
				}
				if err := d.im2col(r.act, d.actOff[l]+g0*ly.p*ly.cin, n, ly.h, ly.w, ly.cin, true); err != nil {
					return err
				}
				// The chunk's weight and (through the column of ones) bias
				// gradients, accumulated over its groups.
				var beta float32
				if g0 > ch[0] {
					beta = 1
				}
				if err := d.dev.Sgemm(true, false, ly.k1, nf, rows, 1, r.col, 0, ly.k1, r.z, 0, nf,
					beta, r.part, ci*d.part+d.partOf[l], nf); err != nil {
					return err
				}
				if l == 0 {
					continue // the images need no gradient
				}
				if err := d.im2col(r.z, 0, n, ly.h, ly.w, nf, false); err != nil {
					return err
				}
				if err := d.dev.Sgemm(false, false, rows, ly.cin, 9*nf, 1, r.col, 0, 9*nf, d.weights(), d.wOff[l]+ly.k1*nf, ly.cin,
					0, gout, g0*ly.p*ly.cin, ly.cin); err != nil {
					return err
				}
			}
		}
		gin, gout = gout, gin
	}
	if d.res != nil {
		// The resident parameters' step reads the sums after the pass:
		// they go to the buffer it keeps for this core.
		var err error
		if r.sum, err = d.res.sumBuf(d.seq); err != nil {
			return err
		}
	}
	a := convArgs{k: r.reduce}
	a.buf(r.part)
	a.int(len(d.chunks))
	a.int(d.part)
	a.buf(r.sum)
	if err := a.launch(d.part); err != nil {
		return err
	}
	d.bwds++
	d.bwdN += N
	if d.res != nil {
		// The sums stay in r.sum for the resident parameters' step; the
		// caller's gws and gbs are left as they are.
		d.res.markGraded(d.seq)
		return nil
	}
	if err := opencl.Read(r.sum, 0, d.s32); err != nil {
		return err
	}
	// convReduce's layouts: row tap·cin + c of wt is W[·][c·9 + tap], the
	// last row the bias.
	for l, ly := range d.ls {
		cin, s := ly.cin, d.s32[d.partOf[l]:]
		for row := 0; row < ly.k1; row++ {
			v := s[row*nf : (row+1)*nf]
			if row == ly.k1-1 {
				for f, x := range v {
					gbs[l][f] = float64(x)
				}
				continue
			}
			tap, c := row/cin, row%cin
			for f, x := range v {
				gws[l][f*9*cin+c*9+tap] = float64(x)
			}
		}
	}
	return nil
}
