package sgemm

import "github.com/mkbench/mkbench/engine/internal/gemmcore"

// Transforms of Winograd's minimal filtering F(2×2, 3×3) (Lavin and Gray
// 2016) for a 3×3 convolution over channels-last images: a 4×4 input tile
// d gives the 2×2 outputs Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A, with
//
//	Bᵀ = | 1  0 -1  0 |   G = |  1    0    0  |   Aᵀ = | 1  1  1  0 |
//	     | 0  1  1  0 |       | 1/2  1/2  1/2 |        | 0  1 -1 -1 |
//	     | 0 -1  1  0 |       | 1/2 -1/2  1/2 |
//	     | 0  1  0 -1 |       |  0    0    1  |
//
// The 16 transformed values of a tile (index ξ = 4r + s) live in 16
// matrices, one per ξ, each with one row per tile and one column per
// channel, so that the channel sums are 16 ordinary products. A tile's
// slice of the ξ matrices is given as a base slice and ld, the distance
// between consecutive ξ matrices. Every kernel works on c channels, the
// assembly on the leading multiple of 8 and the portable code on the rest;
// both evaluate the same expressions in the same order without FMA, so
// their results are identical.

// Flags of WinoOutPool and WinoOut: the 2×2 output tile sticks out of the
// image at the right or at the bottom (an odd width or height); its
// missing cells take no part in the pooling, and WinoOut does not touch
// them. WinoAdd makes WinoOut add its outputs to dst instead of writing
// them.
const (
	WinoNoCol1 = 1 << iota
	WinoNoRow1
	WinoAdd
)

// WinoIn computes V = Bᵀ d B for one tile and c channels: cell (a, b) of
// the tile is src[a·lds + b·c : +c] and V[ξ][k] goes to v[ξ·ldv + k].
func WinoIn(v []float32, ldv int, src []float32, lds, c int) {
	if c == 0 {
		return
	}
	_ = src[3*lds+4*c-1]
	_ = v[15*ldv+c-1]
	k0 := 0
	if f := active.winoIn; f != nil && c >= 8 {
		k0 = c &^ 7
		f(&v[0], ldv, &src[0], lds, c, k0)
	}
	winoInFrom(v, ldv, src, lds, c, k0)
}

// WinoInGo is WinoIn in portable Go for either precision: the float64
// reference path of the convolution runs the very code of the float32 one.
func WinoInGo[F gemmcore.Float](v []F, ldv int, src []F, lds, c int) {
	winoInFrom(v, ldv, src, lds, c, 0)
}

// winoInFrom is WinoIn's portable loop over channels k0..c-1.
func winoInFrom[F gemmcore.Float](v []F, ldv int, src []F, lds, c, k0 int) {
	for k := k0; k < c; k++ {
		var t [4][4]F
		for b := 0; b < 4; b++ {
			d0, d1, d2, d3 := src[b*c+k], src[lds+b*c+k], src[2*lds+b*c+k], src[3*lds+b*c+k]
			t[0][b], t[1][b], t[2][b], t[3][b] = d0-d2, d1+d2, d2-d1, d1-d3
		}
		for r := 0; r < 4; r++ {
			o := 4 * r * ldv
			v[o+k] = t[r][0] - t[r][2]
			v[o+ldv+k] = t[r][1] + t[r][2]
			v[o+2*ldv+k] = t[r][2] - t[r][1]
			v[o+3*ldv+k] = t[r][1] - t[r][3]
		}
	}
}

// WinoOutPool finishes a convolution block for one tile, which is one 2×2
// pooling window, and n = len(out) filters: with M[ξ][k] = m[ξ·ldm + k] it
// computes the four outputs Y = Aᵀ M A, then for each cell
//
//	y = max((Y + bias[k])·alpha, 0), zeroed unless mask[q·n + k] > 0 if mask != nil,
//
// and pools them as MaxPool4 does (cells in the order (0,0), (0,1), (1,0),
// (1,1); a cell missing by flags repeats an earlier one). The ReLU keeps NaN
// and −0 as sgemm's epilogue does.
func WinoOutPool(out []float32, arg []uint8, m []float32, ldm int, bias []float32, alpha float32, mask []float32, flags int) {
	n := len(out)
	if n == 0 {
		return
	}
	arg, bias = arg[:n], bias[:n]
	_ = m[15*ldm+n-1]
	if mask != nil {
		mask = mask[:4*n]
	}
	k0 := 0
	if f := active.winoOutPool; f != nil && n >= 8 {
		k0 = n &^ 7
		var mp *float32
		if mask != nil {
			mp = &mask[0]
		}
		f(&out[0], &arg[0], &m[0], ldm, &bias[0], alpha, mp, n, flags, k0)
	}
	winoOutPoolFrom(out, arg, m, ldm, bias, alpha, mask, flags, k0)
}

