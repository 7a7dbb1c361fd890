package ops

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
	"github.com/mkbench/mkbench/internal/opencl"
)

// newConvDevKernel is a kernel whose pool has dev.
func newConvDevKernel(t testing.TB, dev *opencl.Device, spec ConvSpec) *ConvKernel {
	t.Helper()
	p := &Pool{}
	p.SetDevice(dev)
	k, err := NewConvKernel(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// convDevSpecs are the device tests' networks: one block, Conv-4 on
// Omniglot, a small Conv-5 on miniImageNet-sized images (floor pooling:
// 84→42→21→10→5→2), and odd maps whose pooling cuts windows (SAME: 7×7 →
// 4×4) or drops cells (floor: 5×5 → 2×2).
var convDevSpecs = []struct {
	name string
	spec ConvSpec
	N    int
}{
	{"block", ConvSpec{Channels: 3, Height: 10, Width: 12, Blocks: 1, Filters: 16, Keep: 0.7}, 5},
	{"conv4-omniglot", ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}, 6},
	{"conv5-mini", ConvSpec{Channels: 3, Height: 84, Width: 84, Blocks: 5, Filters: 64, Keep: 0.5, FloorPool: true}, 2},
	{"odd-7x7", ConvSpec{Channels: 2, Height: 7, Width: 7, Blocks: 3, Filters: 8, Keep: 0.6}, 4},
	{"floor-5x5", ConvSpec{Channels: 2, Height: 5, Width: 5, Blocks: 2, Filters: 8, Keep: 0.8, FloorPool: true}, 4},
	{"odd-rect", ConvSpec{Channels: 3, Height: 9, Width: 6, Blocks: 2, Filters: 5, Keep: 0.7}, 3},
}

// convDevCompare checks that two runs' outputs and every block's weight
// and bias gradients agree within tol relative L2.
func convDevCompare(t *testing.T, what string, tol float64, out, gws, gbs []([]float64), wout, wgws, wgbs []([]float64)) {
	t.Helper()
	worst := 0.0
	check := func(e float64, format string, args ...any) {
		worst = max(worst, e)
		if !(e <= tol) {
			t.Errorf("%s: "+format+" differs by %.3g relative L2", append(append([]any{what}, args...), e)...)
		}
	}
	for i := range out {
		check(convRelErr(out[i], wout[i]), "output")
	}
	for l := range gws {
		check(convRelErr(gws[l], wgws[l]), "block %d weight gradient", l)
		check(convRelErr(gbs[l], wgbs[l]), "block %d bias gradient", l)
	}
	t.Logf("%s: largest relative L2 difference %.2g", what, worst)
}

// TestConvDevMatchesCPU: the device's outputs and gradients agree with the
// CPU's float32 kernel and with its float64 one within 1e-5, in evaluation
// and in training (dropout with the CPU's masks: any mask that differed
// would move a whole activation).
func TestConvDevMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	for _, c := range convDevSpecs {
		p := newConvProblem(c.spec, c.N, 3)
		kd := newConvDevKernel(t, dev, c.spec)
		k32 := newConvKernelPrec(t, c.spec, false)
		k64 := newConvKernelPrec(t, c.spec, true)
		for _, train := range []bool{false, true} {
			out, gws, gbs := p.run(t, kd, 5, train)
			if _, ok := kd.cur.(*convDev); !ok {
				t.Fatalf("%s: a pool with a device ran %T", c.name, kd.cur)
			}
			for _, ref := range []struct {
				name string
				k    *ConvKernel
			}{{"float32", k32}, {"float64", k64}} {
				wout, wgws, wgbs := ref.k.run(t, p, 5, train)
				convDevCompare(t, c.name+" train="+map[bool]string{false: "no", true: "yes"}[train]+" vs CPU "+ref.name, 1e-5,
					[][]float64{out}, gws, gbs, [][]float64{wout}, wgws, wgbs)
			}
		}
	}
}

