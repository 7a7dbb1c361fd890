package vecmath

import (
	"math/rand/v2"
	"testing"
)

// The vector Adam gives the same bits as the scalar one, tails included.
func TestAdamMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 4, 5, 8, 13, 1000} {
		mk := func() []float64 {
			x := make([]float64, n)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			return x
		}
		p, g, m, v := mk(), mk(), mk(), mk()
		for i := range v {
			v[i] *= v[i]
		}
		p2, m2, v2 := append([]float64(nil), p...), append([]float64(nil), m...), append([]float64(nil), v...)
		Adam(p, g, m, v, 0.7, 1e-3, 0.9, 0.999, 1e-8)
		adamGo(p2, g, m2, v2, 0.7, 1e-3, 0.9, 0.999, 1e-8)
		for i := range p {
			if p[i] != p2[i] || m[i] != m2[i] || v[i] != v2[i] {
				t.Fatalf("n=%d, element %d: (%v %v %v) vs scalar (%v %v %v)", n, i, p[i], m[i], v[i], p2[i], m2[i], v2[i])
			}
		}
	}
}

func BenchmarkAdam(b *testing.B) {
	n := 1 << 15
	p, g, m, v := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range g {
		g[i] = float64(i%7) - 3
	}
	b.SetBytes(int64(n * 8))
	for i := 0; i < b.N; i++ {
		Adam(p, g, m, v, 1, 1e-3, 0.9, 0.999, 1e-8)
	}
}
