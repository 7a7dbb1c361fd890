package opencl

import (
	"math/rand/v2"
	"testing"
)

// TestAllocs pins what the hot calls cost the Go heap: setting arguments
// and launching allocate at most purego's one (its SyscallN's argument
// slice); Sgemm goes through RegisterFunc (float arguments) and allocates
// more, which beside a GEMM's own time does not matter but is logged.
func TestAllocs(t *testing.T) {
	d := openTest(t)
	k := build(t, d, kernels, "saxpy")
	x, y := alloc[float32](t, d, 1024), alloc[float32](t, d, 1024)
	must(t, x.Zero())
	must(t, y.Zero())
	launch := testing.AllocsPerRun(100, func() { must(t, saxpy(k, x, y)) })
	must(t, d.Finish())
	perCall := launch / 5
	if perCall > 1 && !raceEnabled {
		t.Errorf("%.1f allocations a SetArg or Launch call; want at most 1", perCall)
	}
	a, b, c := alloc[float32](t, d, 64*64), alloc[float32](t, d, 64*64), alloc[float32](t, d, 64*64)
	for _, m := range []*Buffer{a, b, c} {
		must(t, m.Zero())
	}
	gemm := testing.AllocsPerRun(20, func() {
		_ = d.Sgemm(false, false, 64, 64, 64, 1, a, 0, 64, b, 0, 64, 0, c, 0, 64)
	})
	host := make([]float32, 16)
	rw := testing.AllocsPerRun(100, func() {
		_ = Write(x, 0, host)
	})
	must(t, d.Finish())
	t.Logf("allocations: %.1f per SetArg/Launch call (4 SetArg + Launch: %.0f), %.0f per Sgemm, %.0f per Write", perCall, launch, gemm, rw)
}

// saxpy sets the saxpy kernel's four arguments and launches it over x and
// y's 1024 elements.
func saxpy(k *Kernel, x, y *Buffer) error {
	for _, err := range [...]error{k.SetFloat32(0, 2), k.SetBuffer(1, x), k.SetBuffer(2, y), k.SetInt32(3, 1024)} {
		if err != nil {
			return err
		}
	}
	return k.Launch([]int{1024}, []int{64})
}

// BenchmarkLaunch is the overhead of a small kernel: four arguments set,
// one launch, a Finish every 64 launches (as an op's sequence would).
func BenchmarkLaunch(b *testing.B) {
	d := openTest(b)
	k := build(b, d, kernels, "saxpy")
	x, y := alloc[float32](b, d, 1024), alloc[float32](b, d, 1024)
	must(b, x.Zero())
	must(b, y.Zero())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		must(b, saxpy(k, x, y))
		if i++; i%64 == 0 {
			must(b, d.Finish())
		}
	}
	must(b, d.Finish())
}

// BenchmarkSgemm is a product at the engine's shapes: a Conv-4 layer's
// 3×3×64 im2col columns times its filters (Omniglot, 14×14, one task's 80
// images) and the flows' 256×192×320. On PoCL it shows the path's cost,
// not a GPU's.
func BenchmarkSgemm(b *testing.B) {
	for _, s := range []struct {
		name    string
		m, n, k int
	}{{"conv4_15680x64x576", 80 * 14 * 14, 64, 576}, {"256x192x320", 256, 192, 320}} {
		b.Run(s.name, func(b *testing.B) {
			d := openTest(b)
			r := rand.New(rand.NewPCG(1, 1))
			ba, bb := upload(b, d, randn(r, s.m*s.k)), upload(b, d, randn(r, s.k*s.n))
			bc := alloc[float32](b, d, s.m*s.n)
			must(b, d.Sgemm(false, false, s.m, s.n, s.k, 1, ba, 0, s.k, bb, 0, s.n, 0, bc, 0, s.n)) // compile before timing
			must(b, d.Finish())
			b.ReportAllocs()
			for b.Loop() {
				must(b, d.Sgemm(false, false, s.m, s.n, s.k, 1, ba, 0, s.k, bb, 0, s.n, 0, bc, 0, s.n))
				must(b, d.Finish())
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
