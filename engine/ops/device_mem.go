package ops

// What a device pass holds: the layouts the device cores' passes ask of
// their arena slot (device_arena.go), and their size in bytes, which the
// engine's memory estimate counts before a run starts. The bytes are
// those bind allocates, so TestDeviceBytesMatchMeasured holds them to
// what a pass on a fresh pool measures.

// convDevNeed is what a conv pass asks of each of its slot's buffers, in
// elements (arg and drop hold bytes, the rest float32).
type convDevNeed struct{ act, arg, col, z, drop, g, part int }

// convDevPlan lays out a pass of N images through the blocks ls of nf
// filters whose chunk partials are part long: per block the images one
// product takes (as many as convDevColCap allows), where its input starts
// in act and its argmaxes in arg (appended to group, actOff and argOff),
// and what the pass asks of each buffer.
func convDevPlan(ls []convLayer, nf, N, part int, group, actOff, argOff []int) ([]int, []int, []int, convDevNeed) {
	var n convDevNeed
	L := len(ls)
	for l, ly := range ls {
		width := ly.k1
		if l > 0 {
			width = max(width, 9*nf)
			n.g = max(n.g, N*ly.p*ly.cin)
		}
		g := max(1, min(N, convDevColCap/(ly.p*max(width, nf))))
		group = append(group, g)
		n.col = max(n.col, g*ly.p*width)
		n.z = max(n.z, g*ly.p*nf)
		n.drop = max(n.drop, g*ly.po*4*nf)
		actOff = append(actOff, n.act)
		n.act += N * ly.p * ly.cin
		argOff = append(argOff, n.arg)
		n.arg += N * ly.po * nf
	}
	actOff = append(actOff, n.act)
	n.act += N * ls[L-1].po * nf
	n.g = max(n.g, N*ls[L-1].po*nf)
	n.part = min(N, convChunks) * part
	return group, actOff, argOff, n
}

// ConvDeviceBytes is what a pass of spec's network over n images holds on
// an OpenCL device (its arena slot, the weights going up included).
func ConvDeviceBytes(spec ConvSpec, n int) float64 {
	ls := spec.layers()
	nf, wLen, part := spec.Filters, 0, 0
	for l, ly := range ls {
		wLen += ly.k1 * nf
		if l > 0 {
			wLen += 9 * nf * ly.cin
		}
		part += ly.k1 * nf
	}
	_, _, _, need := convDevPlan(ls, nf, n, part, nil, nil, nil)
	f := func(v int) float64 { return float64(v) }
	return 4*(f(need.act)+f(need.col)+f(need.z)+2*f(need.g)+f(need.part)+f(wLen)+f(part)) + f(need.arg) + f(need.drop)
}

// resDevNeed is what a ResNet pass of N images asks of its slot's buffers
// (bind), in elements.
type resDevNeed struct{ N, col, cmax, cf, gmax, hmax int }

// resDevPlan lays out a pass of N images: where each convolution's batch
// norm coefficients start (appended to cfOff) and what the pass asks of
// the buffers sized by the widest layer.
func resDevPlan(cv []resConv, blk []resBlock, pl resPool, N int, cfOff []int) ([]int, resDevNeed) {
	n := resDevNeed{N: N, gmax: pl.pou}
	for _, c := range cv {
		if !c.direct {
			n.col = max(n.col, N*c.po*c.kk)
		}
		n.cmax = max(n.cmax, c.Out)
		cfOff = append(cfOff, n.cf)
		n.cf += 5 * N * c.Out
		n.gmax = max(n.gmax, c.po*c.Out)
	}
	for _, bl := range blk {
		c1 := cv[bl.c1]
		n.hmax = max(n.hmax, c1.po*c1.Out)
	}
	return cfOff, n
}

// ResNetDeviceBytes is what a training pass of spec's network over n
// images holds on an OpenCL device (its arena slot: every buffer bind
// makes, with the weight gradient's row-block products; the input needs
// no gradient).
func ResNetDeviceBytes(spec ResNetSpec, n int) float64 {
	cv, blk := resLayers(spec)
	pl := newResPool(cv[0].ResNetConv)
	_, need := resDevPlan(cv, blk, pl, n, nil)
	f := func(v int) float64 { return float64(v) }
	N := f(n)
	wLen, part := 0.0, 0.0
	for _, c := range cv {
		wLen += f(c.kk * c.Out)
		if R := n * c.po; R > resDevWeightRows {
			part = max(part, f((R+resDevWeightRows-1)/resDevWeightRows)*f(c.kk*c.Out))
		}
	}
	floats := N*f(spec.InDim()) + 2*wLen + f(need.col) + 2*N*f(need.cmax) + f(need.cf) +
		N*f(pl.pin) + N*f(pl.pou) + N*f(spec.Widths[3]) + 2*N*f(need.gmax) + N*f(need.hmax) + part
	for _, c := range cv {
		floats += N * f(c.po*c.Out)
	}
	for _, bl := range blk {
		c1 := cv[bl.c1]
		floats += 2 * N * f(c1.po*c1.Out)
	}
	return 4*floats + N*f(pl.pou) + 4*2*N // + the argmaxes' bytes and the episodes' int32s
}
