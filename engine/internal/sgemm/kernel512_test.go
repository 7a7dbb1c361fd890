package sgemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAVX512SameBytesAsAVX2: the AVX-512 product kernel sums every element
// in the AVX2 kernel's order and applies the same epilogue, so the two
// kernel sets give the same bytes — on every tile height (m 1 … 30 and
// past a block of 144 rows), both storage orders of A and B, both panel
// widths and partial panels, k across a pass boundary, and every part of
// the epilogue, with NaNs and signed zeros among the values.
func TestAVX512SameBytesAsAVX2(t *testing.T) {
	var sets []*impl
	for _, im := range impls {
		if im.name == "avx512" || im.name == "avx2" {
			sets = append(sets, im)
		}
	}
	if len(sets) < 2 {
		t.Skip("this CPU lacks AVX-512")
	}
	rng := rand.New(rand.NewPCG(45, 512))
	val := func() float32 {
		switch rng.IntN(40) {
		case 0:
			return float32(math.NaN())
		case 1:
			return float32(math.Copysign(0, -1))
		}
		return float32(rng.NormFloat64())
	}
	ms := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 23, 24, 25, 30, 150, 300}
	for _, m := range ms {
		for _, n := range []int{16, 8, 40, 67} {
			for _, k := range []int{1, 3, 64, 300} {
				tA, tB := rng.IntN(2) == 0, rng.IntN(2) == 0
				alpha, beta := float32(1), float32(0)
				if rng.IntN(2) == 0 {
					alpha = 0.75
				}
				if rng.IntN(2) == 0 {
					beta = -1.5
				}
				lda, ldb, ldc := k+1, n+3, n+2
				if tA {
					lda = m + 1
				}
				if tB {
					ldb = k + 2
				}
				a, b := make([]float32, max(m, k)*lda), make([]float32, max(k, n)*ldb)
				for i := range a {
					a[i] = val()
				}
				for i := range b {
					b[i] = val()
				}
				c0 := make([]float32, m*ldc)
				for i := range c0 {
					c0[i] = val()
				}
				ep := Epilogue{ReLU: rng.IntN(2) == 0}
				if rng.IntN(2) == 0 {
					ep.RowBias = make([]float32, m)
					for i := range ep.RowBias {
						ep.RowBias[i] = val()
					}
				}
				if rng.IntN(2) == 0 {
					ep.Mask, ep.LdMask = make([]float32, m*(n+1)), n+1
					for i := range ep.Mask {
						ep.Mask[i] = val()
					}
				}
				var outs [2][]float32
				for s, im := range sets {
					old := active
					active = im
					outs[s] = append([]float32(nil), c0...)
					var w Workspace
					w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, outs[s], ldc, ep)
					active = old
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
						t.Fatalf("m=%d n=%d k=%d tA=%v tB=%v α=%g β=%g: element %d is %g (%#x) with %s, %g (%#x) with %s",
							m, n, k, tA, tB, alpha, beta, i, outs[0][i], math.Float32bits(outs[0][i]), sets[0].name,
							outs[1][i], math.Float32bits(outs[1][i]), sets[1].name)
					}
				}
			}
		}
	}
}
