package ops

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
)

// newResDevKernel is a ResNet kernel made from a pool carrying the test
// device (PoCL in CI), or skips.
func newResDevKernel(t testing.TB, spec ResNetSpec) *ResNetKernel {
	t.Helper()
	return newResDevKernelOn(t, testDevice(t), spec)
}

// newResDevKernelOn is a ResNet kernel on dev, in a pool of its own.
func newResDevKernelOn(t testing.TB, dev *opencl.Device, spec ResNetSpec) *ResNetKernel {
	t.Helper()
	p := &Pool{}
	p.SetDevice(dev)
	k, err := NewResNetKernel(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// resDevSmall is small enough for PoCL on two cores and has every case of
// the network: the 7×7/2 stem, 3×3 convolutions of stride 1 and 2, the
// 1×1 projections of stride 1 and 2, maps 48 → 24 → 12 → 12 → 6 → 3 → 2.
// With a last map of 2×2 and at least two statistics images an episode,
// the instances are well conditioned: the CPU's float32 and float64
// kernels agree to 2e-5 on them (with 1×1 maps and two images a channel's
// variance can be tiny and float32 loses digits, on the CPU as well).
var resDevSmall = ResNetSpec{Channels: 3, Height: 48, Width: 48, Widths: [4]int{16, 24, 32, 48}, Out: 20}

// resDevAgree checks outputs and every gradient of a device pass against
// a CPU one within tol relative L2.
func resDevAgree(t *testing.T, what string, spec ResNetSpec, tol float64, o, oc []float64, g, gc [][]float64, x, xc []float64) {
	t.Helper()
	check := func(name string, a, b []float64) {
		if e := convRelErr(a, b); !(e <= tol) {
			t.Errorf("%s: %s differs from the CPU's by %g relative (want ≤ %g)", what, name, e, tol)
		}
	}
	check("output", o, oc)
	check("input gradient", x, xc)
	for i, ps := range spec.Params() {
		check(ps.Name, g[i], gc[i])
	}
}

// The device kernel agrees with the CPU kernel (float32 and float64) in
// every batch-norm mode and layout: forward outputs, every parameter
// gradient and the input gradient within 1e-4 relative L2.
func TestResNetDevMatchesCPU(t *testing.T) {
	k := newResDevKernel(t, resDevSmall)
	for _, c := range []struct {
		name string
		lay  BNLayout
		mode BNMode
	}{
		{"batch", BNBatch(4), BNTrain},
		{"episodes", BNLayout{Episodes: 2, Support: 3, Query: 1}, BNTrain},
		{"support statistics", BNLayout{Episodes: 1, Support: 3, Query: 2}, BNEpisode},
		{"transductive", BNLayout{Episodes: 2, Support: 2, Query: 1, Transductive: true}, BNEpisode},
		{"running", BNLayout{Episodes: 2, Support: 1, Query: 1}, BNRunning},
	} {
		p := newResProblem(resDevSmall, c.lay, 11)
		o, g, x := p.run(t, k, c.mode)
		if _, ok := k.cur.(*resDev); !ok {
			t.Fatalf("%s: a kernel of a pool with a device ran on the CPU (%T)", c.name, k.cur)
		}
		o32, g32, x32 := p.run(t, newResKernel(t, resDevSmall, false), c.mode)
		resDevAgree(t, c.name+" (float32)", resDevSmall, 1e-4, o, o32, g, g32, x, x32)
		if c.mode != BNRunning {
			continue // float64 at this size is slow; the float32 kernel is checked against it elsewhere
		}
		o64, g64, x64 := p.run(t, newResKernel(t, resDevSmall, true), c.mode)
		resDevAgree(t, c.name+" (float64)", resDevSmall, 1e-4, o, o64, g, g64, x, x64)
	}
}

// ResNet-18 itself (widths 64–512, 256 features) on a few 48×48 images,
// against the float64 kernel.
func TestResNetDevResNet18(t *testing.T) {
	s := ResNet18(3, 48, 48)
	k := newResDevKernel(t, s)
	p := newResProblem(s, BNLayout{Episodes: 1, Support: 3, Query: 1}, 12)
	o, g, x := p.run(t, k, BNTrain)
	o64, g64, x64 := p.run(t, newResKernel(t, s, true), BNTrain)
	resDevAgree(t, "ResNet-18 (float64)", s, 1e-4, o, o64, g, g64, x, x64)
}

// Folding a training pass's statistics gives the CPU's running statistics
// (within float32 tolerance), once; other modes leave them alone.
func TestResNetDevRunningStats(t *testing.T) {
	lay := BNLayout{Episodes: 2, Support: 3, Query: 1}
	p := newResProblem(resDevSmall, lay, 13)
	k := newResDevKernel(t, resDevSmall)
	kc := newResKernel(t, resDevSmall, false)
	dev, cpu := cloneStats(p.stats), cloneStats(p.stats)
	p.forward(t, k, BNEpisode)
	if err := k.FoldRunning(dev); err != nil {
		t.Fatal(err)
	}
	if !statsEqual(dev, p.stats) {
		t.Fatal("folding an episode-mode pass changed the running statistics")
	}
	p.forward(t, k, BNTrain)
	p.forward(t, kc, BNTrain)
	for range 2 {
		if err := k.FoldRunning(dev); err != nil {
			t.Fatal(err)
		}
		if err := kc.FoldRunning(cpu); err != nil {
			t.Fatal(err)
		}
	}
	for l := range dev {
		if e := convRelErr(slices.Concat(dev[l].Mean, dev[l].Var), slices.Concat(cpu[l].Mean, cpu[l].Var)); !(e <= 1e-5) {
			t.Errorf("conv %d: folded statistics differ from the CPU's by %g relative", l, e)
		}
	}
}

// A NaN in an image reaches the output as NaN where the CPU's does (a
// diverged step must stop at the loss).
func TestResNetDevNaN(t *testing.T) {
	for _, mode := range []BNMode{BNTrain, BNRunning} {
		p := newResProblem(resDevSmall, BNLayout{Episodes: 1, Support: 2, Query: 1}, 14)
		p.x[5] = math.NaN()
		got := p.forward(t, newResDevKernel(t, resDevSmall), mode)
		want := p.forward(t, newResKernel(t, resDevSmall, false), mode)
		nan := 0
		for i := range got {
			if math.IsNaN(got[i]) != math.IsNaN(want[i]) {
				t.Fatalf("%v: output %d is %g on the device, %g on the CPU", mode, i, got[i], want[i])
			}
			if math.IsNaN(got[i]) {
				nan++
			}
		}
		if nan < resDevSmall.Out {
			t.Errorf("%v: %d NaN outputs, want at least the first image's %d", mode, nan, resDevSmall.Out)
		}
	}
}

// Two runs on one device, on one kernel and on a fresh one, give equal
// bytes; a kernel follows the batch size from pass to pass.
func TestResNetDevDeterministicAndResize(t *testing.T) {
	k := newResDevKernel(t, resDevSmall)
	flat := func(o []float64, g [][]float64, x []float64) []uint64 {
		var b []uint64
		for _, v := range slices.Concat(append([][]float64{o, x}, g...)...) {
			b = append(b, math.Float64bits(v))
		}
		return b
	}
	lays := []BNLayout{BNBatch(3), {Episodes: 1, Support: 4, Query: 2}, BNBatch(3)}
	var first []uint64
	for i, lay := range lays {
		p := newResProblem(resDevSmall, lay, 15)
		o, g, x := p.run(t, k, BNTrain)
		oc, gc, xc := p.run(t, newResKernel(t, resDevSmall, false), BNTrain)
		resDevAgree(t, "batch "+string(rune('0'+lay.Images())), resDevSmall, 1e-4, o, oc, g, gc, x, xc)
		if i == 0 {
			first = flat(o, g, x)
		}
		if i == 2 && !slices.Equal(first, flat(o, g, x)) {
			t.Error("the same batch after another size gives other bytes")
		}
	}
	p := newResProblem(resDevSmall, lays[0], 15)
	if !slices.Equal(first, flat(p.run(t, newResDevKernel(t, resDevSmall), BNTrain))) {
		t.Error("a fresh kernel gives other bytes")
	}
}

// UseFloat64 keeps a kernel on the CPU whatever its pool's device (the
// finite-difference checks need float64).
func TestResNetDevFloat64StaysOnCPU(t *testing.T) {
	k := newResDevKernel(t, resTiny)
	k.UseFloat64()
	newResProblem(resTiny, BNBatch(2), 16).forward(t, k, BNTrain)
	if _, ok := k.cur.(*resCore[float64]); !ok {
		t.Fatalf("UseFloat64 with a device ran %T", k.cur)
	}
}

// Two kernels of one pool run at once on its device (the staged step runs
// two task ranges at once) and give the bytes each gives alone.
func TestResNetDevTwoAtOnce(t *testing.T) {
	dev := testDevice(t)
	pool := &Pool{}
	pool.SetDevice(dev)
	var ks [2]*ResNetKernel
	var ps [2]*resProblem
	var alone [2][]float64
	for i := range ks {
		var err error
		if ks[i], err = NewResNetKernel(pool, resDevSmall); err != nil {
			t.Fatal(err)
		}
		ps[i] = newResProblem(resDevSmall, BNLayout{Episodes: 1, Support: 3, Query: 1 + i}, uint64(17+i))
		o, g, x := ps[i].run(t, ks[i], BNTrain)
		alone[i] = slices.Concat(append([][]float64{o, x}, g...)...)
	}
	var together [2][]float64
	errs := make(chan error, 2)
	for i := range ks {
		go func() {
			p, k := ps[i], ks[i]
			out := make([]float64, p.lay.Images()*resDevSmall.OutDim())
			if err := k.Forward(p.x, p.params, p.lay, BNTrain, nil, out); err != nil {
				errs <- err
				return
			}
			var grads [][]float64
			for _, ps := range p.params {
				grads = append(grads, make([]float64, len(ps)))
			}
			gx := make([]float64, len(p.x))
			if err := k.Backward(p.r, grads, gx); err != nil {
				errs <- err
				return
			}
			together[i] = slices.Concat(append([][]float64{out, gx}, grads...)...)
			errs <- nil
		}()
	}
	for range ks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range ks {
		if !slices.Equal(alone[i], together[i]) {
			t.Errorf("kernel %d gives other values when another runs at once", i)
		}
	}
}

// Weight gradients summed over row blocks (a batched product and the
// blocks' sum, as deep batches use) agree with the CPU's too.
func TestResNetDevWeightBlocks(t *testing.T) {
	k := newResDevKernel(t, resDevSmall)
	p := newResProblem(resDevSmall, BNLayout{Episodes: 2, Support: 3, Query: 1}, 18)
	p.forward(t, k, BNTrain)
	// Stem 576 rows an image: blocks of 500 leave a remainder; the last
	// stage (4 rows an image) stays one product.
	k.cdev.wRows = 500
	o, g, x := p.run(t, k, BNTrain)
	oc, gc, xc := p.run(t, newResKernel(t, resDevSmall, false), BNTrain)
	resDevAgree(t, "row blocks", resDevSmall, 1e-4, o, oc, g, gc, x, xc)
	if k.cdev.part == nil {
		t.Error("no weight gradient was summed over row blocks")
	}
}

// A device failure comes back from Forward as an error, after which
// Backward refuses; a batch whose buffers the kernels cannot index is
// refused with one line before anything is allocated.
func TestResNetDevErrors(t *testing.T) {
	k := newResDevKernel(t, resDevSmall)
	p := newResProblem(resDevSmall, BNBatch(2), 19)
	p.run(t, k, BNTrain)
	k.cdev.kn.sums.Release() // the next launch fails with CL_INVALID_KERNEL
	out := make([]float64, 2*resDevSmall.OutDim())
	if err := k.Forward(p.x, p.params, p.lay, BNTrain, nil, out); err == nil {
		t.Fatal("Forward with a released kernel: no error")
	}
	grads := make([][]float64, len(p.params))
	for i := range grads {
		grads[i] = make([]float64, len(p.params[i]))
	}
	if err := k.Backward(p.r, grads, nil); err == nil {
		t.Error("Backward after a failed Forward: no error")
	}

	d, err := newResDev(k.dev, ResNet18(3, 84, 84))
	if err != nil {
		t.Fatal(err)
	}
	// 84×84: the stem's im2col holds 1764·147 values an image.
	err = d.resize(9000)
	if err == nil || !strings.Contains(err.Error(), "use smaller batches") {
		t.Fatalf("9000 images of 84×84: %v, want a refusal", err)
	}
	if err := d.resize(2); err != nil {
		t.Fatalf("2 images after a refused batch: %v", err)
	}
}

// The weights on the device are Go's float32() of the parameters, bit for
// bit, in the im2col layout (row tap·In + c, column f).
func TestResNetDevWeightsBitEqual(t *testing.T) {
	k := newResDevKernel(t, resDevSmall)
	p := newResProblem(resDevSmall, BNBatch(2), 20)
	p.forward(t, k, BNTrain)
	d := k.cdev
	got := make([]float32, d.wLen)
	if err := opencl.Read(d.w, 0, got); err != nil {
		t.Fatal(err)
	}
	for l, cv := range d.cv {
		kk2 := cv.K * cv.K
		for f := range cv.Out {
			for c := range cv.In {
				for tap := range kk2 {
					v := p.params[3*l][f*cv.kk+c*kk2+tap]
					g := got[d.wOff[l]+(tap*cv.In+c)*cv.Out+f]
					if math.Float32bits(g) != math.Float32bits(float32(v)) {
						t.Fatalf("%s: weight [%d][%d] is %v on the device, want float32(%v) = %v", cv.Name, f, c*kk2+tap, g, v, float32(v))
					}
				}
			}
		}
	}
}
