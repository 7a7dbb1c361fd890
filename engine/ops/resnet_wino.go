package ops

import "github.com/mkbench/mkbench/engine/internal/sgemm"

// The ResNet's 3×3 stride-1 convolutions by Winograd's F(2×2, 3×3) (see
// internal/sgemm/wino.go for the transforms and conv_wino.go for the
// Conv-n blocks, whose tile kernels and filter transform this shares).
// Per group of images, T tiles of 2×2 output pixels: the input transforms
// V (16 matrices T×cin), the 16 products M[ξ] = V[ξ]·U[ξ], and a plain
// output transform into the convolution's output, after which the batch
// norm sums it as it sums an im2col product's.
//
// The input gradient of a 3×3 stride-1 SAME convolution is the same kind
// of convolution of the output gradient, with the filters rotated by 180°
// and their channels swapped, so it runs through the same code. Rotating g
// (g' = J·g·J, J the exchange matrix) gives G·g'·Gᵀ = P·(G·g·Gᵀ)·Pᵀ, P
// swapping rows 0 and 3, because G·J = P·G: the dgrad products read the
// forward's transformed filters at permuted ξ (resWinoRot), with no
// transform of their own. The weight gradient stays im2col: summed in
// float64 over the batch in fixed units, it would need the Winograd
// domain's partials kept per unit and ξ and transformed back; now the
// largest part of these layers, it is the next step (docs/cpu-backbones.md,
// "What more time would buy").
//
// Which layers take this path (resWinoMinMap) was decided by measurement
// with BenchmarkResNet18Parts: see docs/cpu-backbones.md.

// resWinoTiles is the number of tiles one group's products should have at
// least: small maps are batched over images, as resGroupRows does for
// im2col products. 64 and 256 measured no different.
const resWinoTiles = 128

// resWinoMinMap is the smallest map side (the smaller of height and width)
// that runs by Winograd. Measured on ResNet-18 at 84×84
// (BenchmarkResNet18Parts, docs/cpu-backbones.md): faster at 21², 11², 6²,
// slower at 3², where 2×2 tiles cover 16 cells for 9 pixels (a gain of
// 1.27 in multiplications, not 2.25) and the transforms' passes cost more
// than that saves; those layers stay im2col.
const resWinoMinMap = 4

// resWinoRot[ξ] is the ξ of the forward's transformed filter that the
// rotated filter has at ξ: ξ = 4r + s ↦ 4π(r) + π(s), π swapping 0 and 3.
var resWinoRot = [16]int{15, 13, 14, 12, 7, 5, 6, 4, 11, 9, 10, 8, 3, 1, 2, 0}

// winoGeom sets the Winograd fields of a 3×3 stride-1 convolution.
func (cv *resConv) winoGeom() {
	cv.th, cv.tw = (cv.Height+1)/2, (cv.Width+1)/2
	cv.wino = min(cv.Height, cv.Width) >= resWinoMinMap
	if cv.wino {
		cv.group = max(1, resWinoTiles/(cv.th*cv.tw))
	}
}

// winoSizes are the scratch lengths a Winograd convolution needs with
// groups of at most n images: the transformed inputs (or products) and
// the zero-bordered image.
func (cv *resConv) winoSizes(n int) (v, pad int) {
	c := max(cv.In, cv.Out)
	return 16 * n * cv.th * cv.tw * c, (2*cv.th + 2) * (2*cv.tw + 2) * c
}

// winoConv convolves images g0 … g1−1 of in (cin channels a pixel) into
// out (cout channels; add: adds to it) with the transformed filters u: 16
// matrices, ξ's at u[rot[ξ]·cin·cout:], stored cout×cin and read
// transposed if tu (the forward's, from k.ut), else stored cin×cout (the
// input gradient's: k.ut is Out×In, which is cin×cout there).
func (k *resCore[F]) winoConv(sc *resScratch[F], cv *resConv, in, out []F, g0, g1, cin, cout int, u []F, tu bool, rot *[16]int, add bool) {
	th, tw := cv.th, cv.tw
	tiles := th * tw
	T := (g1 - g0) * tiles
	ly := convLayer{cin: cin, h: cv.Height, w: cv.Width, ho: th, wo: tw}
	pw := 2*tw + 2
	wv, wm := sc.wv[:16*T*cin], sc.wm[:16*T*cout]
	for i := 0; i < g1-g0; i++ {
		winoPad(sc.pad, in[(g0+i)*cv.p*cin:(g0+i+1)*cv.p*cin], ly)
		for ty := 0; ty < th; ty++ {
			for tx := 0; tx < tw; tx++ {
				t := i*tiles + ty*tw + tx
				k.fm.winoIn(wv[t*cin:], T*cin, sc.pad[(2*ty*pw+2*tx)*cin:], pw*cin, cin)
			}
		}
	}
	for x := 0; x < 16; x++ {
		b := u[rot[x]*cin*cout:]
		ldb := cout
		if tu {
			ldb = cin
		}
		k.fm.gemm(&sc.ws, false, tu, T, cout, cin, 1, wv[x*T*cin:], cin, b, ldb, 0, wm[x*T*cout:], cout, false)
	}
	flags := 0
	if add {
		flags = sgemm.WinoAdd
	}
	for i := 0; i < g1-g0; i++ {
		o := out[(g0+i)*cv.p*cout : (g0+i+1)*cv.p*cout]
		for ty := 0; ty < th; ty++ {
			for tx := 0; tx < tw; tx++ {
				t := i*tiles + ty*tw + tx
				k.fm.winoOut(o[(2*ty*cv.Width+2*tx)*cout:], cv.Width*cout, wm[t*cout:], T*cout, cout, flags|winoFlags(ly, ty, tx))
			}
		}
	}
}

// resWinoId is the forward's ξ map.
var resWinoId = [16]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// setupWino transforms the filters of convolution l into k.ut[l].
func (k *resCore[F]) setupWino(l int) {
	cv := &k.cv[l]
	if len(k.ut[l]) == 0 {
		k.ut[l] = alignedAlloc[F](16 * cv.In * cv.Out)
	}
	winoFilters(k.ut[l], k.params[3*l], cv.Out, cv.In)
}
