package opencl

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// openTest opens the device the tests run on (a GPU when there is one,
// else the first device: PoCL here and in CI), or skips (fails with
// CI=true) saying why there is none.
func openTest(tb testing.TB) *Device {
	tb.Helper()
	d, _, err := Open(Selection{Mode: ModeOpenCL, Index: -1})
	testutil.OpenCL(tb, err)
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Error(err)
		}
	})
	return d
}

// build compiles source and makes its kernel name, released at the end.
func build(tb testing.TB, d *Device, source, name string) *Kernel {
	tb.Helper()
	p, err := d.Build(source, "-cl-std=CL1.2")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Release)
	k, err := p.Kernel(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(k.Release)
	return k
}

func alloc[T Element](tb testing.TB, d *Device, n int) *Buffer {
	tb.Helper()
	b, err := Alloc[T](d, n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Release)
	return b
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func TestDevices(t *testing.T) {
	devs, err := Devices()
	testutil.OpenCL(t, err)
	for i, d := range devs {
		if d.Index != i || d.Name == "" || d.PlatformName == "" || d.GlobalMem == 0 || d.MaxAlloc == 0 ||
			d.MaxAlloc > d.GlobalMem || d.ComputeUnits <= 0 || d.MaxWorkGroup <= 0 || !strings.HasPrefix(d.OpenCLC, "OpenCL C ") ||
			!strings.HasPrefix(d.Version, "OpenCL ") || d.Type.String() == "other" {
			t.Errorf("device %d: %+v", i, d)
		}
		if s := d.String(); !strings.HasPrefix(s, "opencl:") || strings.Contains(s, "\n") {
			t.Errorf("DeviceInfo.String() = %q", s)
		}
	}
	var buf bytes.Buffer
	must(t, WriteTable(&buf, devs))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(devs)+1 || !strings.HasPrefix(lines[1], "opencl:0 ") {
		t.Errorf("WriteTable:\n%s", buf.String())
	}
	t.Logf("\n%s", buf.String())
}

func TestBuffers(t *testing.T) {
	d := openTest(t)
	f := alloc[float32](t, d, 1000)
	src := make([]float32, 1000)
	for i := range src {
		src[i] = float32(i)*0.25 - 17
	}
	src[3] = float32(math.NaN())
	src[4] = float32(math.Inf(-1))
	must(t, Write(f, 0, src))
	got := make([]float32, 1000)
	must(t, Read(f, 0, got))
	if !bitsEqual32(got, src) {
		t.Fatal("float32 round trip differs")
	}
	// Offsets, Fill, Copy, Zero, on every element type.
	must(t, Write(f, 10, []float32{1, 2, 3}))
	must(t, Fill(f, 500, 100, float32(-2.5)))
	part := make([]float32, 3)
	must(t, Read(f, 10, part))
	tail := make([]float32, 100)
	must(t, Read(f, 500, tail))
	if part[0] != 1 || part[2] != 3 || tail[0] != -2.5 || tail[99] != -2.5 {
		t.Errorf("offset write %v, fill %v %v", part, tail[0], tail[99])
	}
	g := alloc[float32](t, d, 50)
	must(t, Copy(g, 5, f, 10, 3))
	must(t, Read(g, 5, part))
	if part[0] != 1 || part[2] != 3 {
		t.Errorf("copy gave %v", part)
	}
	must(t, f.Zero())
	must(t, Read(f, 0, got))
	for i, v := range got {
		if math.Float32bits(v) != 0 {
			t.Fatalf("after Zero element %d is %v", i, v)
		}
	}
	ib := alloc[int32](t, d, 7)
	must(t, Write(ib, 0, []int32{-1, 2, math.MaxInt32, math.MinInt32, 0, 5, 6}))
	must(t, Fill(ib, 5, 2, int32(-9)))
	ig := make([]int32, 7)
	must(t, Read(ib, 0, ig))
	if ig[0] != -1 || ig[2] != math.MaxInt32 || ig[3] != math.MinInt32 || ig[5] != -9 || ig[6] != -9 {
		t.Errorf("int32 round trip %v", ig)
	}
	ub := alloc[uint8](t, d, 13)
	must(t, Fill(ub, 0, 13, uint8(0xA5)))
	must(t, Write(ub, 12, []uint8{7}))
	ug := make([]uint8, 13)
	must(t, Read(ub, 0, ug))
	if ug[0] != 0xA5 || ug[11] != 0xA5 || ug[12] != 7 {
		t.Errorf("uint8 round trip %v", ug)
	}
	db := alloc[float64](t, d, 3)
	must(t, Write(db, 0, []float64{math.Pi, math.Copysign(0, -1), 1e300}))
	dg := make([]float64, 3)
	must(t, Read(db, 0, dg))
	if dg[0] != math.Pi || !math.Signbit(dg[1]) || dg[2] != 1e300 {
		t.Errorf("float64 round trip %v", dg)
	}

	// Refusals: one line each, nothing written.
	for name, err := range map[string]error{
		"past the end":   Write(f, 999, []float32{1, 2}),
		"negative":       Read(f, -1, part),
		"wrong type":     Write(f, 0, []int32{1}),
		"copy too long":  Copy(g, 0, f, 0, 51),
		"copy kinds":     Copy(ib, 0, f, 0, 1),
		"fill too long":  Fill(ub, 10, 4, uint8(1)),
		"zero length":    errOnly(Alloc[float32](d, 0)),
		"over max alloc": errOnly(Alloc[float32](d, int(d.Info.MaxAlloc/4)+1)),
	} {
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want a one-line refusal", name, err)
		}
	}
	if err := errOnly(Alloc[float32](d, int(d.Info.MaxAlloc/4)+1)); !strings.Contains(err.Error(), size(d.Info.MaxAlloc)) {
		t.Errorf("an allocation over the largest: %v; want the largest named", err)
	}
	f.Release()
	f.Release()
	if err := Read(f, 0, part); err == nil {
		t.Error("a read of a released buffer: no error")
	}
}

