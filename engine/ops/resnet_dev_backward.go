package ops

import (
	"fmt"

	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/task"
)

// The device ResNet's backward pass, in resnet_backward.go's order: the
// gradient w.r.t. a convolution's output overwrites that output (z) once
// its batch norm's sums are known.

func (d *resDev) backward(gOut []float64, params, grads [][]float64, gx []float64) {
	if !d.lease.holds() {
		d.err = errDevReleased("resnet")
		return
	}
	d.params, d.grads = params, grads
	d.err = d.bwd(gOut, gx)
	d.params, d.grads = nil, nil
	d.lease.release()
}

func (d *resDev) bwd(gOut, gx []float64) error {
	N, L, C, D := d.N, len(d.cv), d.spec.Widths[3], d.spec.Out
	if d.res != nil {
		if d.reader {
			return fmt.Errorf("resnet on the device: a backward pass of an op whose graph was to take no gradient (it reads the resident weights)")
		}
		// The weight gradients stay for the resident weights' step, in
		// the buffer it keeps for this core.
		var err error
		if d.gw, err = d.res.sumBuf(d.seq); err != nil {
			return err
		}
	}
	P := d.cv[d.blk[len(d.blk)-1].c2].po
	params, grads := d.params, d.grads
	// The linear layer and the average pooling, in float64 on the host as
	// on the CPU; the pooled gradient goes up once.
	resHeadBackward(&d.dws, N, C, D, gOut, d.feat, params[3*L], grads[3*L], grads[3*L+1], d.gfeat)
	for i, v := range d.gfeat {
		d.hgf[i] = float32(v / float64(P))
	}
	if err := opencl.Write(d.gf, 0, d.hgf); err != nil {
		return err
	}
	if err := (&convArgs{k: d.kn.bcast}).buf(d.gb[0]).buf(d.gf).int(N * P * C).int(P * C).int(C).groups(N * P * C); err != nil {
		return err
	}
	cur := 0
	for b := len(d.blk) - 1; b >= 0; b-- {
		bl := d.blk[b]
		g, gin := d.gb[cur], d.gb[1-cur]
		if err := d.gradSums(bl.c2, g, d.out[b]); err != nil {
			return err
		}
		if bl.proj >= 0 {
			if err := d.gradSums(bl.proj, g, nil); err != nil {
				return err
			}
		}
		if err := d.gradIn(bl.c2, g, d.gh, false); err != nil {
			return err
		}
		if bl.proj >= 0 {
			if err := d.gradIn(bl.proj, g, gin, false); err != nil {
				return err
			}
		} else {
			c2 := d.cv[bl.c2]
			if err := opencl.Copy(gin, 0, g, 0, N*c2.po*c2.Out); err != nil {
				return err
			}
		}
		for _, l := range [2]int{bl.c2, bl.proj} {
			if l < 0 {
				continue
			}
			if err := d.weightGrad(l); err != nil {
				return err
			}
		}
		if err := d.gradSums(bl.c1, d.gh, d.h[b]); err != nil {
			return err
		}
		if err := d.gradIn(bl.c1, d.gh, gin, true); err != nil {
			return err
		}
		if err := d.weightGrad(bl.c1); err != nil {
			return err
		}
		cur = 1 - cur
	}
	// The stem: unpool into the stem's buffer (its values are not needed
	// any more), its batch norm, and the gradient w.r.t. the images.
	pl := &d.pl
	if err := (&convArgs{k: d.kn.unpool}).buf(d.stem).buf(d.gb[cur]).buf(d.pool).buf(d.arg).int(N * pl.pin).int(pl.h).int(pl.w).int(pl.c).int(pl.ho).int(pl.wo).int(pl.pt).int(pl.pl).groups(N * pl.pin); err != nil {
		return err
	}
	if err := d.gradSums(0, d.stem, nil); err != nil {
		return err
	}
	var dst *opencl.Buffer
	if gx != nil {
		var err error
		if d.gx, err = d.resDevBuf(resRoleGX, N*d.spec.InDim()); err != nil {
			return err
		}
		d.hgx = task.Grow(d.hgx, N*d.spec.InDim())
		dst = d.gx
	}
	if err := d.gradIn(0, d.stem, dst, false); err != nil {
		return err
	}
	if err := d.weightGrad(0); err != nil {
		return err
	}
	d.bwds++
	d.bwdN += N
	if d.res != nil {
		d.res.markGraded(d.seq)
	} else if err := d.readWeightGrads(grads); err != nil {
		return err
	}
	if gx != nil {
		if err := opencl.Read(d.gx, 0, d.hgx); err != nil {
			return err
		}
		for i, v := range d.hgx {
			gx[i] = float64(v)
		}
	}
	return nil
}

// readWeightGrads brings the weight gradients down at once into grads.
func (d *resDev) readWeightGrads(grads [][]float64) error {
	if err := opencl.Read(d.gw, 0, d.hw); err != nil {
		return err
	}
	for l, cv := range d.cv {
		gw, wt, kk2 := grads[3*l], d.hw[d.wOff[l]:], cv.K*cv.K
		for f := range cv.Out {
			for c := range cv.In {
				for tap := range kk2 {
					gw[f*cv.kk+c*kk2+tap] = float64(wt[(tap*cv.In+c)*cv.Out+f])
				}
			}
		}
	}
	return nil
}

