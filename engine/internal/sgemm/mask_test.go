package sgemm

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// TestBernoulliMask compares the kernels with the definition, at lengths
// around the vector width and at extreme thresholds.
func TestBernoulliMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, thr := range []uint64{0, 1, 1 << 31, 3865470566, math.MaxUint32, 1 << 32} {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 100, 1000} {
			key := rng.Uint64()
			var masks [][]float32
			forEachImpl(t, func(t *testing.T) {
				m := make([]float32, n)
				for i := range m {
					m[i] = 7
				}
				BernoulliMask(m, key, thr)
				for i, v := range m {
					z := SplitMix(key + uint64(i/2+1)*task.Gamma)
					u := z << 32 >> 32
					if i%2 == 1 {
						u = z >> 32
					}
					want := float32(0)
					if u < thr {
						want = 1
					}
					if v != want {
						t.Fatalf("thr=%d n=%d i=%d: got %g, want %g", thr, n, i, v, want)
					}
				}
				masks = append(masks, m)
			})
			for _, m := range masks[1:] {
				if !slices.Equal(m, masks[0]) {
					t.Fatalf("thr=%d n=%d: kernels disagree", thr, n)
				}
			}
			m64 := make([]float64, n)
			BernoulliMaskAny(m64, key, thr)
			for i, v := range m64 {
				if float32(v) != masks[0][i] {
					t.Fatalf("thr=%d n=%d i=%d: BernoulliMaskAny gives %g, BernoulliMask %g", thr, n, i, v, masks[0][i])
				}
			}
		}
	}
}

func BenchmarkBernoulliMask(b *testing.B) {
	m := make([]float32, 50176)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			old := active
			active = im
			defer func() { active = old }()
			for b.Loop() {
				BernoulliMask(m, 12345, 3865470566)
			}
		})
	}
}