// WinoOutPoolGo is WinoOutPool in portable Go for either precision.
func WinoOutPoolGo[F gemmcore.Float](out []F, arg []uint8, m []F, ldm int, bias []F, alpha F, mask []F, flags int) {
	winoOutPoolFrom(out, arg, m, ldm, bias, alpha, mask, flags, 0)
}

// winoOutPoolFrom is WinoOutPool's portable loop over filters k0..n-1.
func winoOutPoolFrom[F gemmcore.Float](out []F, arg []uint8, m []F, ldm int, bias []F, alpha F, mask []F, flags, k0 int) {
	n := len(out)
	for k := k0; k < n; k++ {
		y := winoOutTile(m, ldm, k)
		for q := range y {
			v := (y[q] + bias[k]) * alpha
			if v < 0 {
				v = 0
			}
			if mask != nil && !(mask[q*n+k] > 0) {
				v = 0
			}
			y[q] = v
		}
		if flags&WinoNoCol1 != 0 {
			y[1], y[3] = y[0], y[2]
		}
		if flags&WinoNoRow1 != 0 {
			y[2], y[3] = y[0], y[1]
		}
		mx, a := y[0], uint8(0)
		for q := 1; q < 4; q++ {
			if v := y[q]; v > mx || v != v {
				mx, a = v, uint8(q)
			}
		}
		out[k], arg[k] = mx, a
	}
}

// WinoOut is the plain output transform for one tile and n filters: with
// M[ξ][k] = m[ξ·ldm + k] it computes Y = Aᵀ M A in the order WinoOutPool
// does and writes (WinoAdd: adds) Y[a][b][k] to dst[a·ldd + b·n + k], for
// the cells the flags do not mark missing.
func WinoOut(dst []float32, ldd int, m []float32, ldm, n, flags int) {
	if n == 0 {
		return
	}
	_ = m[15*ldm+n-1]
	_ = dst[winoOutLast(ldd, n, flags)]
	k0 := 0
	if f := active.winoOut; f != nil && n >= 8 {
		k0 = n &^ 7
		f(&dst[0], ldd, &m[0], ldm, n, flags, k0)
	}
	winoOutFrom(dst, ldd, m, ldm, n, flags, k0)
}

// winoOutLast is the index of the last element WinoOut touches.
func winoOutLast(ldd, n, flags int) int {
	last := n - 1
	if flags&WinoNoCol1 == 0 {
		last += n
	}
	if flags&WinoNoRow1 == 0 {
		last += ldd
	}
	return last
}

// WinoOutGo is WinoOut in portable Go for either precision.
func WinoOutGo[F gemmcore.Float](dst []F, ldd int, m []F, ldm, n, flags int) {
	if n > 0 {
		_ = dst[winoOutLast(ldd, n, flags)]
	}
	winoOutFrom(dst, ldd, m, ldm, n, flags, 0)
}

// winoOutFrom is WinoOut's portable loop over filters k0..n-1.
func winoOutFrom[F gemmcore.Float](dst []F, ldd int, m []F, ldm, n, flags, k0 int) {
	for k := k0; k < n; k++ {
		y := winoOutTile(m, ldm, k)
		for r := 0; r < 2; r++ {
			if r == 1 && flags&WinoNoRow1 != 0 {
				break
			}
			y0, y1 := y[2*r], y[2*r+1]
			d := dst[r*ldd:]
			if flags&WinoAdd != 0 {
				d[k] += y0
			} else {
				d[k] = y0
			}
			if flags&WinoNoCol1 != 0 {
				continue
			}
			if flags&WinoAdd != 0 {
				d[n+k] += y1
			} else {
				d[n+k] = y1
			}
		}
	}
}

// winoOutTile is Y = Aᵀ M A for filter k, cells in the order (0,0), (0,1),
// (1,0), (1,1), evaluated as the assembly's WOXFORM does.
func winoOutTile[F gemmcore.Float](m []F, ldm, k int) [4]F {
	var t [2][4]F
	for s := 0; s < 4; s++ {
		m0, m1, m2, m3 := m[s*ldm+k], m[(4+s)*ldm+k], m[(8+s)*ldm+k], m[(12+s)*ldm+k]
		t[0][s] = (m0 + m1) + m2
		t[1][s] = (m1 - m2) - m3
	}
	var y [4]F
	for r := 0; r < 2; r++ {
		y[2*r] = (t[r][0] + t[r][1]) + t[r][2]
		y[2*r+1] = (t[r][1] - t[r][2]) - t[r][3]
	}
	return y
}

