package ops

import "github.com/mkbench/mkbench/engine/internal/sgemm"

// The Winograd path of a block: F(2×2, 3×3) (see internal/sgemm/wino.go for
// the transforms). A 2×2 output tile is exactly a 2×2 pooling window, so
// the output transform finishes the block (bias, ReLU, dropout, pooling)
// without writing the pre-pool map, and its backward starts from the
// pooled gradient. Tile (ty, tx) reads rows 2ty−1 … 2ty+2 and columns
// 2tx−1 … 2tx+2 of the image, zero outside: the image is copied into a
// zero-bordered buffer of (2·ho+2)×(2·wo+2) pixels first.
//
// Per group of n images, T = n·po tiles: V (16 matrices T×cin) = input
// transforms, M[ξ] = V[ξ]·U[ξ] (16 products T×cin by cin×F), output
// transforms. Backward: dM from the pooled gradient, dU[ξ] += V[ξ]ᵀ·dM[ξ]
// (summed in the Winograd domain over the chunk and transformed to the
// 3×3 filters once, in the reduction), dV[ξ] = dM[ξ]·U[ξ]ᵀ and the
// transposed input transform accumulated onto the padded input gradient.

// winoPad copies the h×w×c image img into the zero-bordered buffer pad of
// the block's Winograd tiles: pixel (y, x) at ((y+1)·pw + x+1)·c.
func winoPad[F float](pad, img []F, ly convLayer) {
	c, pw, ph := ly.cin, 2*ly.wo+2, 2*ly.ho+2
	clear(pad[:pw*c])
	for y := 0; y < ly.h; y++ {
		row := pad[(y+1)*pw*c : (y+2)*pw*c]
		clear(row[:c])
		copy(row[c:(ly.w+1)*c], img[y*ly.w*c:(y+1)*ly.w*c])
		clear(row[(ly.w+1)*c:])
	}
	clear(pad[(ly.h+1)*pw*c : ph*pw*c])
}

// winoInputs writes the input transforms of images g0 … g1−1 of block l
// into sc.wv (16 matrices of T×cin).
func (k *convCore[F]) winoInputs(l, g0, g1 int, sc *convScratch[F]) {
	ly := k.ls[l]
	c, pw := ly.cin, 2*ly.wo+2
	T := (g1 - g0) * ly.po
	for i := 0; i < g1-g0; i++ {
		winoPad(sc.pad, k.act[l][(g0+i)*ly.p*c:(g0+i+1)*ly.p*c], ly)
		for ty := 0; ty < ly.ho; ty++ {
			for tx := 0; tx < ly.wo; tx++ {
				t := i*ly.po + ty*ly.wo + tx
				k.fm.winoIn(sc.wv[t*c:], T*c, sc.pad[(2*ty*pw+2*tx)*c:], pw*c, c)
			}
		}
	}
}

// winoFlags tells the output kernels which cells of tile (ty, tx) the map
// lacks.
func winoFlags(ly convLayer, ty, tx int) int {
	f := 0
	if 2*tx+1 >= ly.w {
		f |= sgemm.WinoNoCol1
	}
	if 2*ty+1 >= ly.h {
		f |= sgemm.WinoNoRow1
	}
	return f
}

