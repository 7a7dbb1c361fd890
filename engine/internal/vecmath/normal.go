package vecmath

import "math"

// Constants of logUnit: math.Log's (FreeBSD's e_log.c). ln2Hi has its low
// 32 bits clear, so k·ln2Hi is exact for the exponents k seen here.
const (
	ln2Hi = 6.93147180369123816490e-01 // 3FE62E42 FEE00000
	ln2Lo = 1.90821492927058770002e-10 // 3DEA39EF 35793C76
	lg1   = 6.666666666666735130e-01   // 3FE55555 55555593
	lg2   = 3.999999999940941908e-01   // 3FD99999 9997FA04
	lg3   = 2.857142874366239149e-01   // 3FD24924 94229359
	lg4   = 2.222219843214978396e-01   // 3FCC71C5 1D8E78AF
	lg5   = 1.818357216161805012e-01   // 3FC74664 96CB03DE
	lg6   = 1.531383769920937332e-01   // 3FC39A09 D078C69F
	lg7   = 1.479819860511658591e-01   // 3FC2F112 DF3E5244

	oneBits  = 0x3FF0000000000000
	fracMask = 1<<52 - 1
	// normChunk pairs (a multiple of 4) go through the three vector passes
	// together, so that the angles, sines and bits stay in L1 between them.
	normChunk = 512
)

// Normals fills dst with standard normal draws made from bits by the
// Box–Muller transform. With h = (len(dst)+1)/2, bits must hold exactly
// 2·h values; pair i < h turns bits[i] and bits[h+i] into
//
//	u1 = 2 − float64frombits(bits[i]>>12 | 0x3FF0000000000000)    ∈ (0, 1]
//	u2 = float64frombits(bits[h+i]>>12 | 0x3FF0000000000000) − 1  ∈ [0, 1)
//	r = √(−2·ln u1),  θ = 2π·u2
//	dst[i] = r·cos θ,  dst[h+i] = r·sin θ  (the latter when h+i < len(dst))
//
// The draws are a function of bits alone, meant to be the same bits on
// every machine and build: the AVX2 path and the portable one make the
// same operations in the same order without fused multiply-adds, with
// their own logarithm (math.Log is assembly on some architectures) and
// Sincos. Normals needs no scratch memory, the angles and sines passing
// through dst itself, and allocates nothing.
func Normals(dst []float64, bits []uint64) {
	n := len(dst)
	h := (n + 1) / 2
	if len(bits) != 2*h {
		panic("dgemm: Normals needs 2·⌈len(dst)/2⌉ bits")
	}
	done := 0
	if normThetaVec != nil {
		// Only pairs with both outputs, in blocks of four: the sines are
		// written straight into dst[h+i].
		done = (n / 2) &^ 3
		for a := 0; a < done; a += normChunk {
			b := min(a+normChunk, done)
			normThetaVec(&dst[a], &bits[h+a], b-a)
			SincosScaled(dst[h+a:h+b], dst[a:b], dst[a:b], 1)
			normRadiusVec(&dst[a], &dst[h+a], &bits[a], b-a)
		}
	}
	normalsGo(dst, bits, h, done)
}

// normalsGo is Normals for the pairs from on, one at a time.
func normalsGo(dst []float64, bits []uint64, h, from int) {
	n := len(dst)
	for i := from; i < h; i++ {
		u1 := 2 - math.Float64frombits(bits[i]>>12|oneBits)
		u2 := math.Float64frombits(bits[h+i]>>12|oneBits) - 1
		r := math.Sqrt(-2 * logUnit(u1))
		s, c := Sincos(2 * math.Pi * u2)
		dst[i] = r * c
		if h+i < n {
			dst[h+i] = r * s
		}
	}
}

// logUnit is math.Log's algorithm for a positive normal x, in operations
// that the vector kernel can repeat lane by lane: the exponent and mantissa
// come from the bits, and m ∈ [1, 2) is halved at √2 where math.Log doubles
// a fraction in [½, 1) below √2/2, which is the same choice.
//
// The float64 conversions forbid fused multiply-adds, which the Go spec
// allows and the compiler makes on arm64, ppc64, s390x and GOAMD64=v3; the
// vector kernel has none, so a fused product would change the bits.
func logUnit(x float64) float64 {
	b := math.Float64bits(x)
	k := float64(int64(b>>52) - 1023)
	m := math.Float64frombits(b&fracMask | oneBits)
	if m >= math.Sqrt2 {
		m *= 0.5
		k++
	}
	f := m - 1
	s := f / (2 + f)
	s2 := s * s
	s4 := s2 * s2
	t1 := float64(s2 * (lg1 + float64(s4*(lg3+float64(s4*(lg5+float64(s4*lg7)))))))
	t2 := float64(s4 * (lg2 + float64(s4*(lg4+float64(s4*lg6)))))
	R := t1 + t2
	hfsq := float64(0.5 * f * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + float64(k*ln2Lo))) - f)
}
