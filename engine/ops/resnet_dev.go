package ops

import (
	"fmt"
	"math"
	"runtime"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/internal/opencl"
)

// resDev is the ResNet kernel on an OpenCL device (ResNetKernel picks it
// when its pool has a device and it is not forced to float64). The
// convolutions are channels-last im2col products (CLBlast's sgemm; a 1×1
// stride-1 convolution's input is its own im2col), and every activation
// the backward pass needs stays on the device.
//
// Batch norm's statistics are combined on the host: the device sums each
// image's channels (compensated float32 sums in a fixed order), the host
// reads those N×C sums and runs the CPU kernel's own bnState code
// (moments, gradCoefs, fold) in float64, and writes the few coefficients
// back. Every mode, ε and running-statistics fold is therefore the CPU's
// by construction, at the price of a small read and write per batch norm.
// The global pool's sums come down the same way and the linear layer runs
// on the host in float64, as on the CPU (10 MFLOP of 131 GFLOP).
//
// Weights go up once per forward (float64→float32 on the host, Go's
// float32()), the weight gradients come down once per backward, unless a
// ResNetResident holds the convolution weights: the passes then read its
// float32 weights and leave their gradients in its sum buffer (w and gw
// are its), and an evaluation's (a reader's) pass sends the host's values
// only when they are not the ones those weights were made from. The
// other buffers are a slot of the pool's arena (device_arena.go), held
// from Forward to the end of Backward and grown to the largest batch
// asked.
type resDev struct {
	dev   *opencl.Device
	spec  ResNetSpec
	cv    []resConv
	blk   []resBlock
	pl    resPool
	kn    resDevKernels
	mem   *resDevMem
	lease devLease
	need  resDevNeed
	bn    []bnState[float32]
	wOff  []int // per conv: where its weights (kk×Out, as resCore's wt) are in w and gw
	cfOff []int // per conv: its coefficients in cf, five blocks of ne·Out: scale, shift, k1, k2, k3
	wLen  int
	wRows int // resDevWeightRows (tests lower it)

	N                    int
	x, w, gw, col, s, cf *opencl.Buffer // s: per-image sums, two blocks of N·C
	stem, pool, gf, gx   *opencl.Buffer
	part                 *opencl.Buffer // a weight gradient's products of row blocks
	arg, epi             *opencl.Buffer // epi: per image its episode, then whether it entered the statistics
	z, src, h, out       []*opencl.Buffer
	gb                   [2]*opencl.Buffer
	gh                   *opencl.Buffer

	hx, hw, hs, hcf, hgf, hgx []float32 // host staging
	hepi                      []int32
	feat, gfeat               []float64
	dws                       dgemm.Workspace

	params, grads [][]float64
	err           error // the last pass's failure

	residentCore             // its res: the resident weights, when set (ResNetResident)
	resTs        [][]float64 // a reader's host weights, in the model's order
}

// resDevKernels are one resDev's kernel objects: setting arguments is not
// safe from two goroutines, and two kernels may run at once on a device.
type resDevKernels struct {
	im2col, col2im, sums, apply, grad, pool, unpool, bcast, addParts *opencl.Kernel
}

// resDevMem holds the kernel objects of a resDev, released when the resDev
// is collected (a ResNetKernel has no Close); its buffers are its arena
// slot's.
type resDevMem struct {
	kernels []*opencl.Kernel
}

func (m *resDevMem) release() {
	for _, k := range m.kernels {
		k.Release()
	}
	m.kernels = nil
}

func newResDev(dev *opencl.Device, spec ResNetSpec) (*resDev, error) {
	prog, err := deviceProgram(dev, "resnet")
	if err != nil {
		return nil, err
	}
	d := &resDev{dev: dev, spec: spec, mem: &resDevMem{}, wRows: resDevWeightRows}
	runtime.AddCleanup(d, (*resDevMem).release, d.mem)
	for _, kp := range []struct {
		k    **opencl.Kernel
		name string
	}{{&d.kn.im2col, "res_im2col"}, {&d.kn.col2im, "res_col2im"}, {&d.kn.sums, "res_sums"},
		{&d.kn.apply, "res_bn_apply"}, {&d.kn.grad, "res_bn_grad"}, {&d.kn.pool, "res_pool"},
		{&d.kn.unpool, "res_unpool"}, {&d.kn.bcast, "res_bcast"}, {&d.kn.addParts, "res_add_parts"}} {
		if *kp.k, err = prog.Kernel(kp.name); err != nil {
			d.mem.release()
			return nil, err
		}
		d.mem.kernels = append(d.mem.kernels, *kp.k)
	}
	d.cv, d.blk = resLayers(spec)
	d.pl = newResPool(d.cv[0].ResNetConv)
	d.bn = make([]bnState[float32], len(d.cv))
	for _, cv := range d.cv {
		d.wOff = append(d.wOff, d.wLen)
		d.wLen += cv.kk * cv.Out
	}
	return d, nil
}

