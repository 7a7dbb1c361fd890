package vecmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSincosMatchesMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(x float64) {
		s, c := Sincos(x)
		ws, wc := math.Sincos(x)
		tol := 4e-16 * math.Max(1, math.Abs(x)*1e-9)
		if math.Abs(s-ws) > tol || math.Abs(c-wc) > tol {
			t.Fatalf("Sincos(%v) = %v, %v; math.Sincos: %v, %v", x, s, c, ws, wc)
		}
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1e-300, math.Pi / 4, math.Pi / 2, math.Pi, 3 * math.Pi / 2, -math.Pi / 2, 1e6, -1e6, 1 << 27, -(1 << 27)} {
		check(x)
	}
	for i := 0; i < 200000; i++ {
		check((2*rng.Float64() - 1) * math.Pow(10, float64(rng.IntN(9))-2))
	}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e30, -1 << 40} {
		s, c := Sincos(x)
		ws, wc := math.Sincos(x)
		if !same(s, ws) || !same(c, wc) {
			t.Errorf("Sincos(%v) = %v, %v; math.Sincos: %v, %v", x, s, c, ws, wc)
		}
	}
}

// The vector path gives the same bits as the scalar one, in place too,
// and hands out-of-range blocks to the scalar path.
func TestSincosScaledMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 3, 4, 7, 8, 129} {
		for _, wild := range []bool{false, true} {
			x := make([]float64, n)
			for i := range x {
				x[i] = 60 * (2*rng.Float64() - 1)
			}
			if wild {
				x[n/2] = math.NaN()
				x[0] = 1e12
			}
			s, c := make([]float64, n), make([]float64, n)
			SincosScaled(s, c, x, 0.3)
			in := append([]float64(nil), x...)
			s2 := make([]float64, n)
			SincosScaled(s2, in, in, 0.3) // c aliasing x
			for i, xi := range x {
				ws, wc := Sincos(xi)
				wc *= 0.3
				same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
				if !same(s[i], ws) || !same(c[i], wc) || !same(s2[i], ws) || !same(in[i], wc) {
					t.Fatalf("n=%d wild=%v x[%d]=%v: (%v, %v) in place (%v, %v), scalar (%v, %v)", n, wild, i, xi, s[i], c[i], s2[i], in[i], ws, wc)
				}
			}
		}
	}
}

func BenchmarkSincosScaled(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, 4096)
	for i := range x {
		x[i] = 40 * (2*rng.Float64() - 1)
	}
	s, c := make([]float64, len(x)), make([]float64, len(x))
	b.Run("vector", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			SincosScaled(s, c, x, 1)
		}
	})
	b.Run("math", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, v := range x {
				s[j], c[j] = math.Sincos(v)
			}
		}
	})
}
