package vecmath

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// u1Bits returns bits whose u1 is u, a multiple of 2^-52 in (0, 1].
func u1Bits(u float64) uint64 {
	return (math.Float64bits(2-u) & fracMask) << 12
}

// normalEdgeBits are bits at the ends of u1's and u2's ranges and u1 on
// either side of the mantissa's √2 boundary (where logUnit halves m).
func normalEdgeBits() []uint64 {
	e := []uint64{0, math.MaxUint64, 1<<12 - 1, math.MaxUint64 &^ (1<<12 - 1), 1 << 63, 1<<63 - 1}
	for _, x := range []int{-1, -2, -3, -10, -30, -45, -50} {
		// Multiples of 2^-52 with exponent x step by 2^-52 in u1 and by
		// 2^(-52-x) in m.
		step := math.Ldexp(1, -52-x)
		below := math.Floor(math.Sqrt2/step) * step
		for _, m := range []float64{1, below - step, below, below + step, below + 2*step, 2 - step} {
			e = append(e, u1Bits(math.Ldexp(m, x)))
		}
	}
	return e
}

func randomNormalBits(rng *rand.Rand, n int) []uint64 {
	bits := make([]uint64, n)
	for i := range bits {
		bits[i] = rng.Uint64()
	}
	return bits
}

// The vector path gives the bits of the scalar one, whatever the length
// (tails, odd lengths, a single chunk and many) and at the edges.
func TestNormalsMatchesScalar(t *testing.T) {
	if normThetaVec == nil {
		t.Log("no vector path here: the scalar path is compared with itself")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	edges := normalEdgeBits()
	lengths := []int{128000, 2*normChunk + 9}
	for n := 0; n <= 67; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		h := (n + 1) / 2
		bits := randomNormalBits(rng, 2*h)
		for j := range bits {
			if rng.IntN(3) == 0 {
				bits[j] = edges[rng.IntN(len(edges))]
			}
		}
		got, want := make([]float64, n), make([]float64, n)
		Normals(got, bits)
		normalsGo(want, bits, h, 0)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) || math.IsNaN(got[i]) || math.IsInf(got[i], 0) {
				p := i % h
				t.Fatalf("n=%d: dst[%d] = %v, scalar %v (bits %#x, %#x)", n, i, got[i], want[i], bits[p], bits[h+p])
			}
		}
	}
}

// The draws for a seed are pinned: every machine and build (purego, no
// AVX2, other architectures) must give these bits.
func TestNormalsGolden(t *testing.T) {
	const n = 1001
	bits := randomNormalBits(rand.New(rand.NewPCG(1, 2)), n+1)
	bits = append(bits, normalEdgeBits()...)
	dst := make([]float64, len(bits))
	Normals(dst, bits)
	hash := fnv.New64a()
	for _, x := range dst {
		b := math.Float64bits(x)
		hash.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24), byte(b >> 32), byte(b >> 40), byte(b >> 48), byte(b >> 56)})
	}
	if got, want := hash.Sum64(), uint64(0xdd4d062d06ab17f9); got != want {
		t.Errorf("hash of the draws = %#x, want %#x", got, want)
	}
}

func TestLogUnit(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	check := func(u float64) {
		got, want := logUnit(u), math.Log(u)
		if want == 0 {
			if got != 0 {
				t.Fatalf("logUnit(%v) = %v, want 0", u, got)
			}
			return
		}
		if ulp := math.Nextafter(want, 0) - want; math.Abs(got-want) > math.Abs(ulp) {
			t.Fatalf("logUnit(%v) = %v, math.Log %v: %.2g ulp apart", u, got, want, (got-want)/ulp)
		}
	}
	for _, b := range normalEdgeBits() {
		check(2 - math.Float64frombits(b>>12|oneBits))
	}
	for _, u := range []float64{1, math.Nextafter(1, 0), 0x1p-52, 0x1p-1022, math.SmallestNonzeroFloat64 * (1 << 52), math.Sqrt2 / 2, math.Nextafter(math.Sqrt2/2, 0), math.Nextafter(math.Sqrt2/2, 1), math.Sqrt2, 1.5, math.MaxFloat64} {
		check(u)
	}
	for i := 0; i < 1000000; i++ {
		switch i % 3 {
		case 0: // u1 as Normals makes it
			check(2 - math.Float64frombits(rng.Uint64()>>12|oneBits))
		case 1: // full mantissas near 1
			check(1 - rng.Float64())
		default: // any exponent
			check(math.Ldexp(1+rng.Float64(), -rng.IntN(1022)))
		}
	}
}

