package sgemm

import "math"

// Element-wise kernels. Each exported function runs the active assembly
// version (if any) over the leading multiple of 8 elements and the portable
// version over the rest; both use the same approximations, so results differ
// between the two only by FMA rounding.

// Constants of the float32 exp and tanh approximations (Cephes expf and
// tanhf): exp reduces x = n·ln2 + r with |r| ≤ ln2/2 and evaluates a degree-6
// polynomial; tanh uses an odd polynomial for |x| < 0.625 and
// 1 - 2/(exp(2|x|)+1) above.
const (
	expHi    = 88.0              // saturate early: n = round(x·log2e) ≤ 127 keeps 2ⁿ finite
	expLo    = -87.3365447504019 // exp(expLo) is the smallest normal float32
	log2e    = 1.44269504088896341
	ln2Hi    = 0.693359375 // ln2 = ln2Hi + ln2Lo, ln2Hi exact in 9 bits
	ln2Lo    = -2.12194440e-4
	expP0    = 1.9875691500e-4
	expP1    = 1.3981999507e-3
	expP2    = 8.3334519073e-3
	expP3    = 4.1665795894e-2
	expP4    = 1.6666665459e-1
	expP5    = 5.0000001201e-1
	roundMag = 12582912 // 1.5·2²³: x + roundMag - roundMag rounds x to an integer
	tanhCut  = 0.625
	tanhP0   = -5.70498872745e-3
	tanhP1   = 2.06390887954e-2
	tanhP2   = -5.37397155531e-2
	tanhP3   = 1.33314422036e-1
	tanhP4   = -3.33332819422e-1
)