// resDevMaxLen is the most elements a buffer may have: kernels index with
// 32-bit ints.
const resDevMaxLen = math.MaxInt32

// resize lays out the buffers for N images and binds them (bind).
func (d *resDev) resize(N int) error {
	if N == d.N {
		return d.bind()
	}
	d.N = 0 // until every buffer is there
	d.cfOff, d.need = resDevPlan(d.cv, d.blk, d.pl, N, d.cfOff[:0])
	need := d.need
	for _, n := range []int{need.col, N * d.spec.InDim(), N * d.pl.pin, N * need.gmax} {
		if n > resDevMaxLen || n < 0 {
			return fmt.Errorf("resnet on %s: %d images need a buffer of %d values, over the kernels' %d: use smaller batches", d.dev.Info.Name, N, n, resDevMaxLen)
		}
	}
	d.z, d.src = make([]*opencl.Buffer, len(d.cv)), make([]*opencl.Buffer, len(d.cv))
	d.h, d.out = make([]*opencl.Buffer, len(d.blk)), make([]*opencl.Buffer, len(d.blk))
	if err := d.bind(); err != nil {
		return err
	}
	d.N = N
	d.hx = make([]float32, N*d.spec.InDim())
	d.hw = make([]float32, d.wLen)
	d.hs = make([]float32, 2*N*need.cmax)
	d.hcf = make([]float32, 3*N*need.cmax)
	d.hgf = make([]float32, N*d.spec.Widths[3])
	d.hepi = make([]int32, 2*N)
	d.feat = make([]float64, N*d.spec.Widths[3])
	d.gfeat = make([]float64, N*d.spec.Widths[3])
	return nil
}

func (d *resDev) forward(x []float64, params [][]float64, lay BNLayout, mode BNMode, run []BNStats, out []float64) {
	d.params = params
	d.err = d.fwd(x, lay, mode, run, out)
}

func (d *resDev) fwd(x []float64, lay BNLayout, mode BNMode, run []BNStats, out []float64) error {
	N := lay.Images()
	if err := d.resize(N); err != nil {
		return err
	}
	for i, v := range x {
		d.hx[i] = float32(v)
	}
	if err := opencl.Write(d.x, 0, d.hx); err != nil {
		return err
	}
	for l, cv := range d.cv {
		d.bn[l].setup(cv.Out, cv.po, lay, mode)
	}
	if err := d.setWeights(); err != nil {
		return err
	}
	for i := range N {
		e, st := lay.episode(i)
		if mode == BNRunning {
			e, st = 0, false
		}
		d.hepi[i], d.hepi[N+i] = int32(e), 0
		if st {
			d.hepi[N+i] = 1
		}
	}
	if err := opencl.Write(d.epi, 0, d.hepi); err != nil {
		return err
	}
	conv := func(l int) error {
		var r *BNStats
		if mode == BNRunning {
			r = &run[l]
		}
		return d.conv(l, r)
	}
	if err := conv(0); err != nil {
		return err
	}
	if err := d.apply(0, d.stem, nil, true); err != nil {
		return err
	}
	pl := &d.pl
	if err := (&convArgs{k: d.kn.pool}).buf(d.pool).buf(d.arg).buf(d.stem).int(N * pl.pou).int(pl.h).int(pl.w).int(pl.c).int(pl.ho).int(pl.wo).int(pl.pt).int(pl.pl).groups(N * pl.pou); err != nil {
		return err
	}
	for b, bl := range d.blk {
		if err := conv(bl.c1); err != nil {
			return err
		}
		if err := d.apply(bl.c1, d.h[b], nil, true); err != nil {
			return err
		}
		if err := conv(bl.c2); err != nil {
			return err
		}
		add := d.src[bl.c1]
		if bl.proj >= 0 {
			if err := conv(bl.proj); err != nil {
				return err
			}
			if err := d.apply(bl.proj, d.out[b], nil, false); err != nil {
				return err
			}
			add = d.out[b]
		}
		if err := d.apply(bl.c2, d.out[b], add, true); err != nil {
			return err
		}
	}
	// Global average pooling: per-image sums on the device, the mean and
	// the linear layer in float64 on the host.
	last := d.cv[d.blk[len(d.blk)-1].c2]
	C, P := last.Out, last.po
	fin := d.out[len(d.blk)-1]
	if err := (&convArgs{k: d.kn.sums}).buf(fin).buf(fin).buf(fin).buf(d.s).int(N * C).int(P).int(C).flag(false).flag(false).groups(N * C); err != nil {
		return err
	}
	hs := d.hs[:N*C]
	if err := opencl.Read(d.s, 0, hs); err != nil {
		return err
	}
	for i, v := range hs {
		d.feat[i] = float64(v) / float64(P)
	}
	L := len(d.cv)
	resHead(&d.dws, N, C, d.spec.Out, d.feat, d.params[3*L], d.params[3*L+1], out)
	d.fwds++
	d.fwdN += N
	return nil
}