// Moments, the Kolmogorov–Smirnov distance to Φ, and the correlation of the
// two draws of a pair, on 2e6 draws. The tolerances are 4–6 standard errors
// (the seed is fixed, so the test is deterministic).
func TestNormalsDistribution(t *testing.T) {
	const n = 2000000
	bits := randomNormalBits(rand.New(rand.NewPCG(11, 12)), n)
	x := make([]float64, n)
	Normals(x, bits)
	var m1, m2, m3, m4 float64
	for _, v := range x {
		m1 += v
	}
	m1 /= n
	for _, v := range x {
		d := v - m1
		d2 := d * d
		m2 += d2
		m3 += d2 * d
		m4 += d2 * d2
	}
	m2, m3, m4 = m2/n, m3/n, m4/n
	skew, kurt := m3/math.Pow(m2, 1.5), m4/(m2*m2)
	if se := 1 / math.Sqrt(n); math.Abs(m1) > 4*se {
		t.Errorf("mean %.5f, more than 4 standard errors (%.5f) from 0", m1, se)
	}
	if math.Abs(m2-1) > 0.005 {
		t.Errorf("variance %.5f, want 1 ± 0.005", m2)
	}
	if math.Abs(skew) > 0.01 {
		t.Errorf("skewness %.5f, want 0 ± 0.01", skew)
	}
	if math.Abs(kurt-3) > 0.02 {
		t.Errorf("kurtosis %.5f, want 3 ± 0.02", kurt)
	}
	s := slices.Clone(x)
	slices.Sort(s)
	d := 0.0
	for i, v := range s {
		f := 0.5 * (1 + math.Erf(v/math.Sqrt2))
		d = max(d, f-float64(i)/n, float64(i+1)/n-f)
	}
	if crit := 1.628 / math.Sqrt(n); d > crit {
		t.Errorf("Kolmogorov–Smirnov D = %.6f, above the 1%% critical value %.6f", d, crit)
	}
	const h = n / 2
	var sxy, sxx, syy float64
	for i := 0; i < h; i++ {
		a, b := x[i]-m1, x[h+i]-m1
		sxy += a * b
		sxx += a * a
		syy += b * b
	}
	if r := sxy / math.Sqrt(sxx*syy); math.Abs(r) > 4/math.Sqrt(h) {
		t.Errorf("correlation of dst[i] and dst[h+i]: %.5f, more than 4 standard errors", r)
	}
	t.Logf("mean %.5f variance %.5f skewness %.5f kurtosis %.5f KS D %.6f", m1, m2, skew, kurt, d)
}

func TestNormalsAllocs(t *testing.T) {
	for _, n := range []int{7, 128000} {
		bits := randomNormalBits(rand.New(rand.NewPCG(1, 1)), (n+1)/2*2)
		dst := make([]float64, n)
		if a := testing.AllocsPerRun(20, func() { Normals(dst, bits) }); a != 0 {
			t.Errorf("n=%d: %v allocations per call", n, a)
		}
	}
}

func TestNormalsPanicsOnBitsLength(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for 2·h−1 bits")
		}
	}()
	Normals(make([]float64, 5), make([]uint64, 5))
}

const benchNormals = 128000

func reportPerValue(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchNormals, "ns/value")
}

// BenchmarkNormals times the transform alone (vector, and the scalar path
// for comparison), the PCG bits it consumes, and both together.
func BenchmarkNormals(b *testing.B) {
	src := rand.NewPCG(1, 2)
	bits := make([]uint64, benchNormals)
	for j := range bits {
		bits[j] = src.Uint64()
	}
	dst := make([]float64, benchNormals)
	b.Run("transform", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Normals(dst, bits)
		}
		reportPerValue(b)
	})
	b.Run("scalar", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			normalsGo(dst, bits, benchNormals/2, 0)
		}
		reportPerValue(b)
	})
	b.Run("bits", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j := range bits {
				bits[j] = src.Uint64()
			}
		}
		reportPerValue(b)
	})
	b.Run("bits+transform", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j := range bits {
				bits[j] = src.Uint64()
			}
			Normals(dst, bits)
		}
		reportPerValue(b)
	})
}

func BenchmarkNormFloat64(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	dst := make([]float64, benchNormals)
	for i := 0; i < b.N; i++ {
		for j := range dst {
			dst[j] = rng.NormFloat64()
		}
	}
	reportPerValue(b)
}