// expf approximates e^x with a relative error below 2e-7 (see
// TestExpTanhAccuracy); it saturates at exp(expLo) and exp(expHi) and
// passes NaN through.
func expf(x float32) float32 {
	if x > expHi {
		x = expHi
	}
	if x < expLo {
		x = expLo
	}
	n := x*log2e + roundMag
	n -= roundMag
	r := x - n*ln2Hi
	r -= n * ln2Lo
	p := expP0*r + expP1
	p = p*r + expP2
	p = p*r + expP3
	p = p*r + expP4
	p = p*r + expP5
	y := p*r*r + r + 1
	if x != x {
		return x
	}
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// tanhf approximates tanh(x) with an absolute error below 2e-7 and a
// relative error below 3e-7 (see TestExpTanhAccuracy); NaN passes through.
func tanhf(x float32) float32 {
	a := x
	if a < 0 {
		a = -a
	}
	if a < tanhCut {
		z := x * x
		p := tanhP0*z + tanhP1
		p = p*z + tanhP2
		p = p*z + tanhP3
		p = p*z + tanhP4
		return p*z*x + x
	}
	e := expf(a + a)
	y := 1 - 2/(e+1)
	if x < 0 {
		y = -y
	}
	return y
}

// Exp sets dst[i] = e^src[i] (see expf for the accuracy); len(dst) must be
// ≥ len(src).
func Exp(dst, src []float32) {
	dst = dst[:len(src)]
	n0 := 0
	if f := active.exp; f != nil && len(src) >= 8 {
		n0 = len(src) &^ 7
		f(&dst[0], &src[0], n0)
	}
	for i := n0; i < len(src); i++ {
		dst[i] = expf(src[i])
	}
}

// Tanh sets dst[i] = tanh(src[i]) (see tanhf for the accuracy); len(dst)
// must be ≥ len(src).
func Tanh(dst, src []float32) {
	dst = dst[:len(src)]
	n0 := 0
	if f := active.tanh; f != nil && len(src) >= 8 {
		n0 = len(src) &^ 7
		f(&dst[0], &src[0], n0)
	}
	for i := n0; i < len(src); i++ {
		dst[i] = tanhf(src[i])
	}
}

// AffineCoupling is the element-wise step of an affine coupling layer: for
// each i < len(y), with s = tanh(o[i]) and e = exp(s),
//
//	s[i] = s;  y[i] = x[i]·e + t[i];  ld[i] += s.
//
// All slices must be at least as long as y; y may alias x. e is not kept:
// AffineCouplingGrad recomputes it from s (bit-identically), which is
// cheaper than storing it and reading it back from memory.
func AffineCoupling(y, x, o, t, s, ld []float32) {
	n := len(y)
	x, o, t, s, ld = x[:n], o[:n], t[:n], s[:n], ld[:n]
	n0 := 0
	if f := active.coupling; f != nil && n >= 8 {
		n0 = n &^ 7
		f(&y[0], &x[0], &o[0], &t[0], &s[0], &ld[0], n0)
	}
	for i := n0; i < n; i++ {
		sv := tanhf(o[i])
		ev := expf(sv)
		s[i] = sv
		y[i] = x[i]*ev + t[i]
		ld[i] += sv
	}
}

// AffineCouplingGrad back-propagates AffineCoupling: given g, the gradient
// w.r.t. y, and gl, the gradient w.r.t. ld, it writes the gradients w.r.t.
// o and t and replaces g by the gradient w.r.t. x: with e = exp(s[i]),
//
//	gs[i] = (g[i]·e·x[i] + gl[i])·(1 − s[i]²);  gt[i] = g[i];  g[i] = g[i]·e.
//
// All slices must be at least as long as g.
func AffineCouplingGrad(gs, gt, g, x, s, gl []float32) {
	n := len(g)
	gs, gt, x, s, gl = gs[:n], gt[:n], x[:n], s[:n], gl[:n]
	n0 := 0
	if f := active.couplingGrad; f != nil && n >= 8 {
		n0 = n &^ 7
		f(&gs[0], &gt[0], &g[0], &x[0], &s[0], &gl[0], n0)
	}
	for i := n0; i < n; i++ {
		gv, sv := g[i], s[i]
		ge := gv * expf(sv)
		gs[i] = (ge*x[i] + gl[i]) * (1 - sv*sv)
		gt[i] = gv
		g[i] = ge
	}
}

// AddRowSums adds to dst[i] the sum of row i (cols elements) of the
// rows×cols matrix src with row stride ld, for i < rows. The summation
// order depends only on cols.
func AddRowSums(dst, src []float32, rows, cols, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	dst = dst[:rows]
	src = src[:(rows-1)*ld+cols]
	c0 := 0
	if f := active.rowSums; f != nil && cols >= 8 {
		c0 = cols &^ 7
		f(&dst[0], &src[0], rows, c0, ld)
	}
	for i := range dst {
		row := src[i*ld+c0 : i*ld+cols]
		if c0 == 0 {
			dst[i] += sum8(row)
			continue
		}
		for _, v := range row {
			dst[i] += v
		}
	}
}

// sum8 sums x in a fixed order: eight interleaved partial sums, combined
// pairwise, then the elements past the last multiple of 8.
func sum8(x []float32) float32 {
	var acc [8]float32
	n := len(x) &^ 7
	for i := 0; i < n; i += 8 {
		for j := range acc {
			acc[j] += x[i+j]
		}
	}
	s := ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
	for _, v := range x[n:] {
		s += v
	}
	return s
}

// Transpose writes the transpose of the rows×cols matrix src (row stride
// lds) into dst (row stride ldd ≥ rows): dst[j*ldd+i] = src[i*lds+j].
func Transpose(dst []float32, ldd int, src []float32, lds, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	dst = dst[:(cols-1)*ldd+rows]
	src = src[:(rows-1)*lds+cols]
	i0 := 0
	if f := active.gemm.Transpose8; f != nil && cols >= 8 && ldd >= 8 {
		nb := cols / 8
		for ; i0+8 <= rows; i0 += 8 {
			f(&dst[i0], ldd, &src[i0*lds], lds, 8, nb)
		}
		for i := 0; i < i0; i++ {
			for j := nb * 8; j < cols; j++ {
				dst[j*ldd+i] = src[i*lds+j]
			}
		}
	}
	for i := i0; i < rows; i++ {
		for j, v := range src[i*lds : i*lds+cols] {
			dst[j*ldd+i] = v
		}
	}
}

// ToFloat32 converts the rows×cols matrix src (row stride lds) to float32,
// rounding to nearest, into dst (row stride ldd).
func ToFloat32(dst []float32, ldd int, src []float64, lds, rows, cols int) {
	convert(dst, ldd, src, lds, rows, cols, active.toFloat32)
}

// ToFloat64 converts the rows×cols matrix src (row stride lds) to float64
// (exactly) into dst (row stride ldd).
func ToFloat64(dst []float64, ldd int, src []float32, lds, rows, cols int) {
	convert(dst, ldd, src, lds, rows, cols, active.toFloat64)
}

// convert is ToFloat32 and ToFloat64: with the kernel f when there is one,
// else in Go.
func convert[D, S float32 | float64](dst []D, ldd int, src []S, lds, rows, cols int, f func(dst *D, ldd int, src *S, lds, rows, cols int)) {
	if rows == 0 || cols == 0 {
		return
	}
	dst = dst[:(rows-1)*ldd+cols]
	src = src[:(rows-1)*lds+cols]
	if f != nil {
		f(&dst[0], ldd, &src[0], lds, rows, cols)
		return
	}
	for i := 0; i < rows; i++ {
		d := dst[i*ldd : i*ldd+cols]
		for j, v := range src[i*lds : i*lds+cols] {
			d[j] = D(v)
		}
	}
}

// AddToFloat64 adds src, converted exactly, to dst: dst[i] += float64(src[i])
// for i < len(src); len(dst) must be ≥ len(src). Each sum is one rounded
// float64 addition, so the result does not depend on the kernel.
func AddToFloat64(dst []float64, src []float32) {
	n := len(src)
	if n == 0 {
		return
	}
	dst = dst[:n]
	i := 0
	if f := active.addToFloat64; f != nil && n >= 8 {
		i = n &^ 7
		f(&dst[0], &src[0], i)
	}
	for ; i < n; i++ {
		dst[i] += float64(src[i])
	}
}
