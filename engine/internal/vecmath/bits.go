package vecmath

import "math/bits"

// Constants of SplitMix64 (Steele, Lea & Flood; Vigna's mixing constants).
const (
	smGamma = 0x9E3779B97F4A7C15
	smMul1  = 0xBF58476D1CE4E5B9
	smMul2  = 0x94D049BB133111EB
)

// Bits is a generator of uniform 64-bit values for Normals: xoshiro256+
// (Blackman & Vigna) run as four independent states, the lanes, side by
// side. The output is a stream of blocks of four values, lane j giving
// the j-th value of every block, so that one AVX2 register steps all four
// lanes at once where a single xoshiro256+ would be a serial chain.
//
// Each lane is xoshiro256+ exactly: result = s0 + s3, then
//
//	t = s1 << 17; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45)
//
// Its lowest bits are weak (the lowest is an LFSR and fails linearity
// tests); the top 53 are of full quality, and Normals takes only the top
// 52 (bits>>12).
//
// The values are a function of the seed and the lengths of the Fill calls
// alone: the AVX2 path and the portable one give the same on every machine
// and build. The zero
// Bits is not a generator (xoshiro's all-zero state is a fixed point that
// would give all-zero bits, and Normals all-zero draws): Seed it first.
type Bits struct {
	// s[w][j] is word w of lane j, so that s[w] is one YMM register.
	s [4][4]uint64
}

// Seed sets the state from a and c. The 16 state words are
//
//	z[k] = mix(mix(a + (k+1)·γ) ^ c),  k = 0, …, 15
//
// with γ and mix SplitMix64's increment and output function: mix(a + (k+1)·γ)
// is the k-th output of SplitMix64 started at a, and mixing it again with c
// makes every word depend on both seeds, bijectively in each (for a fixed
// other), and (a, c) unrelated to (c, a). Lane j takes s0…s3 = z[4j…4j+3].
// A lane of four zero words, which would stay zero for ever, has its s0
// replaced by γ; it takes a chance of 2⁻²⁵⁶, so no seed is known to need it.
func (b *Bits) Seed(a, c uint64) {
	var z [16]uint64
	for k := range z {
		a += smGamma
		z[k] = splitMix(splitMix(a) ^ c)
	}
	b.setState(&z)
}

// setState is Seed's layout of the words, apart so that the test can give
// it a zero lane.
func (b *Bits) setState(z *[16]uint64) {
	for j := 0; j < 4; j++ {
		for w := 0; w < 4; w++ {
			b.s[w][j] = z[4*j+w]
		}
		if b.s[0][j]|b.s[1][j]|b.s[2][j]|b.s[3][j] == 0 {
			b.s[0][j] = smGamma
		}
	}
}

// splitMix is SplitMix64's output function (a bijection).
func splitMix(z uint64) uint64 {
	z = (z ^ z>>30) * smMul1
	z = (z ^ z>>27) * smMul2
	return z ^ z>>31
}

// Fill writes the next len(dst) values of the stream to dst. It consumes
// whole blocks, ⌈len(dst)/4⌉ of them: when len(dst) is not a multiple of 4,
// the last block's values past the end of dst are dropped, not kept for the
// next call. The values are thus a function of the seed and the lengths of
// the calls, and the vector path never has a partial block to hand over.
// Fill panics on a Bits that was never seeded and allocates nothing.
func (b *Bits) Fill(dst []uint64) {
	// Seed leaves no lane zero and xoshiro never reaches zero from
	// elsewhere, so a zero lane 0 can only be the zero Bits.
	if b.s[0][0]|b.s[1][0]|b.s[2][0]|b.s[3][0] == 0 {
		panic("dgemm: Bits.Fill before Seed")
	}
	done := 0
	if bitsVec != nil {
		if done = len(dst) &^ 3; done > 0 {
			bitsVec(&b.s, &dst[0], done)
		}
	}
	bitsGo(&b.s, dst[done:])
}

// bitsGo is Fill without the vector path. It runs one lane at a time,
// storing every fourth value, so that the lane's four words stay in
// registers (all sixteen would not).
func bitsGo(s *[4][4]uint64, dst []uint64) {
	n := len(dst)
	if n == 0 {
		return
	}
	full := n &^ 3
	for j := 0; j < 4; j++ {
		s0, s1, s2, s3 := s[0][j], s[1][j], s[2][j], s[3][j]
		for i := j; i < full; i += 4 {
			dst[i], s0, s1, s2, s3 = xoshiroNext(s0, s1, s2, s3)
		}
		if full < n {
			// The partial block: every lane steps, whether its value is
			// kept or dropped.
			var v uint64
			v, s0, s1, s2, s3 = xoshiroNext(s0, s1, s2, s3)
			if full+j < n {
				dst[full+j] = v
			}
		}
		s[0][j], s[1][j], s[2][j], s[3][j] = s0, s1, s2, s3
	}
}

// xoshiroNext is one step of a xoshiro256+ state: its output and the next
// state.
func xoshiroNext(s0, s1, s2, s3 uint64) (out, n0, n1, n2, n3 uint64) {
	out = s0 + s3
	t := s1 << 17
	s2 ^= s0
	s3 ^= s1
	s1 ^= s2
	s0 ^= s3
	s2 ^= t
	return out, s0, s1, s2, bits.RotateLeft64(s3, 45)
}
