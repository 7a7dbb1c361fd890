package ops

import (
	"math"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/testutil"
)

// testDevice opens the first OpenCL device (PoCL in CI) or skips the test
// (fails it under CI=true) with one line saying why.
func testDevice(tb testing.TB) *opencl.Device {
	tb.Helper()
	sel, err := opencl.ParseSelection("opencl")
	if err != nil {
		tb.Fatal(err)
	}
	dev, _, err := opencl.Open(sel)
	if err != nil {
		testutil.OpenCL(tb, err)
	}
	return dev
}

// The shared program builds once per device, and its conversions give the
// bits of Go's float32() and float64().
func TestDeviceProgramConversions(t *testing.T) {
	dev := testDevice(t)
	p, err := deviceProgram(dev, "common")
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := deviceProgram(dev, "common"); err != nil || p2 != p {
		t.Fatalf("second deviceProgram: %p, %v; want the first (%p)", p2, err, p)
	}
	if _, err := deviceProgram(dev, "nosuch"); err == nil {
		t.Fatal("deviceProgram(nosuch): no error")
	}
	if !dev.Info.FP64 {
		t.Skipf("%s has no cl_khr_fp64: conversions run on the host", dev.Info.Name)
	}
	src := []float64{0, -0.0, 1, 1.0000000596046448, 1e-40, -3.4028235677973366e38, 3.5e38, math.Inf(-1), math.NaN(), math.Pi}
	n := len(src)
	b64, err := opencl.Alloc[float64](dev, n)
	if err != nil {
		t.Fatal(err)
	}
	defer b64.Release()
	b32, err := opencl.Alloc[float32](dev, n)
	if err != nil {
		t.Fatal(err)
	}
	defer b32.Release()
	if err := opencl.Write(b64, 0, src); err != nil {
		t.Fatal(err)
	}
	k, err := p.Kernel("f64_to_f32")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	for i, set := range []error{k.SetBuffer(0, b64), k.SetBuffer(1, b32), k.SetInt32(2, int32(n))} {
		if set != nil {
			t.Fatalf("arg %d: %v", i, set)
		}
	}
	if err := k.Launch([]int{n}, nil); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := opencl.Read(b32, 0, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range src {
		if math.Float32bits(got[i]) != math.Float32bits(float32(v)) {
			t.Errorf("f64_to_f32(%v) = %v (%#x), want %v (%#x)", v, got[i], math.Float32bits(got[i]), float32(v), math.Float32bits(float32(v)))
		}
	}
}