func errOnly(_ *Buffer, err error) error { return err }

func bitsEqual32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

const kernels = `
__kernel void saxpy(float a, __global const float *x, __global float *y, int n) {
	int i = get_global_id(0);
	if (i < n) y[i] = a * x[i] + y[i];
}
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void narrow(__global const double *x, __global float *y) {
	size_t i = get_global_id(0);
	y[i] = (float)x[i];
}
__kernel void relu(__global float *x) {
	size_t i = get_global_id(0);
	float v = x[i];
	x[i] = v < 0 ? 0 : v;
}
__kernel void args(__global ulong *out, uint u, ulong w, int s, __local float *scratch) {
	scratch[get_local_id(0)] = 1;
	barrier(CLK_LOCAL_MEM_FENCE);
	if (get_global_id(0) == 0) { out[0] = u; out[1] = w; out[2] = (ulong)(long)s; out[3] = (ulong)scratch[0]; }
	out[4 + get_global_id(1) * 2 + get_global_id(0) % 2] = get_global_id(0) + 10 * get_global_id(1);
}
`

func TestSaxpy(t *testing.T) {
	d := openTest(t)
	k := build(t, d, kernels, "saxpy")
	const n = 1<<16 + 3
	r := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = r.Float32()*2-1, r.Float32()*2-1
	}
	bx, by := alloc[float32](t, d, n), alloc[float32](t, d, n)
	must(t, Write(bx, 0, x))
	must(t, Write(by, 0, y))
	must(t, k.SetFloat32(0, 1.5))
	must(t, k.SetBuffer(1, bx))
	must(t, k.SetBuffer(2, by))
	must(t, k.SetInt32(3, n))
	must(t, k.Launch([]int{n + 61}, []int{64}))
	got := make([]float32, n)
	must(t, Read(by, 0, got))
	for i := range got {
		// a·x+y rounds once or, contracted to a fused multiply-add,
		// once less: within an ulp of either.
		want := float64(1.5)*float64(x[i]) + float64(y[i])
		if math.Abs(float64(got[i])-want) > 2e-7*math.Max(1, math.Abs(want)) {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
	if err := k.Launch([]int{100}, []int{64}); err == nil || !strings.Contains(err.Error(), "not a multiple") {
		t.Errorf("a global size not a multiple of the local: %v", err)
	}
	if err := k.Launch([]int{1, 1, 1, 1}, nil); err == nil {
		t.Error("a launch in 4 dimensions: no error")
	}
}

func TestKernelArgs(t *testing.T) {
	d := openTest(t)
	k := build(t, d, kernels, "args")
	out := alloc[int32](t, d, 2*(4+2*3))
	must(t, out.Zero())
	must(t, k.SetBuffer(0, out))
	must(t, k.SetUint32(1, 0xFFFFFFFE))
	must(t, k.SetUint64(2, 1<<40+7))
	must(t, k.SetInt32(3, -5))
	must(t, k.SetLocal(4, 4*4))
	must(t, k.Launch([]int{4, 3}, []int{4, 1}))
	raw := make([]int32, out.Len())
	must(t, Read(out, 0, raw))
	u := func(i int) uint64 { return uint64(uint32(raw[2*i])) | uint64(uint32(raw[2*i+1]))<<32 }
	if u(0) != 0xFFFFFFFE || u(1) != 1<<40+7 || int64(u(2)) != -5 || u(3) != 1 {
		t.Errorf("arguments came through as %d %d %d %d", u(0), u(1), int64(u(2)), u(3))
	}
	for y := range 3 {
		for x := 2; x < 4; x++ { // the last of each pair written wins: x 2, 3
			if got := u(4 + y*2 + x%2); got != uint64(x+10*y) {
				t.Errorf("2-D id (%d,%d) = %d", x, y, got)
			}
		}
	}
	if err := k.SetInt32(9, 1); err == nil || !strings.Contains(err.Error(), "CL_INVALID_ARG_INDEX") {
		t.Errorf("argument 9 of 5: %v", err)
	}
}

// TestNarrowBitEqual: float64→float32 on the device gives Go's float32()
// bit for bit (round to nearest even, overflow to ±Inf, NaN kept).
func TestNarrowBitEqual(t *testing.T) {
	d := openTest(t)
	if !d.Info.FP64 {
		t.Skipf("%s has no fp64", d.Info.Name)
	}
	k := build(t, d, kernels, "narrow")
	r := rand.New(rand.NewPCG(3, 4))
	x := []float64{0, math.Copysign(0, -1), 1e-46, -1e-40, 3.4028235677973366e38, 3.4028236e38, 1e39, -1e39,
		math.Inf(1), math.Inf(-1), math.NaN(), 1 + 1.0/(1<<24), 1 + 3.0/(1<<24), 0.1}
	for len(x) < 4096 {
		x = append(x, r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)), math.Float64frombits(r.Uint64()))
	}
	bx, by := alloc[float64](t, d, len(x)), alloc[float32](t, d, len(x))
	must(t, Write(bx, 0, x))
	must(t, k.SetBuffer(0, bx))
	must(t, k.SetBuffer(1, by))
	must(t, k.Launch([]int{len(x)}, nil))
	got := make([]float32, len(x))
	must(t, Read(by, 0, got))
	for i, v := range x {
		want := float32(v)
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
			t.Fatalf("float32(%v) = %v (%#x) on the device, %v (%#x) in Go", v, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
		}
	}
}

