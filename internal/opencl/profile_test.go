package opencl

import (
	"math/rand/v2"
	"testing"
)

// Copies are timed by the device: each Write and Read is counted in
// Timing with a positive time, and a copy of 32 MiB takes longer than one
// of 4 KiB (what a host clock around the call could not tell apart from
// the kernels queued before a Read).
func TestTimingCopies(t *testing.T) {
	d := openTest(t)
	const small, big = 1 << 10, 8 << 20 // float32 values
	sb, bb := alloc[float32](t, d, small), alloc[float32](t, d, big)
	host := make([]float32, big)
	copies := func(b *Buffer, n int) Timing {
		t.Helper()
		before, err := d.Timing()
		must(t, err)
		for range 3 {
			must(t, Write(b, 0, host[:n]))
			must(t, Read(b, 0, host[:n]))
		}
		after, err := d.Timing()
		must(t, err)
		return after.Sub(before)
	}
	s, l := copies(sb, small), copies(bb, big)
	for _, c := range []struct {
		name string
		t    Timing
	}{{"4 KiB", s}, {"32 MiB", l}} {
		if c.t.Writes != 3 || c.t.Reads != 3 || c.t.WriteNS <= 0 || c.t.ReadNS <= 0 {
			t.Errorf("three writes and reads of %s: %+v, want 3 of each with positive times", c.name, c.t)
		}
		if c.t.Kernels != 0 || c.t.Blas != 0 {
			t.Errorf("copies of %s counted kernels or products: %+v", c.name, c.t)
		}
	}
	if l.WriteNS <= s.WriteNS || l.ReadNS <= s.ReadNS {
		t.Errorf("copies of 32 MiB took %d ns up and %d down, of 4 KiB %d and %d: want the larger slower", l.WriteNS, l.ReadNS, s.WriteNS, s.ReadNS)
	}
	t.Logf("3 copies each way: 4 KiB %.3f ms up, %.3f down; 32 MiB %.3f up (%.2f GB/s), %.3f down",
		ms(s.WriteNS), ms(s.ReadNS), ms(l.WriteNS), 3*4*big/float64(l.WriteNS), ms(l.ReadNS))
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// With ProfileKernels on, every launch and CLBlast product is counted with
// its device time; off, none is (copies still are).
func TestTimingKernels(t *testing.T) {
	d := openTest(t)
	k := build(t, d, kernels, "saxpy")
	x, y := alloc[float32](t, d, 1024), alloc[float32](t, d, 1024)
	must(t, x.Zero())
	must(t, y.Zero())
	r := rand.New(rand.NewPCG(3, 3))
	const n = 48
	a, b := upload(t, d, randn(r, n*n)), upload(t, d, randn(r, n*n))
	c := alloc[float32](t, d, n*n)
	gemm := func() { must(t, d.Sgemm(false, true, n, n, n, 1, a, 0, n, b, 0, n, 0, c, 0, n)) }
	gemm() // CLBlast compiles the variant on first use: not timed here
	run := func(on bool) Timing {
		t.Helper()
		d.ProfileKernels(on)
		defer d.ProfileKernels(false)
		before, err := d.Timing()
		must(t, err)
		for range 5 {
			must(t, saxpy(k, x, y))
		}
		gemm()
		gemm()
		must(t, Read(y, 0, make([]float32, 16)))
		after, err := d.Timing()
		must(t, err)
		return after.Sub(before)
	}
	on := run(true)
	if on.Kernels != 5 || on.KernelNS <= 0 || on.Blas != 2 || on.BlasNS <= 0 || on.Reads != 1 {
		t.Errorf("5 launches, 2 products and a read timed: %+v", on)
	}
	if off := run(false); off.Kernels != 0 || off.Blas != 0 || off.Reads != 1 || off.ReadNS <= 0 {
		t.Errorf("with kernels not timed: %+v, want only the read", off)
	}
	t.Logf("5 saxpy launches %.3f ms, 2 products of %d³ %.3f ms", ms(on.KernelNS), n, ms(on.BlasNS))
}