// run is convProblem.run with the receiver first, for tables of kernels.
func (k *ConvKernel) run(t *testing.T, p *convProblem, seed uint64, train bool) ([]float64, [][]float64, [][]float64) {
	return p.run(t, k, seed, train)
}

// TestConvDevMasks: the device's dropout masks are the CPU's, bit for bit:
// convMaskKey's stream for every image, block, op stream and seed, read
// from the buffer the forward pass pools with.
func TestConvDevMasks(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 9, Width: 7, Blocks: 3, Filters: 5, Keep: 0.5}
	k := newConvDevKernel(t, dev, spec)
	const N = 20 // 8 chunks: groups of 2 and 3 images
	p := newConvProblem(spec, N, 1)
	p.forward(t, k, 1, true)
	d := k.dev
	for _, keep := range []float64{0.9, 0.5, 0.123} {
		for _, stream := range []uint64{0, 3} {
			for _, seed := range []uint64{0, 7, math.MaxUint64} {
				d.setStep(seed, stream, true, keep)
				for l, ly := range d.ls {
					n := ly.po * 4 * spec.Filters
					// A group's worth of images at a time, as the pass draws them.
					for g0 := 0; g0 < N; g0 += d.group[l] {
						ng := min(d.group[l], N-g0)
						if err := d.masks(l, g0, ng); err != nil {
							t.Fatal(err)
						}
						got := make([]uint8, ng*n)
						if err := opencl.Read(d.r.drop, 0, got); err != nil {
							t.Fatal(err)
						}
						want := make([]float32, n)
						for b := range ng {
							sgemm.BernoulliMask(want, convMaskKey(seed, stream, g0+b, l), d.thr)
							for i, m := range want {
								if float32(got[b*n+i]) != m {
									t.Fatalf("keep %g stream %d seed %d block %d image %d: mask[%d] = %d, the CPU's %g", keep, stream, seed, l, g0+b, i, got[b*n+i], m)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestConvDevNaN: a NaN pixel makes its image's features NaN (the ReLU
// keeps it, the pooling lets it win) in evaluation and training, and
// leaves the other images' features as they were.
func TestConvDevNaN(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.9}
	for _, train := range []bool{false, true} {
		p := newConvProblem(spec, 3, 7)
		k := newConvDevKernel(t, dev, spec)
		clean := p.forward(t, k, 1, train)
		p.x[spec.InDim()+14*28+14] = math.NaN()
		out := p.forward(t, k, 1, train)
		d := spec.OutDim()
		if !slices.Equal(out[:d], clean[:d]) || !slices.Equal(out[2*d:], clean[2*d:]) {
			t.Errorf("train=%v: a NaN in image 1 changed other images", train)
		}
		if !slices.ContainsFunc(out[d:2*d], math.IsNaN) {
			t.Errorf("train=%v: a NaN pixel left the features finite", train)
		}
	}
}

// TestConvDevDeterministic: two passes on one device, by one kernel or by
// two, give equal bytes; so do two kernels running at once on one device
// (the staged step), each with its own kernel objects.
func TestConvDevDeterministic(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 32, Keep: 0.8}
	p := newConvProblem(spec, 9, 2)
	ka, kb := newConvDevKernel(t, dev, spec), newConvDevKernel(t, dev, spec)
	type result struct{ out, gws, gbs [][]float64 }
	runOn := func(k *ConvKernel, seed uint64) result {
		out, gws, gbs := p.run(t, k, seed, true)
		return result{[][]float64{out}, gws, gbs}
	}
	equal := func(a, b result) bool {
		for _, pair := range [][2][][]float64{{a.out, b.out}, {a.gws, b.gws}, {a.gbs, b.gbs}} {
			for i := range pair[0] {
				if !slices.Equal(pair[0][i], pair[1][i]) {
					return false
				}
			}
		}
		return true
	}
	first := runOn(ka, 4)
	if again := runOn(ka, 4); !equal(first, again) {
		t.Error("a second pass of one kernel gave other bytes")
	}
	if other := runOn(kb, 4); !equal(first, other) {
		t.Error("a second kernel gave other bytes")
	}
	// At once: kb runs another seed, so a mix-up of the two shows.
	want := runOn(kb, 5)
	var wg sync.WaitGroup
	var ra, rb result
	var ea, eb []float64
	wg.Add(2)
	run2 := func(k *ConvKernel, seed uint64, r *result, errs *[]float64) {
		defer wg.Done()
		out := make([]float64, p.N*spec.OutDim())
		gws, gbs := make([][]float64, spec.Blocks), make([][]float64, spec.Blocks)
		for l := range gws {
			gws[l], gbs[l] = make([]float64, len(p.ws[l])), make([]float64, len(p.bs[l]))
		}
		for range 3 {
			if err := k.Forward(p.N, p.x, p.ws, p.bs, seed, true, out); err != nil {
				*errs = append(*errs, 1)
				return
			}
			if err := k.Backward(p.r, gws, gbs); err != nil {
				*errs = append(*errs, 2)
				return
			}
		}
		*r = result{[][]float64{out}, gws, gbs}
	}
	go run2(ka, 4, &ra, &ea)
	go run2(kb, 5, &rb, &eb)
	wg.Wait()
	if len(ea)+len(eb) > 0 {
		t.Fatalf("concurrent passes failed: %v %v", ea, eb)
	}
	if !equal(ra, first) || !equal(rb, want) {
		t.Error("two kernels running at once on one device gave other bytes")
	}
}

// TestConvDevBatchSizes: passes of changing sizes (smaller, then larger
// than the first) agree with the CPU, reusing or growing the buffers.
func TestConvDevBatchSizes(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.7}
	kd := newConvDevKernel(t, dev, spec)
	k32 := newConvKernelPrec(t, spec, false)
	for _, N := range []int{5, 2, 11, 1} {
		p := newConvProblem(spec, N, uint64(N))
		out, gws, gbs := p.run(t, kd, 3, true)
		wout, wgws, wgbs := p.run(t, k32, 3, true)
		convDevCompare(t, fmt.Sprintf("N=%d", N), 1e-5, [][]float64{out}, gws, gbs, [][]float64{wout}, wgws, wgbs)
	}
}

// TestConvDevChoice: a device runs only the kernels that are free to run
// there: float64 and a forced path stay on the CPU, with the CPU's bytes.
func TestConvDevChoice(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 12, Width: 12, Blocks: 2, Filters: 8, Keep: 0.8}
	p := newConvProblem(spec, 3, 9)
	k64 := newConvDevKernel(t, dev, spec)
	k64.UseFloat64()
	kim := newConvDevKernel(t, dev, spec)
	kim.path = convPathIm2col
	for _, c := range []struct {
		k    *ConvKernel
		want *ConvKernel
	}{{k64, newConvKernelPrec(t, spec, true)}, {kim, newConvKernelPath(t, spec, false, convPathIm2col)}} {
		got, want := p.forward(t, c.k, 1, true), p.forward(t, c.want, 1, true)
		if _, dev := c.k.cur.(*convDev); dev || !slices.Equal(got, want) {
			t.Errorf("f64=%v path=%d: ran %T, equal to the CPU's bytes: %v", c.k.f64, c.k.path, c.k.cur, slices.Equal(got, want))
		}
	}
}

// TestConvDevErrors: a device failure is an error from Forward (here an
// allocation past the device's limit), after which Backward refuses; the
// kernel works again once the device can hold its buffers.
func TestConvDevErrors(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.7}
	p := newConvProblem(spec, 4, 1)
	k := newConvDevKernel(t, dev, spec)
	if _, _, err := p.runErr(k); err != nil {
		t.Fatal(err)
	}
	limit := dev.Info.MaxAlloc
	dev.Info.MaxAlloc = 1024
	big := newConvProblem(spec, 40, 1)
	_, _, err := big.runErr(k)
	dev.Info.MaxAlloc = limit
	if err == nil || !strings.Contains(err.Error(), "largest allocation") {
		t.Fatalf("a pass past the device's allocation limit: %v", err)
	}
	if err := k.Backward(p.r, make([][]float64, 0), nil); err != errConvNoForward {
		t.Errorf("Backward after a failed Forward: %v, want %v", err, errConvNoForward)
	}
	out, gws, gbs := big.run(t, k, 2, true)
	wout, wgws, wgbs := big.run(t, newConvKernelPrec(t, spec, false), 2, true)
	convDevCompare(t, "after the failure", 1e-5, [][]float64{out}, gws, gbs, [][]float64{wout}, wgws, wgbs)
}

// runErr is run returning Forward's error instead of failing the test.
func (p *convProblem) runErr(k *ConvKernel) ([]float64, [][]float64, error) {
	out := make([]float64, p.N*p.spec.OutDim())
	err := k.Forward(p.N, p.x, p.ws, p.bs, 1, true, out)
	return out, nil, err
}

// TestConvDevGraph: the gorgonia op runs on its pool's device unchanged:
// through a tape machine, two training steps give the CPU kernel's output
// and gradients within 1e-5.
func TestConvDevGraph(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.9}
	p := newConvProblem(spec, 5, 9)
	cg := newConvGraph(t, p)
	cg.op.kern.device = dev // as if the net's pool had had it
	vm := cg.machine()
	defer vm.Close()
	for step, seed := range []uint64{5, 6} {
		vm.Reset()
		cg.net.SetStep(seed, true)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		if _, ok := cg.op.kern.cur.(*convDev); !ok {
			t.Fatalf("the op of a pool with a device ran %T", cg.op.kern.cur)
		}
		gs := cg.grads(t)
		out, gws, gbs := p.run(t, newConvKernelPrec(t, spec, false), seed, true)
		convDevCompare(t, fmt.Sprintf("step %d", step), 1e-5, [][]float64{cg.out.Value().Data().([]float64)}, gs[:spec.Blocks], gs[spec.Blocks:],
			[][]float64{out}, gws, gbs)
	}
}

// TestConvDevUploads: what goes up is the CPU's float32, bit for bit: the
// images as float32() converts them, and every block's packed weights,
// bias row and rotated filters as the CPU's im2col path holds them.
func TestConvDevUploads(t *testing.T) {
	dev := testDevice(t)
	spec := ConvSpec{Channels: 3, Height: 9, Width: 7, Blocks: 3, Filters: 6, Keep: 0.8}
	p := newConvProblem(spec, 3, 4)
	p.x[5], p.ws[1][7] = 1.0000000596046448, 0.1+1e-12 // values that round
	kd := newConvDevKernel(t, dev, spec)
	kc := newConvKernelPath(t, spec, false, convPathIm2col)
	p.forward(t, kd, 1, true)
	p.forward(t, kc, 1, true)
	d := kd.dev
	x := make([]float32, len(p.x))
	if err := opencl.Read(d.r.act, 0, x); err != nil {
		t.Fatal(err)
	}
	for i, v := range p.x {
		if math.Float32bits(x[i]) != math.Float32bits(float32(v)) {
			t.Fatalf("image value %d went up as %v, want float32(%v) = %v", i, x[i], v, float32(v))
		}
	}
	w := make([]float32, d.wLen)
	if err := opencl.Read(d.r.w, 0, w); err != nil {
		t.Fatal(err)
	}
	for l, ly := range d.ls {
		want := kc.c32.wt[l]
		if l > 0 {
			want = append(slices.Clone(want), kc.c32.wrot[l]...)
		}
		got := w[d.wOff[l]:][:len(want)]
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("block %d (cin %d): weight value %d went up as %v, the CPU holds %v", l, ly.cin, i, got[i], want[i])
			}
		}
	}
}
