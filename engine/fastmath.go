package engine

import "math"

// Coefficients of the minimax polynomials for sin and cos on [-π/4, π/4]
// (Cephes, as in Go's math package).
var (
	sinCoef = [6]float64{
		1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
		-1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1,
	}
	cosCoef = [6]float64{
		-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
		2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2,
	}
)

const (
	// π/2 split in three parts (twice Go's PI4A, PI4B, PI4C): k·pio2a is
	// exact for the k used here, so the reduction keeps full precision.
	pio2a = 2 * 7.85398125648498535156e-1
	pio2b = 2 * 3.77489470793079817668e-8
	pio2c = 2 * 2.69515142907905952645e-15
	// sincosMax bounds the arguments reduced here; beyond it math.Sincos
	// (with its exact reduction) takes over.
	sincosMax  = 1 << 28
	roundMagic = 1.5 * (1 << 52) // v + roundMagic − roundMagic rounds v to an integer
)

// sincos is math.Sincos without branches on the quadrant. The random
// features evaluate it for every (point, basis) pair; their arguments are
// uniformly spread over many periods, so math.Sincos's quadrant branches
// mispredicted about half the time and it was the largest single cost of a
// vrf step after the matrix products. Accuracy matches math.Sincos to a few
// ulp for |x| < 2²⁸ (tested).
func sincos(x float64) (s, c float64) {
	if !(math.Abs(x) < sincosMax) { // also NaN and ±Inf
		return math.Sincos(x)
	}
	kf := (x*(2/math.Pi) + roundMagic) - roundMagic
	r := ((x - kf*pio2a) - kf*pio2b) - kf*pio2c
	z := r * r
	ps := ((((sinCoef[0]*z+sinCoef[1])*z+sinCoef[2])*z+sinCoef[3])*z+sinCoef[4])*z + sinCoef[5]
	pc := ((((cosCoef[0]*z+cosCoef[1])*z+cosCoef[2])*z+cosCoef[3])*z+cosCoef[4])*z + cosCoef[5]
	sr := r + r*z*ps
	cr := 1 - 0.5*z + z*z*pc
	// Quadrant q = k mod 4: (sin, cos) = (sr, cr), (cr, −sr), (−sr, −cr),
	// (−cr, sr), selected with bit masks rather than branches.
	q := uint64(int64(kf))
	swap := -(q & 1) // all ones in odd quadrants
	sb, cb := math.Float64bits(sr), math.Float64bits(cr)
	s0 := sb&^swap | cb&swap
	c0 := cb&^swap | sb&swap
	s = math.Float64frombits(s0 ^ (q&2)<<62)
	c = math.Float64frombits(c0 ^ ((q+1)&2)<<62)
	return s, c
}