// winoColA[i] is column i of A: the transformed gradient of a 2×2 tile
// whose only non-zero cell is (i, j) with value v is v·colA[i]·colA[j]ᵀ.
var winoColA = [2][4]float32{{1, 1, 1, 0}, {0, 1, -1, -1}}

// WinoGradOut is the backward pass of WinoOutPool for one tile and n =
// len(g) filters, given g, the gradient w.r.t. the pooled outputs out, and
// arg from the forward: with v = alpha·g[k] where out[k] > 0 (else 0) in
// cell q = arg[k] = 2i + j, it writes dM = A·dY·Aᵀ, that is
// dm[ξ·ldm + k] = (v·colA[i][r])·colA[j][s] for ξ = 4r + s, and adds v to
// db[k] (the bias gradient).
func WinoGradOut(dm []float32, ldm int, db, g, out []float32, arg []uint8, alpha float32) {
	n := len(g)
	if n == 0 {
		return
	}
	db, out, arg = db[:n], out[:n], arg[:n]
	_ = dm[15*ldm+n-1]
	k0 := 0
	if f := active.winoGradOut; f != nil && n >= 8 {
		k0 = n &^ 7
		f(&dm[0], ldm, &db[0], &g[0], &out[0], &arg[0], alpha, k0)
	}
	winoGradOutFrom(dm, ldm, db, g, out, arg, alpha, k0)
}

// WinoGradOutGo is WinoGradOut in portable Go for either precision.
func WinoGradOutGo[F gemmcore.Float](dm []F, ldm int, db, g, out []F, arg []uint8, alpha F) {
	winoGradOutFrom(dm, ldm, db, g, out, arg, alpha, 0)
}

// winoGradOutFrom is WinoGradOut's portable loop over filters k0..n-1.
func winoGradOutFrom[F gemmcore.Float](dm []F, ldm int, db, g, out []F, arg []uint8, alpha F, k0 int) {
	n := len(g)
	for k := k0; k < n; k++ {
		var v F
		if out[k] > 0 {
			v = alpha * g[k]
		}
		db[k] += v
		a, b := &winoColA[arg[k]>>1&1], &winoColA[arg[k]&1]
		for r := 0; r < 4; r++ {
			va := v * F(a[r])
			for s := 0; s < 4; s++ {
				dm[(4*r+s)*ldm+k] = va * F(b[s])
			}
		}
	}
}

// WinoInT is the transpose of WinoIn, accumulating: for one tile and c
// channels it adds (B·dV·Bᵀ)[a][b] to the tile's cell (a, b) at
// dst[a·ldd + b·c : +c], where dV[ξ][k] = dv[ξ·ldv + k]. Summed over the
// (overlapping) tiles it is the gradient w.r.t. the image.
func WinoInT(dst []float32, ldd int, dv []float32, ldv, c int) {
	if c == 0 {
		return
	}
	_ = dst[3*ldd+4*c-1]
	_ = dv[15*ldv+c-1]
	k0 := 0
	if f := active.winoInT; f != nil && c >= 8 {
		k0 = c &^ 7
		f(&dst[0], ldd, &dv[0], ldv, c, k0)
	}
	winoInTFrom(dst, ldd, dv, ldv, c, k0)
}

// WinoInTGo is WinoInT in portable Go for either precision.
func WinoInTGo[F gemmcore.Float](dst []F, ldd int, dv []F, ldv, c int) {
	winoInTFrom(dst, ldd, dv, ldv, c, 0)
}

// winoInTFrom is WinoInT's portable loop over channels k0..c-1.
func winoInTFrom[F gemmcore.Float](dst []F, ldd int, dv []F, ldv, c, k0 int) {
	for k := k0; k < c; k++ {
		var t [4][4]F
		for s := 0; s < 4; s++ {
			d0, d1, d2, d3 := dv[s*ldv+k], dv[(4+s)*ldv+k], dv[(8+s)*ldv+k], dv[(12+s)*ldv+k]
			t[0][s], t[1][s], t[2][s], t[3][s] = d0, (d1-d2)+d3, (d1+d2)-d0, -d3
		}
		for a := 0; a < 4; a++ {
			row := dst[a*ldd:]
			row[k] += t[a][0]
			row[c+k] += (t[a][1] - t[a][2]) + t[a][3]
			row[2*c+k] += (t[a][1] + t[a][2]) - t[a][0]
			row[3*c+k] += -t[a][3]
		}
	}
}
