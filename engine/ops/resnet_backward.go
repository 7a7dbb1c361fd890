package ops

// The ResNet kernel's backward pass. The gradient w.r.t. a convolution's
// output overwrites that output (z), which nothing needs once its batch
// norm's gradient is known, so a Forward allows one Backward.

func (k *resCore[F]) backward(gOut []float64, params, grads [][]float64, gx []float64) {
	k.params, k.grads, k.gxOut = params, grads, gx
	N, L, C, D := k.N, len(k.cv), k.spec.Widths[3], k.spec.Out
	P := k.cv[k.blk[len(k.blk)-1].c2].po
	// The linear layer and the average pooling, in float64.
	resHeadBackward(&k.dws, N, C, D, gOut, k.feat, params[3*L], grads[3*L], grads[3*L+1], k.gfeat)
	g := k.gb[0]
	for i := range N {
		for q := range P {
			for ch, v := range k.gfeat[i*C : (i+1)*C] {
				g[(i*P+q)*C+ch] = F(v / float64(P))
			}
		}
	}
	cur := 0
	for b := len(k.blk) - 1; b >= 0; b-- {
		bl := k.blk[b]
		k.b, k.g, k.gin = b, k.gb[cur], k.gb[1-cur]
		k.overChunks(k.j.bsums)
		k.coefs(bl.c2)
		if bl.proj >= 0 {
			k.coefs(bl.proj)
		}
		k.overChunks(k.j.bin)
		k.weights(bl.c2, max(bl.c2, bl.proj))
		k.overChunks(k.j.c1sums)
		k.coefs(bl.c1)
		k.overChunks(k.j.c1in)
		k.weights(bl.c1, bl.c1)
		cur = 1 - cur
	}
	k.g = k.gb[cur] // w.r.t. the pooled stem
	if gx != nil && len(k.gx) != len(k.x) {
		k.gx = alignedAlloc[F](len(k.x))
	}
	k.overChunks(k.j.ssums)
	k.coefs(0)
	k.overChunks(k.j.sin)
	k.weights(0, 0)
	k.params, k.grads, k.gxOut, k.g, k.gin = nil, nil, nil, nil, nil
}

// coefs combines the image sums of convolution l's batch norm and writes
// the gradients of its γ and β.
func (k *resCore[F]) coefs(l int) {
	k.bn[l].gradCoefs(k.params[3*l+1])
	copy(k.grads[3*l+1], k.bn[l].gGamma)
	copy(k.grads[3*l+2], k.bn[l].gBeta)
}

// weights computes the weight gradients of convolutions a … b (adjacent
// in Convs order).
func (k *resCore[F]) weights(a, b int) {
	k.u0, k.u1 = k.unitAt[a], k.unitAt[b+1]
	k.team.parallel(k.u1-k.u0, false, k.j.wgrad)
}

// blockSumsChunk masks the gradient w.r.t. a chunk's block outputs by the
// final ReLU and sums it for the batch norms of c2 and the projection.
func (k *resCore[F]) blockSumsChunk(ci int) {
	bl := k.blk[k.b]
	cv := &k.cv[bl.c2]
	n := cv.po * cv.Out
	for i := k.chunks[ci][0]; i < k.chunks[ci][1]; i++ {
		g, o := k.g[i*n:(i+1)*n], k.out[k.b][i*n:(i+1)*n]
		for j, v := range o {
			if v <= 0 {
				g[j] = 0
			}
		}
		k.bn[bl.c2].gradSums(i, g, k.z[bl.c2][i*n:(i+1)*n])
		if bl.proj >= 0 {
			k.bn[bl.proj].gradSums(i, g, k.z[bl.proj][i*n:(i+1)*n])
		}
	}
}

// blockInChunk computes, for a chunk, the gradients w.r.t. the outputs of
// c2 and the projection, the gradient w.r.t. h, and the shortcut's part of
// the gradient w.r.t. the block input (which it overwrites).
func (k *resCore[F]) blockInChunk(ci int) {
	sc := k.scratch()
	defer k.release(sc)
	bl := k.blk[k.b]
	gin := k.gin
	k.gradIn(sc, bl.c2, ci, k.g, k.gh, false)
	if bl.proj >= 0 {
		k.gradIn(sc, bl.proj, ci, k.g, gin, false)
		return
	}
	n := k.cv[bl.c2].po * k.cv[bl.c2].Out
	lo, hi := k.chunks[ci][0], k.chunks[ci][1]
	copy(gin[lo*n:hi*n], k.g[lo*n:hi*n])
}

func (k *resCore[F]) c1SumsChunk(ci int) {
	l := k.blk[k.b].c1
	n := k.cv[l].po * k.cv[l].Out
	for i := k.chunks[ci][0]; i < k.chunks[ci][1]; i++ {
		g, h := k.gh[i*n:(i+1)*n], k.h[k.b][i*n:(i+1)*n]
		for j, v := range h {
			if v <= 0 {
				g[j] = 0
			}
		}
		k.bn[l].gradSums(i, g, k.z[l][i*n:(i+1)*n])
	}
}