// TestReLUKeepsNaN: the engine's ReLU form (x < 0 ? 0 : x, not fmax) lets
// a diverged step's NaN reach the loss.
func TestReLUKeepsNaN(t *testing.T) {
	d := openTest(t)
	k := build(t, d, kernels, "relu")
	x := []float32{float32(math.NaN()), -1, 2, float32(math.Inf(1)), float32(math.Inf(-1))}
	b := alloc[float32](t, d, len(x))
	must(t, Write(b, 0, x))
	must(t, k.SetBuffer(0, b))
	must(t, k.Launch([]int{len(x)}, nil))
	must(t, Read(b, 0, x))
	if !math.IsNaN(float64(x[0])) || x[1] != 0 || x[2] != 2 || !math.IsInf(float64(x[3]), 1) || x[4] != 0 {
		t.Errorf("relu gave %v; want [NaN 0 2 +Inf 0]", x)
	}
}

func TestBuildError(t *testing.T) {
	d := openTest(t)
	_, err := d.Build("__kernel void f(__global float *x) { x[0] = undeclared_y; }", "")
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "undeclared_y") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a bad source: %v; want a one-line BuildError with the compiler's message", err)
	}
	t.Log(err)
	if _, err := d.Build(kernels, "-cl-std=CL1.2 -cl-fast-relaxed-math"); err == nil || !strings.Contains(err.Error(), "-cl-fast-relaxed-math") {
		t.Errorf("-cl-fast-relaxed-math: %v; want it refused", err)
	}
	p, err := d.Build(kernels, "")
	must(t, err)
	defer p.Release()
	if _, err := p.Kernel("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("a kernel the program lacks: %v", err)
	}
}

// TestKernelsPerGoroutine: two goroutines, each with its own Kernel of one
// Program (the rule for clSetKernelArg), launch on one queue at once.
func TestKernelsPerGoroutine(t *testing.T) {
	d := openTest(t)
	p, err := d.Build(kernels, "")
	must(t, err)
	defer p.Release()
	const n = 4096
	errs := make(chan error, 2)
	for g := range 2 {
		k, err := p.Kernel("saxpy")
		must(t, err)
		defer k.Release()
		x, y := alloc[float32](t, d, n), alloc[float32](t, d, n)
		must(t, Fill(x, 0, n, float32(g+1)))
		must(t, y.Zero())
		go func() {
			errs <- func() error {
				for range 50 {
					for _, err := range [...]error{k.SetFloat32(0, 0.5), k.SetBuffer(1, x), k.SetBuffer(2, y), k.SetInt32(3, n), k.Launch([]int{n}, nil)} {
						if err != nil {
							return err
						}
					}
				}
				got := make([]float32, n)
				if err := Read(y, 0, got); err != nil {
					return err
				}
				if want := float32(25 * (g + 1)); got[0] != want || got[n-1] != want {
					return fmt.Errorf("goroutine %d: y = %v…%v, want %v", g, got[0], got[n-1], want)
				}
				return nil
			}()
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