// forwardWino runs block l for images g0 … g1−1.
func (k *convCore[F]) forwardWino(l, g0, g1 int, sc *convScratch[F]) {
	ly, nf := k.ls[l], k.spec.Filters
	c, n := ly.cin, g1-g0
	T := n * ly.po
	k.winoInputs(l, g0, g1, sc)
	for x := 0; x < 16; x++ {
		k.fm.gemm(&sc.ws, false, false, T, nf, c, 1, sc.wv[x*T*c:], c, k.u[l][x*c*nf:], nf, 0, sc.wm[x*T*nf:], nf, false)
	}
	var masks []F
	if k.train {
		masks = sc.mask[:T*4*nf]
		for i := 0; i < n; i++ {
			k.fm.mask(masks[i*ly.po*4*nf:(i+1)*ly.po*4*nf], convMaskKey(k.seed, k.stream, g0+i, l), k.thr)
		}
	}
	for i := 0; i < n; i++ {
		o := (g0 + i) * ly.po * nf
		out, arg := k.act[l+1][o:o+ly.po*nf], k.arg[l][o:o+ly.po*nf]
		for ty := 0; ty < ly.ho; ty++ {
			for tx := 0; tx < ly.wo; tx++ {
				wi := ty*ly.wo + tx
				t := i*ly.po + wi
				var m []F
				if masks != nil {
					m = masks[t*4*nf : (t+1)*4*nf]
				}
				k.fm.winoOutPool(out[wi*nf:(wi+1)*nf], arg[wi*nf:(wi+1)*nf], sc.wm[t*nf:], T*nf, k.bias[l], k.alpha, m, winoFlags(ly, ty, tx))
			}
		}
	}
}

// backwardWino back-propagates block l for images g0 … g1−1 of the chunk
// that starts at image lo: gin holds the gradient w.r.t. the chunk's
// pooled outputs, gout receives the one w.r.t. its inputs (l > 0), gw is
// the block's partial (dU, 16 matrices cin×F, then the bias), which the
// products overwrite if beta is 0.
func (k *convCore[F]) backwardWino(l, lo, g0, g1 int, gin, gout, gw []F, beta F, sc *convScratch[F]) {
	ly, nf := k.ls[l], k.spec.Filters
	c, n := ly.cin, g1-g0
	T := n * ly.po
	k.winoInputs(l, g0, g1, sc)
	db := gw[16*c*nf:]
	for i := 0; i < n; i++ {
		o := (g0 + i) * ly.po * nf
		gi := gin[(g0-lo+i)*ly.po*nf:][:ly.po*nf]
		out, arg := k.act[l+1][o:o+ly.po*nf], k.arg[l][o:o+ly.po*nf]
		for wi := 0; wi < ly.po; wi++ {
			t := i*ly.po + wi
			k.fm.winoGradOut(sc.wm[t*nf:], T*nf, db, gi[wi*nf:(wi+1)*nf], out[wi*nf:(wi+1)*nf], arg[wi*nf:(wi+1)*nf], k.alpha)
		}
	}
	for x := 0; x < 16; x++ {
		k.fm.gemm(&sc.ws, true, false, c, nf, T, 1, sc.wv[x*T*c:], c, sc.wm[x*T*nf:], nf, beta, gw[x*c*nf:], nf, false)
	}
	if l == 0 {
		return
	}
	// dV overwrites V, whose last use was the products above.
	for x := 0; x < 16; x++ {
		k.fm.gemm(&sc.ws, false, false, T, c, nf, 1, sc.wm[x*T*nf:], nf, k.ut[l][x*nf*c:], c, 0, sc.wv[x*T*c:], c, false)
	}
	pw, ph := 2*ly.wo+2, 2*ly.ho+2
	pad := sc.pad[:ph*pw*c]
	for i := 0; i < n; i++ {
		clear(pad)
		for ty := 0; ty < ly.ho; ty++ {
			for tx := 0; tx < ly.wo; tx++ {
				t := i*ly.po + ty*ly.wo + tx
				k.fm.winoInT(pad[(2*ty*pw+2*tx)*c:], pw*c, sc.wv[t*c:], T*c, c)
			}
		}
		g := gout[(g0-lo+i)*ly.p*c : (g0-lo+i+1)*ly.p*c]
		for y := 0; y < ly.h; y++ {
			copy(g[y*ly.w*c:(y+1)*ly.w*c], pad[((y+1)*pw+1)*c:((y+1)*pw+1+ly.w)*c])
		}
	}
}

