package sgemm

import (
	"math"

	"github.com/mkbench/mkbench/internal/task"
)

// BernoulliMask fills m with 1 (keep) and 0 (drop) from a counter-based
// random stream: m[i] is 1 when u_i < thr, where u_i is the low (even i) or
// high (odd i) 32-bit half of z_{i/2+1}, and z_j = mix(key + j·γ) is output
// j of the SplitMix64 generator whose state starts at key (γ = task.Gamma
// and mix = SplitMix are SplitMix64's increment and output function). So
// m[i] is kept with probability thr/2³² (thr ≥ 2³² keeps all), element i
// depends only on key and i, and the assembly and portable versions give
// identical masks.
func BernoulliMask(m []float32, key, thr uint64) {
	if thr >= 1<<32 {
		for i := range m {
			m[i] = 1
		}
		return
	}
	n, i := len(m), 0
	if f := active.bernoulli; f != nil && n >= 16 {
		i = n &^ 15
		f(&m[0], key, uint32(thr), i)
	}
	bernoulliFrom(m, key, thr, i)
}

// BernoulliMaskAny is BernoulliMask in either precision, in plain Go: the
// same masks, for the float64 twins of the float32 kernels.
func BernoulliMaskAny[F float32 | float64](m []F, key, thr uint64) {
	bernoulliFrom(m, key, thr, 0)
}

// bernoulliFrom fills m[from:] by BernoulliMask's definition.
func bernoulliFrom[F float32 | float64](m []F, key, thr uint64, from int) {
	for i := from; i < len(m); i++ {
		z := SplitMix(key + uint64(i/2+1)*task.Gamma)
		u := z & math.MaxUint32
		if i%2 == 1 {
			u = z >> 32
		}
		m[i] = 0
		if u < thr {
			m[i] = 1
		}
	}
}

// SplitMix is SplitMix64's output function (Steele, Lea and Flood 2014),
// a bijective mix of the 64-bit state.
func SplitMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
