package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSincosMatchesMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(x float64) {
		s, c := sincos(x)
		ws, wc := math.Sincos(x)
		// A few ulp of the result, or of 1 near the zeros (where both
		// functions' errors come from reducing x).
		tol := 4e-16 * math.Max(1, math.Abs(x)*1e-9)
		if math.Abs(s-ws) > tol || math.Abs(c-wc) > tol {
			t.Fatalf("sincos(%v) = %v, %v; math.Sincos: %v, %v", x, s, c, ws, wc)
		}
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1e-300, math.Pi / 4, math.Pi / 2, math.Pi, 3 * math.Pi / 2, -math.Pi / 2, 1e6, -1e6, 1 << 27, -(1 << 27)} {
		check(x)
	}
	for i := 0; i < 200000; i++ {
		scale := math.Pow(10, float64(rng.IntN(9))-2) // 0.01 … 1e6
		check((2*rng.Float64() - 1) * scale)
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e30, -1 << 40} {
		s, c := sincos(x)
		ws, wc := math.Sincos(x)
		same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
		if !same(s, ws) || !same(c, wc) {
			t.Errorf("sincos(%v) = %v, %v; math.Sincos: %v, %v", x, s, c, ws, wc)
		}
	}
}

func BenchmarkSincos(b *testing.B) {
	xs := make([]float64, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range xs {
		xs[i] = 40 * (2*rng.Float64() - 1)
	}
	b.Run("fast", func(b *testing.B) {
		var acc float64
		for i := 0; i < b.N; i++ {
			s, c := sincos(xs[i&4095])
			acc += s + c
		}
		_ = acc
	})
	b.Run("math", func(b *testing.B) {
		var acc float64
		for i := 0; i < b.N; i++ {
			s, c := math.Sincos(xs[i&4095])
			acc += s + c
		}
		_ = acc
	})
}
