package vecmath

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// xoshiroRef is xoshiro256+ as in Blackman & Vigna's xoshiro256plus.c, one
// state and one value at a time, written apart from bitsGo.
type xoshiroRef [4]uint64

func (s *xoshiroRef) next() uint64 {
	result := s[0] + s[3]
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = s[3]<<45 | s[3]>>(64-45)
	return result
}

// lane returns lane j of b's state as a reference generator.
func (b *Bits) lane(j int) xoshiroRef {
	return xoshiroRef{b.s[0][j], b.s[1][j], b.s[2][j], b.s[3][j]}
}

// The reference and SplitMix64 give the outputs of the reference C
// (xoshiro256plus.c from the state {1, 2, 3, 4}; splitmix64.c from 0), so
// the tests below compare with the algorithm itself.
func TestBitsReferenceKnownAnswers(t *testing.T) {
	want := map[int]uint64{0: 5, 1: 0x0000c00000000007, 2: 0x0000c00018000007, 3: 0x8001600018040302, 4: 0x8061900024040305, 5: 0xc0617014120f0583, 999: 0x4b49c5520b0cb381}
	s := xoshiroRef{1, 2, 3, 4}
	for i := 0; i < 1000; i++ {
		if x := s.next(); want[i] != 0 && x != want[i] {
			t.Errorf("reference output %d = %#x, want %#x", i, x, want[i])
		}
	}
	// Every lane from {1, 2, 3, 4}: each block is the C's next output four
	// times, through Fill's own path.
	var b Bits
	z := [16]uint64{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}
	b.setState(&z)
	dst := make([]uint64, 4000)
	b.Fill(dst)
	for i, w := range want {
		for j := 0; j < 4; j++ {
			if dst[4*i+j] != w {
				t.Errorf("Fill: lane %d, block %d = %#x, want %#x", j, i, dst[4*i+j], w)
			}
		}
	}
	for k, w := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if x := splitMix(uint64(k+1) * smGamma); x != w {
			t.Errorf("SplitMix64 output %d from 0 = %#x, want %#x", k, x, w)
		}
	}
}

// Lane j of Fill (the vector path where there is one) and of bitsGo is
// the reference started at lane j's state, over many blocks and calls.
func TestBitsLanesMatchReference(t *testing.T) {
	for _, path := range []struct {
		name string
		fill func(*Bits, []uint64)
	}{
		{"Fill", (*Bits).Fill},
		{"bitsGo", func(b *Bits, dst []uint64) { bitsGo(&b.s, dst) }},
	} {
		var b Bits
		b.Seed(0x1234, 0x5678)
		var ref [4]xoshiroRef
		for j := range ref {
			ref[j] = b.lane(j)
		}
		dst := make([]uint64, 40000)
		for call := 0; call < 3; call++ {
			path.fill(&b, dst)
			for i, x := range dst {
				if want := ref[i%4].next(); x != want {
					t.Fatalf("%s: call %d, dst[%d] = %#x, lane %d's reference %#x", path.name, call, i, x, i%4, want)
				}
			}
		}
		for j := range ref {
			if b.lane(j) != ref[j] {
				t.Errorf("%s: lane %d's state %#x, reference %#x", path.name, j, b.lane(j), ref[j])
			}
		}
	}
}

// Fill gives the values and the state of bitsGo for every length, and in
// successive calls of odd lengths.
func TestBitsFillMatchesGo(t *testing.T) {
	if bitsVec == nil {
		t.Log("no vector path here: the Go path is compared with itself")
	}
	lengths := []int{100000}
	for n := 0; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		var v, g Bits
		v.Seed(uint64(n), 99)
		g = v
		got, want := make([]uint64, n), make([]uint64, n)
		v.Fill(got)
		bitsGo(&g.s, want)
		if !slices.Equal(got, want) || v != g {
			t.Fatalf("n=%d: Fill and bitsGo differ", n)
		}
	}
	var v, g Bits
	v.Seed(5, 6)
	g = v
	rng := rand.New(rand.NewPCG(3, 4))
	for call := 0; call < 500; call++ {
		n := 2*rng.IntN(40) + 1
		if call%50 == 0 {
			n = 4*rng.IntN(3000) + 1 + 2*rng.IntN(2)
		}
		got, want := make([]uint64, n), make([]uint64, n)
		v.Fill(got)
		bitsGo(&g.s, want)
		if !slices.Equal(got, want) || v != g {
			t.Fatalf("call %d (n=%d): Fill and bitsGo differ", call, n)
		}
	}
}

// A length that is not a multiple of 4 consumes whole blocks and drops the
// rest of the last one.
func TestBitsFillDropsPartialBlock(t *testing.T) {
	var a, b Bits
	a.Seed(7, 8)
	b = a
	whole := make([]uint64, 24)
	a.Fill(whole)
	var got []uint64
	for _, n := range []int{5, 1, 6, 3} { // blocks 0–1, 2, 3–4, 5
		dst := make([]uint64, n)
		b.Fill(dst)
		got = append(got, dst...)
	}
	want := slices.Concat(whole[0:5], whole[8:9], whole[12:18], whole[20:23])
	if !slices.Equal(got, want) || a != b {
		t.Errorf("Fill of 5, 1, 6, 3 = %#x, want %#x", got, want)
	}
}