// setWeights makes w the float32 weights of the pass: the host's
// converted and sent up, or the resident ones (a reader's after
// readerWeights).
func (d *resDev) setWeights() error {
	if d.res != nil {
		if d.reader {
			d.resTs = d.resTs[:0]
			for l := range d.cv {
				d.resTs = append(d.resTs, d.params[3*l])
			}
			if err := d.res.readerWeights(d.resTs); err != nil {
				return err
			}
		}
		d.w = d.res.r.w
		return nil
	}
	for l, cv := range d.cv {
		w, wt, kk2 := d.params[3*l], d.hw[d.wOff[l]:], cv.K*cv.K
		for f := range cv.Out {
			for c := range cv.In {
				for tap := range kk2 {
					wt[(tap*cv.In+c)*cv.Out+f] = float32(w[f*cv.kk+c*kk2+tap])
				}
			}
		}
	}
	return opencl.Write(d.w, 0, d.hw)
}

// conv runs convolution l over the batch into z[l] and sets its batch
// norm's statistics (from run in running mode) and coefficients.
func (d *resDev) conv(l int, run *BNStats) error {
	cv, N := &d.cv[l], d.N
	rows := N * cv.po
	a := d.col
	if cv.direct {
		a = d.src[l]
	} else if err := d.im2col(l); err != nil {
		return err
	}
	if err := d.dev.Sgemm(false, false, rows, cv.Out, cv.kk, 1, a, 0, cv.kk, d.w, d.wOff[l], cv.Out, 0, d.z[l], 0, cv.Out); err != nil {
		return err
	}
	bn := &d.bn[l]
	if bn.mode != BNRunning {
		if err := d.sums(l, d.z[l], d.z[l], nil, false); err != nil {
			return err
		}
	}
	bn.moments(d.params[3*l+1], d.params[3*l+2], run)
	ne := bn.ne * cv.Out
	hc := append(append(d.hcf[:0], bn.scale[:ne]...), bn.shift[:ne]...)
	return opencl.Write(d.cf, d.cfOff[l], hc)
}

func (d *resDev) im2col(l int) error {
	cv := &d.cv[l]
	n := d.N * cv.po * cv.kk
	return (&convArgs{k: d.kn.im2col}).buf(d.col).buf(d.src[l]).int(n).int(cv.In).int(cv.K).int(cv.Stride).int(cv.Height).int(cv.Width).int(cv.OutHeight).int(cv.OutWidth).int(cv.pt).int(cv.pl).groups(n)
}

// sums computes each image's channel sums of a and a·b (a·a when b is a),
// zeroing a first where mask (nil: none) is ≤ 0, and puts them in batch
// norm l's per-image sums.
func (d *resDev) sums(l int, a, b, mask *opencl.Buffer, prod bool) error {
	cv, N := &d.cv[l], d.N
	nc := N * cv.Out
	masked := mask != nil
	if !masked {
		mask = a
	}
	if err := (&convArgs{k: d.kn.sums}).buf(a).buf(b).buf(mask).buf(d.s).int(nc).int(cv.po).int(cv.Out).flag(prod).flag(masked).groups(nc); err != nil {
		return err
	}
	hs := d.hs[:2*nc]
	if err := opencl.Read(d.s, 0, hs); err != nil {
		return err
	}
	bn := &d.bn[l]
	for i := range nc {
		bn.s1[i], bn.s2[i] = float64(hs[i]), float64(hs[nc+i])
	}
	return nil
}

// apply writes BN_l(z_l) (+ add, nil for none; through a ReLU if relu)
// into dst.
func (d *resDev) apply(l int, dst, add *opencl.Buffer, relu bool) error {
	cv := &d.cv[l]
	n, o := d.N*cv.po*cv.Out, d.cfOff[l]
	hasAdd := add != nil
	if !hasAdd {
		add = dst
	}
	return (&convArgs{k: d.kn.apply}).buf(dst).buf(d.z[l]).buf(add).buf(d.cf).int(o).int(o + d.bn[l].ne*cv.Out).buf(d.epi).int(n).int(cv.po * cv.Out).int(cv.Out).flag(hasAdd).flag(relu).groups(n)
}

func (d *resDev) fold(run []BNStats) {
	for l := range d.bn {
		d.bn[l].fold(&run[l])
	}
}