func (k *resCore[F]) c1InChunk(ci int) {
	sc := k.scratch()
	defer k.release(sc)
	k.gradIn(sc, k.blk[k.b].c1, ci, k.gh, k.gin, true)
}

func (k *resCore[F]) stemSumsChunk(ci int) {
	pl := &k.pl
	n := k.cv[0].po * k.cv[0].Out
	for i := k.chunks[ci][0]; i < k.chunks[ci][1]; i++ {
		gs := k.stem[i*pl.pin : (i+1)*pl.pin]
		resPoolBackward(pl, gs, k.g[i*pl.pou:(i+1)*pl.pou], k.pool[i*pl.pou:(i+1)*pl.pou], k.arg[i*pl.pou:(i+1)*pl.pou])
		k.bn[0].gradSums(i, gs, k.z[0][i*n:(i+1)*n])
	}
}

func (k *resCore[F]) stemInChunk(ci int) {
	sc := k.scratch()
	defer k.release(sc)
	var dst []F
	if k.gxOut != nil {
		dst = k.gx
	}
	k.gradIn(sc, 0, ci, k.stem, dst, false)
	if dst != nil {
		in := k.spec.InDim()
		lo, hi := k.chunks[ci][0], k.chunks[ci][1]
		k.fm.toF64(k.gxOut[lo*in:], in, k.gx[lo*in:], in, hi-lo, in)
	}
}

// gradIn turns the gradient g w.r.t. the normalized outputs of
// convolution l into the gradient w.r.t. its outputs (in place of them)
// for a chunk's images, and writes (add: adds) the gradient w.r.t. the
// convolution's input into dst (nil: not wanted).
func (k *resCore[F]) gradIn(sc *resScratch[F], l, ci int, g, dst []F, add bool) {
	cv, z := &k.cv[l], k.z[l]
	n, pin := cv.po*cv.Out, cv.p*cv.In
	lo, hi := k.chunks[ci][0], k.chunks[ci][1]
	if dst != nil && !add && !cv.direct && !cv.wino {
		clear(dst[lo*pin : hi*pin])
	}
	for g0 := lo; g0 < hi; g0 += cv.group {
		g1 := min(g0+cv.group, hi)
		for i := g0; i < g1; i++ {
			k.bn[l].gradInput(i, z[i*n:(i+1)*n], g[i*n:(i+1)*n], z[i*n:(i+1)*n])
		}
		if dst == nil {
			continue
		}
		if cv.wino {
			k.winoConv(sc, cv, z, dst, g0, g1, cv.Out, cv.In, k.ut[l], false, &resWinoRot, add)
			continue
		}
		rows := (g1 - g0) * cv.po
		if cv.direct {
			var beta F
			if add {
				beta = 1
			}
			k.fm.gemm(&sc.ws, false, true, rows, cv.In, cv.Out, 1, z[g0*n:], cv.Out, k.wt[l], cv.Out, beta, dst[g0*pin:], cv.In, false)
			continue
		}
		k.fm.gemm(&sc.ws, false, true, rows, cv.kk, cv.Out, 1, z[g0*n:], cv.Out, k.wt[l], cv.Out, 0, sc.col, cv.kk, false)
		resCol2im(dst, sc.col, cv, g0*cv.po, g1*cv.po)
	}
}

// weightUnit sums, over the whole batch in row order, one unit's columns
// of a convolution's weight gradient: im2col(input)ᵀ·dz, products of
// resUnitRows rows in F added up in float64.
func (k *resCore[F]) weightUnit(u int) {
	sc := k.scratch()
	defer k.release(sc)
	l, c0, c1 := k.units[k.u0+u][0], k.units[k.u0+u][1], k.units[k.u0+u][2]
	cv, src, dz := &k.cv[l], k.src[l], k.z[l]
	w := c1 - c0
	acc, tmp := sc.acc[:w*cv.Out], sc.tmp[:w*cv.Out]
	clear(acc)
	R := k.N * cv.po
	for r0 := 0; r0 < R; r0 += resUnitRows {
		r1 := min(r0+resUnitRows, R)
		a, lda := sc.ucol, w
		if cv.direct {
			a, lda = src[r0*cv.In+c0:], cv.In
		} else {
			resIm2col(sc.ucol, w, src, cv, r0, r1, c0, c1)
		}
		k.fm.gemm(&sc.ws, true, false, w, cv.Out, r1-r0, 1, a, lda, dz[r0*cv.Out:], cv.Out, 0, tmp, cv.Out, false)
		k.fm.addF64(acc, tmp)
	}
	// Filters outer, in blocks: the unit's columns of a few rows of gw
	// stay in L1 while they are written, where walking acc in order wrote
	// every element to another line.
	gw, kk2 := k.grads[3*l], cv.K*cv.K
	for f0 := 0; f0 < cv.Out; f0 += resTransBlock {
		f1 := min(f0+resTransBlock, cv.Out)
		for j := c0; j < c1; j++ {
			o := (j%cv.In)*kk2 + j/cv.In
			src := acc[(j-c0)*cv.Out+f0 : (j-c0)*cv.Out+f1]
			for f, v := range src {
				gw[(f0+f)*cv.kk+o] = v
			}
		}
	}
}