// The stream for a seed is pinned: every machine and build (purego, no
// AVX2, other architectures) must give these values.
func TestBitsGolden(t *testing.T) {
	var b Bits
	b.Seed(1, 2)
	first := make([]uint64, 8)
	b.Fill(first)
	wantFirst := []uint64{0x86af5497befa4e3f, 0xf04e0682949617a4, 0x79f9f2d3c569b39f, 0xe03baf120e2a909f, 0x5948ba4696f4da91, 0x60f372db0df2a433, 0x62c3fc5bf3e4eaef, 0xb40fa358b289d7b5}
	if !slices.Equal(first, wantFirst) {
		t.Errorf("first values %#x, want %#x", first, wantFirst)
	}
	hash := fnv.New64a()
	dst := make([]uint64, 1001)
	for _, n := range []int{1001, 1000, 3, 998} {
		b.Fill(dst[:n])
		for _, x := range dst[:n] {
			hash.Write([]byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24), byte(x >> 32), byte(x >> 40), byte(x >> 48), byte(x >> 56)})
		}
	}
	if got, want := hash.Sum64(), uint64(0x95aaa2b3ac4ae857); got != want {
		t.Errorf("hash of the stream = %#x, want %#x", got, want)
	}
}

// Seeds close to one another, swapped or zero give unrelated streams: no
// value is shared among the first 256 of any two streams or lanes (a
// chance of about 2⁻⁴⁰ for random values), and no lane is zero.
func TestBitsSeed(t *testing.T) {
	seeds := make(map[[2]uint64]bool)
	for _, x := range []uint64{0, 1, 2, 3, smGamma, math.MaxUint64, 1 << 63} {
		for _, y := range []uint64{0, 1, 2, math.MaxUint64} {
			seeds[[2]uint64{x, y}] = true
			seeds[[2]uint64{y, x}] = true
		}
	}
	seen := make(map[uint64][2]uint64)
	dst := make([]uint64, 256)
	for s := range seeds {
		var b Bits
		b.Seed(s[0], s[1])
		for j := 0; j < 4; j++ {
			if b.lane(j) == (xoshiroRef{}) {
				t.Errorf("seed %#x: lane %d is zero", s, j)
			}
		}
		b.Fill(dst)
		for _, x := range dst {
			if o, ok := seen[x]; ok && o != s {
				t.Fatalf("seeds %#x and %#x share the value %#x", s, o, x)
			} else if ok {
				// Two lanes of one seed, or a value twice in a lane.
				t.Fatalf("seed %#x gives %#x twice", s, x)
			}
			seen[x] = s
		}
	}

	var b Bits
	z := [16]uint64{4: 1, 5: 2, 6: 3, 7: 4}
	b.setState(&z)
	for j := 0; j < 4; j++ {
		if b.lane(j) == (xoshiroRef{}) {
			t.Errorf("setState left lane %d zero", j)
		}
	}
	if b.lane(1) != (xoshiroRef{1, 2, 3, 4}) {
		t.Errorf("setState changed a lane that was not zero: %#x", b.lane(1))
	}
}

func TestBitsFillUnseededPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Fill of the zero Bits did not panic")
		}
	}()
	var b Bits
	b.Fill(make([]uint64, 8))
}

// The top 52 bits, those Normals uses, over 1e6 values: the mean of u and
// the correlation of neighbours (which are of different lanes), and the
// frequency of each bit. The tolerances are 5 standard errors; the seed is
// fixed, so the test is deterministic.
func TestBitsTopBitsStatistics(t *testing.T) {
	const n = 1000000
	var b Bits
	b.Seed(11, 12)
	dst := make([]uint64, n)
	b.Fill(dst)
	var ones [64]int
	var sum, sumLag float64
	prev := 0.5
	for _, x := range dst {
		u := float64(x>>12) * 0x1p-52
		sum += u
		sumLag += (u - 0.5) * (prev - 0.5)
		prev = u
		for k := 12; k < 64; k++ {
			ones[k] += int(x >> k & 1)
		}
	}
	if mean, se := sum/n, math.Sqrt(1.0/12/n); math.Abs(mean-0.5) > 5*se {
		t.Errorf("mean of u %.5f, more than 5 standard errors (%.5f) from ½", mean, se)
	}
	if corr, se := sumLag/n*12, 1/math.Sqrt(n); math.Abs(corr) > 5*se {
		t.Errorf("correlation of neighbouring u %.5f, more than 5 standard errors (%.5f) from 0", corr, se)
	}
	for k := 12; k < 64; k++ {
		if f, se := float64(ones[k])/n, 0.5/math.Sqrt(n); math.Abs(f-0.5) > 5*se {
			t.Errorf("bit %d set in %.5f of the values, more than 5 standard errors (%.5f) from ½", k, f, se)
		}
	}
}

func TestBitsFillAllocs(t *testing.T) {
	var b Bits
	b.Seed(1, 2)
	for _, n := range []int{7, 1000} {
		dst := make([]uint64, n)
		if a := testing.AllocsPerRun(100, func() { b.Fill(dst) }); a != 0 {
			t.Errorf("Fill of %d values: %v allocations", n, a)
		}
	}
}

const benchBits = 128000

func reportPerBit(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBits, "ns/value")
}

func BenchmarkBitsFill(b *testing.B) {
	var g Bits
	g.Seed(1, 2)
	dst := make([]uint64, benchBits)
	for b.Loop() {
		g.Fill(dst)
	}
	reportPerBit(b)
}

// BenchmarkBitsFillGo is the portable path, what purego and machines
// without AVX2 get.
func BenchmarkBitsFillGo(b *testing.B) {
	var g Bits
	g.Seed(1, 2)
	dst := make([]uint64, benchBits)
	for b.Loop() {
		bitsGo(&g.s, dst)
	}
	reportPerBit(b)
}

// BenchmarkPCGUint64Loop is what the engine did before Bits.
func BenchmarkPCGUint64Loop(b *testing.B) {
	var pcg rand.PCG
	pcg.Seed(1, 2)
	dst := make([]uint64, benchBits)
	for b.Loop() {
		for i := range dst {
			dst[i] = pcg.Uint64()
		}
	}
	reportPerBit(b)
}