// gradSums sums the gradient g w.r.t. batch norm l's output (masked first
// by mask ≤ 0, nil: none) for its coefficients, writes the gradients of
// its γ and β, and puts the input gradient's coefficients on the device.
func (d *resDev) gradSums(l int, g, mask *opencl.Buffer) error {
	if err := d.sums(l, g, d.z[l], mask, true); err != nil {
		return err
	}
	bn, cv := &d.bn[l], &d.cv[l]
	bn.gradCoefs(d.params[3*l+1])
	copy(d.grads[3*l+1], bn.gGamma)
	copy(d.grads[3*l+2], bn.gBeta)
	ne := bn.ne * cv.Out
	hc := append(append(append(d.hcf[:0], bn.k1[:ne]...), bn.k2[:ne]...), bn.k3[:ne]...)
	return opencl.Write(d.cf, d.cfOff[l]+2*ne, hc)
}

// gradIn turns g (the gradient w.r.t. batch norm l's output) into the
// gradient w.r.t. convolution l's output, in place of z[l], and writes
// (add: adds) the gradient w.r.t. the convolution's input into dst (nil:
// not wanted).
func (d *resDev) gradIn(l int, g, dst *opencl.Buffer, add bool) error {
	cv := &d.cv[l]
	rows := d.N * cv.po
	n, ne, o := rows*cv.Out, d.bn[l].ne*cv.Out, d.cfOff[l]
	if err := (&convArgs{k: d.kn.grad}).buf(d.z[l]).buf(g).buf(d.cf).int(o + 2*ne).int(o + 3*ne).int(o + 4*ne).buf(d.epi).int(d.N).int(n).int(cv.po * cv.Out).int(cv.Out).groups(n); err != nil {
		return err
	}
	if dst == nil {
		return nil
	}
	if cv.direct {
		var beta float32
		if add {
			beta = 1
		}
		return d.dev.Sgemm(false, true, rows, cv.In, cv.Out, 1, d.z[l], 0, cv.Out, d.w, d.wOff[l], cv.Out, beta, dst, 0, cv.In)
	}
	if err := d.dev.Sgemm(false, true, rows, cv.kk, cv.Out, 1, d.z[l], 0, cv.Out, d.w, d.wOff[l], cv.Out, 0, d.col, 0, cv.kk); err != nil {
		return err
	}
	m := d.N * cv.p * cv.In
	return (&convArgs{k: d.kn.col2im}).buf(dst).buf(d.col).int(m).int(cv.In).int(cv.K).int(cv.Stride).int(cv.Height).int(cv.Width).int(cv.OutHeight).int(cv.OutWidth).int(cv.pt).int(cv.pl).flag(add).groups(m)
}

// resDevWeightRows is the depth of one product of a weight gradient: the
// batch's im2col rows are split into blocks of this many, multiplied at
// once (one batched sgemm) and their products summed in block order. The
// split keeps a GPU busy on the narrow, deep products of the first layers
// (the stem's is 147×64 over 132 300 rows at 84×84 and 75 images) and
// keeps float32 sums short, as the CPU's resUnitRows does.
const resDevWeightRows = 4096

// weightGrad writes convolution l's weight gradient, im2col(input)ᵀ·dz,
// into gw.
func (d *resDev) weightGrad(l int) error {
	cv := &d.cv[l]
	a := d.col
	if cv.direct {
		a = d.src[l]
	} else if err := d.im2col(l); err != nil {
		return err
	}
	R, rb, wo := d.N*cv.po, d.wRows, cv.kk*cv.Out
	if R <= rb {
		return d.dev.Sgemm(true, false, cv.kk, cv.Out, R, 1, a, 0, cv.kk, d.z[l], 0, cv.Out, 0, d.gw, d.wOff[l], cv.Out)
	}
	full := R / rb
	parts := full
	if R > full*rb {
		parts++
	}
	if d.part == nil || d.part.Len() < parts*wo {
		var err error
		if d.part, err = d.resDevBuf(resRolePart, parts*wo); err != nil {
			return err
		}
	}
	if err := d.dev.SgemmStridedBatched(true, false, cv.kk, cv.Out, rb, 1, a, 0, cv.kk, rb*cv.kk,
		d.z[l], 0, cv.Out, rb*cv.Out, 0, d.part, 0, cv.Out, wo, full); err != nil {
		return err
	}
	if parts > full {
		if err := d.dev.Sgemm(true, false, cv.kk, cv.Out, R-full*rb, 1, a, full*rb*cv.kk, cv.kk,
			d.z[l], full*rb*cv.Out, cv.Out, 0, d.part, full*wo, cv.Out); err != nil {
			return err
		}
	}
	return (&convArgs{k: d.kn.addParts}).buf(d.gw).int(d.wOff[l]).buf(d.part).int(wo).int(parts).groups(wo)
}