// setupWino transforms the filters of block l (winoFilters) into k.ut[l]
// and makes the channel-major matrices the forward products read from
// them by blocked transposes.
func (k *convCore[F]) setupWino(l int, w, b []float64) {
	ly, nf := k.ls[l], k.spec.Filters
	c := ly.cin
	for f := 0; f < nf; f++ {
		k.bias[l][f] = F(b[f])
	}
	winoFilters(k.ut[l], w, nf, c)
	for x := 0; x < 16; x++ {
		k.fm.transpose(k.u[l][x*c*nf:], nf, k.ut[l][x*nf*c:], c, nf, c)
	}
}

// winoFilters writes U = G·g·Gᵀ for every input channel ci < c and filter
// f < nf, g[u][v] = w[f·9c + ci·9 + 3u + v] (the layout of both the
// Conv-n and the ResNet weights), computed in float64, into ut: 16
// filter-major matrices nf×c, ut[(ξ·nf + f)·c + ci]. The loops follow w's
// layout and write ut contiguously.
func winoFilters[F float](ut []F, w []float64, nf, c int) {
	for f := 0; f < nf; f++ {
		for ci := 0; ci < c; ci++ {
			g := w[f*9*c+ci*9 : f*9*c+ci*9+9]
			var t [4][3]float64 // G·g
			for v := 0; v < 3; v++ {
				t[0][v], t[1][v], t[2][v], t[3][v] = g[v], (g[v]+g[3+v]+g[6+v])/2, (g[v]-g[3+v]+g[6+v])/2, g[6+v]
			}
			for r := 0; r < 4; r++ {
				row := [4]float64{t[r][0], (t[r][0] + t[r][1] + t[r][2]) / 2, (t[r][0] - t[r][1] + t[r][2]) / 2, t[r][2]}
				for s, v := range row {
					ut[((4*r+s)*nf+f)*c+ci] = F(v)
				}
			}
		}
	}
}

// reduceWino sums the chunk partials of dU for input channels c0 … c1−1 of
// block l, maps them to the filters (dg = Gᵀ·dU·G) and writes them into
// gw; the unit with c0 = 0 also writes the bias gradient gb. sums is the
// unit's buffer (convReduceLen).
func (k *convCore[F]) reduceWino(l, c0, c1 int, gw, gb, sums []float64) {
	ly, nf := k.ls[l], k.spec.Filters
	c := ly.cin
	off := k.partOff[l]
	const fb = convReduceLen / 16 // filters at a time
	for f0 := 0; f0 < nf; f0 += fb {
		f1 := min(f0+fb, nf)
		for ci := c0; ci < c1; ci++ {
			for x := 0; x < 16; x++ {
				k.sumParts(sums[x*fb:x*fb+f1-f0], off+(x*c+ci)*nf+f0)
			}
			for f := f0; f < f1; f++ {
				var t [3][4]float64 // Gᵀ·dU
				for s := 0; s < 4; s++ {
					j := f - f0
					q0, q1, q2, q3 := sums[s*fb+j], sums[(4+s)*fb+j], sums[(8+s)*fb+j], sums[(12+s)*fb+j]
					t[0][s], t[1][s], t[2][s] = q0+(q1+q2)/2, (q1-q2)/2, (q1+q2)/2+q3
				}
				for u := 0; u < 3; u++ {
					q0, q1, q2, q3 := t[u][0], t[u][1], t[u][2], t[u][3]
					o := f*9*c + ci*9 + 3*u
					gw[o], gw[o+1], gw[o+2] = q0+(q1+q2)/2, (q1-q2)/2, (q1+q2)/2+q3
				}
			}
		}
	}
	if c0 == 0 {
		for f0 := 0; f0 < nf; f0 += len(sums) {
			f1 := min(f0+len(sums), nf)
			k.sumParts(sums[:f1-f0], off+16*c*nf+f0)
			copy(gb[f0:f1], sums[:f1-f0])
		}
	}
}
