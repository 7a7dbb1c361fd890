package vecmath

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
	// π/2 in three parts (twice Go's PI4A, PI4B, PI4C): k·pio2a is exact
	// for the k used here, so the reduction keeps full precision.
	pio2a = 2 * 7.85398125648498535156e-1
	pio2b = 2 * 3.77489470793079817668e-8
	pio2c = 2 * 2.69515142907905952645e-15
	// SincosMax bounds the arguments reduced here; beyond it (and for NaN
	// and ±Inf) math.Sincos, with its exact reduction, takes over.
	SincosMax = 1 << 28
)

// Sincos is math.Sincos without branches on the quadrant, accurate to a
// few ulp for |x| < SincosMax. Random-feature arguments are spread over
// many periods, and math.Sincos's quadrant branches mispredicted on them.
func Sincos(x float64) (s, c float64) {
	if !(math.Abs(x) < SincosMax) {
		return math.Sincos(x)
	}
	// Every product that feeds a sum is rounded on its own (float64(…)):
	// compilers for arm64, or amd64 with GOAMD64=v3, would otherwise fuse
	// them into multiply-adds, and the bits would differ from the vector
	// path's and between machines.
	kf := math.RoundToEven(x * (2 / math.Pi))
	r := ((x - float64(kf*pio2a)) - float64(kf*pio2b)) - float64(kf*pio2c)
	z := r * r
	ps, pc := sinCoef[0], cosCoef[0]
	for i := 1; i < len(sinCoef); i++ {
		ps = float64(ps*z) + sinCoef[i]
		pc = float64(pc*z) + cosCoef[i]
	}
	sr := r + float64(r*z*ps)
	cr := 1 - float64(0.5*z) + float64(z*z*pc)
	// Quadrant q = k mod 4: (sin, cos) = (sr, cr), (cr, −sr), (−sr, −cr),
	// (−cr, sr), selected with bit masks rather than branches.
	q := uint64(int64(kf))
	swap := -(q & 1)
	sb, cb := math.Float64bits(sr), math.Float64bits(cr)
	s0 := sb&^swap | cb&swap
	c0 := cb&^swap | sb&swap
	return math.Float64frombits(s0 ^ (q&2)<<62), math.Float64frombits(c0 ^ ((q+1)&2)<<62)
}

// SincosScaled sets s[i] = sin(x[i]) and c[i] = scale·cos(x[i]); c may be
// x itself. It is Sincos four lanes at a time where the CPU allows, with
// the same operations in the same order, so the results are the same bits.
func SincosScaled(s, c, x []float64, scale float64) {
	n := len(x)
	if len(s) != n || len(c) != n {
		panic("dgemm: SincosScaled slices differ in length")
	}
	done := 0
	if sincosVec != nil && n >= 4 {
		done = n &^ 3
		if sincosVec(&s[0], &c[0], &x[0], done, scale) {
			// Some argument was beyond the vector reduction's range: redo
			// those with the scalar path. Inputs are gone where c aliases
			// x, so the flag is raised before any lane is written.
			for i := 0; i < done; i++ {
				si, ci := Sincos(x[i])
				s[i], c[i] = si, scale*ci
			}
		}
	}
	for i := done; i < n; i++ {
		si, ci := Sincos(x[i])
		s[i], c[i] = si, scale*ci
	}
}
