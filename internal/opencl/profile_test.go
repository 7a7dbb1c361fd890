package opencl

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
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

// Kernels and products queued from two goroutines at once (the staged
// step's task ranges) are each counted once, and their device times add
// up to no more than the time that passed: a product's span holds no
// other goroutine's kernels. The kernels are long enough to keep the
// queue full, so that a span holding them would show as time counted
// twice.
func TestTimingConcurrent(t *testing.T) {
	d := openTest(t)
	k := build(t, d, kernels, "saxpy")
	const big = 1 << 20
	x, y := alloc[float32](t, d, big), alloc[float32](t, d, big)
	must(t, x.Zero())
	must(t, y.Zero())
	launch := func() error {
		for _, err := range [...]error{k.SetFloat32(0, 2), k.SetBuffer(1, x), k.SetBuffer(2, y), k.SetInt32(3, big)} {
			if err != nil {
				return err
			}
		}
		return k.Launch([]int{big}, nil)
	}
	r := rand.New(rand.NewPCG(4, 4))
	const n = 64
	a, b := upload(t, d, randn(r, n*n)), upload(t, d, randn(r, n*n))
	c := alloc[float32](t, d, n*n)
	gemm := func() error { return d.Sgemm(false, false, n, n, n, 1, a, 0, n, b, 0, n, 0, c, 0, n) }
	must(t, gemm()) // compiled before the clock starts
	must(t, d.Finish())
	d.ProfileKernels(true)
	defer d.ProfileKernels(false)
	before, err := d.Timing()
	must(t, err)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() {
		for range 100 {
			if errs[0] = launch(); errs[0] != nil {
				return
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			if errs[1] = gemm(); errs[1] != nil {
				return
			}
		}
	})
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	after, err := d.Timing()
	must(t, err)
	wall := time.Since(start)
	got := after.Sub(before)
	if got.Kernels != 100 || got.Blas != 20 || got.KernelNS <= 0 || got.BlasNS <= 0 {
		t.Errorf("100 launches and 20 products from two goroutines: %+v", got)
	}
	busy := got.KernelNS + got.BlasNS + got.TransferNS()
	if busy > wall.Nanoseconds() {
		t.Errorf("the device was busy %.3f ms in %.3f ms: a command was counted twice", ms(busy), ms(wall.Nanoseconds()))
	}
	t.Logf("%.3f ms of kernels, %.3f of products in %.3f ms", ms(got.KernelNS), ms(got.BlasNS), ms(wall.Nanoseconds()))
}
