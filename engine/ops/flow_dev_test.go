package ops

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// newFlowDevKernel is a kernel whose pool has dev.
func newFlowDevKernel(t testing.TB, dev *opencl.Device, spec FlowSpec) *FlowKernel {
	t.Helper()
	p := &Pool{}
	p.SetDevice(dev)
	k, err := NewFlowKernel(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// flowOmniglotSpec is the flow of engine's omniglotLikeConfig (the
// omniglot-5w1s preset): ω of Conv-4's 2·2·64 features, the BiLSTM
// context's 3·256, hidden width 128, four layers; 6 tasks of 780 bases.
var flowOmniglotSpec = FlowSpec{Layers: 4, Dim: 256, Cond: 768, Hidden: 128}

const flowOmniglotT, flowOmniglotD = 6, 780

// flowDevCases are the device tests' flows: the small odd and even ones
// (odd dimensions, one task), the sine preset's size and the Omniglot
// step's (with fewer bases under -short).
func flowDevCases() []struct {
	name string
	spec FlowSpec
	T, D int
} {
	omniD := flowOmniglotD
	if testing.Short() {
		omniD = 130 // a sixth of the bases: the float64 reference dominates
	}
	cases := append([]struct {
		name string
		spec FlowSpec
		T, D int
	}{}, flowSmallSpecs...)
	return append(cases, []struct {
		name string
		spec FlowSpec
		T, D int
	}{
		{"sine", FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}, 25, 128},
		{"omniglot", flowOmniglotSpec, flowOmniglotT, omniD},
	}...)
}

// flowDevSteps is ω after every step of tasks 0 and T-1.
func flowDevSteps(k *FlowKernel, T int) [][]float64 {
	var all [][]float64
	for _, t := range []int{0, T - 1} {
		all = append(all, k.Steps(t)...)
	}
	return all
}

// TestFlowDevMatchesCPU: the device's outputs (ω_K and the log-dets), ω
// after each step and every gradient (ω₀, the context, the parameters)
// agree with the CPU's float32 kernel and with its float64 one within 1e-5
// relative L2, at initialization and with trained-like parameters that
// drive every path.
func TestFlowDevMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	for _, c := range flowDevCases() {
		scales := []float64{0, 0.05}
		if c.name == "omniglot" {
			scales = scales[1:] // trained-like drives every path; the float64 reference takes seconds
		}
		for _, scale := range scales {
			name := fmt.Sprintf("%s/scale=%g", c.name, scale)
			p := newFlowProblem(c.spec, c.T, c.D, scale, 41)
			kd := newFlowDevKernel(t, dev, c.spec)
			rd := p.run(t, kd)
			if _, ok := kd.cur.(*flowDev); !ok {
				t.Fatalf("%s: a pool with a device ran %T", name, kd.cur)
			}
			sd := flowDevSteps(kd, c.T)
			worst := 0.0
			for _, f64 := range []bool{false, true} {
				kc := newFlowKernelPrec(t, c.spec, f64)
				rc := p.run(t, kc)
				sc := flowDevSteps(kc, c.T)
				check := func(e float64, what string) {
					worst = max(worst, e)
					if !(e <= 1e-5) {
						t.Errorf("%s: %s differs from the CPU's %s by %.3g relative L2", name, what, flowPrecName(f64), e)
					}
				}
				for i, what := range []string{"output", "ω₀ gradient", "context gradient", "theta gradient"} {
					check(flowRelErr(rd[i], rc[i]), what)
				}
				if len(sd) != len(sc) {
					t.Fatalf("%s: %d steps on the device, %d on the CPU", name, len(sd), len(sc))
				}
				for i := range sd {
					check(flowRelErr(sd[i], sc[i]), fmt.Sprintf("ω of step %d", i%(c.spec.Layers+1)))
				}
			}
			t.Logf("%s: largest relative L2 difference %.2g", name, worst)
		}
	}
}

// flowRunDiffers is the first result whose bytes differ between a and b,
// or -1.
func flowRunDiffers(a, b flowRun) int {
	for j := range a {
		if !slices.Equal(a[j], b[j]) {
			return j
		}
	}
	return -1
}

// TestFlowDevDeterministic: two passes of one kernel, and a pass of a
// second kernel on the same device, give the same bytes.
func TestFlowDevDeterministic(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	p := newFlowProblem(spec, 7, 96, 0.05, 42)
	k := newFlowDevKernel(t, dev, spec)
	first := p.run(t, k)
	for i, again := range []flowRun{p.run(t, k), p.run(t, newFlowDevKernel(t, dev, spec))} {
		if j := flowRunDiffers(again, first); j >= 0 {
			t.Errorf("run %d: result %d differs from the first run's bytes", i+2, j)
		}
	}
}

// TestFlowDevNaN: a NaN in one task's ω₀ makes that task's output NaN and
// leaves the other tasks' bytes alone, the parameter gradient turns NaN (a
// diverged step must reach the trainer's check), and the next clean pass
// gives the clean bytes again (no NaN stays behind in a buffer).
func TestFlowDevNaN(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 2, Dim: 6, Cond: 3, Hidden: 16}
	p := newFlowProblem(spec, 3, 16, 0.5, 43)
	k := newFlowDevKernel(t, dev, spec)
	clean := p.run(t, k)
	saved := p.omega0[len(p.omega0)/2]
	p.omega0[len(p.omega0)/2] = math.NaN() // task 1
	bad := p.run(t, k)
	out, n := bad[0], len(bad[0])/3
	if !slices.Equal(out[:n], clean[0][:n]) || !slices.Equal(out[2*n:], clean[0][2*n:]) {
		t.Error("a NaN in task 1 changed other tasks' outputs")
	}
	if !slices.ContainsFunc(out[n:2*n], math.IsNaN) {
		t.Error("a NaN in ω₀ left the task's output finite")
	}
	if !slices.ContainsFunc(bad[3], math.IsNaN) {
		t.Error("a NaN in ω₀ left the parameter gradient finite")
	}
	p.omega0[len(p.omega0)/2] = saved
	if j := flowRunDiffers(p.run(t, k), clean); j >= 0 {
		t.Errorf("after a NaN pass, result %d of a clean pass differs from the clean bytes", j)
	}
}

// TestFlowDevConcurrent: two kernels on one device run at once (the staged
// step does) and each gives the bytes it gives alone.
func TestFlowDevConcurrent(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 64}
	ps := []*flowProblem{newFlowProblem(spec, 5, 64, 0.05, 44), newFlowProblem(spec, 3, 80, 0.05, 45)}
	ks := []*FlowKernel{newFlowDevKernel(t, dev, spec), newFlowDevKernel(t, dev, spec)}
	want := []flowRun{ps[0].run(t, ks[0]), ps[1].run(t, ks[1])}
	got := make([][]flowRun, 2)
	var wg sync.WaitGroup
	for i := range ks {
		wg.Go(func() {
			for range 4 {
				got[i] = append(got[i], ps[i].run(t, ks[i]))
			}
		})
	}
	wg.Wait()
	for i := range got {
		for r, run := range got[i] {
			if j := flowRunDiffers(run, want[i]); j >= 0 {
				t.Errorf("kernel %d, concurrent run %d: result %d differs from its run alone", i, r, j)
			}
		}
	}
}

// TestFlowDevResize: passes of other sizes on one kernel (growing,
// shrinking, back) give the bytes a fresh kernel gives at that size.
func TestFlowDevResize(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 3, Dim: 9, Cond: 5, Hidden: 24}
	k := newFlowDevKernel(t, dev, spec)
	for i, sz := range [][2]int{{3, 16}, {6, 40}, {1, 7}, {4, 40}, {6, 40}} {
		p := newFlowProblem(spec, sz[0], sz[1], 0.1, uint64(50+i))
		got := p.run(t, k)
		if j := flowRunDiffers(got, p.run(t, newFlowDevKernel(t, dev, spec))); j >= 0 {
			t.Errorf("pass %d (T=%d, D=%d): result %d differs from a fresh kernel's", i, sz[0], sz[1], j)
		}
		if e := flowRelErr(got[0], p.run(t, newFlowKernelPrec(t, spec, true))[0]); !(e <= 1e-5) {
			t.Errorf("pass %d (T=%d, D=%d): output differs from the CPU's float64 by %.3g", i, sz[0], sz[1], e)
		}
	}
}

// TestFlowDevGraph: the gorgonia op runs its kernel's device core through
// the graph's forward and three gradient nodes, with the bytes of the
// kernel called directly.
func TestFlowDevGraph(t *testing.T) {
	dev := testDevice(t)
	c := flowSmallSpecs[0]
	p := newFlowProblem(c.spec, c.T, c.D, 0.5, 48)
	want := p.run(t, newFlowDevKernel(t, dev, c.spec))
	fg := newFlowGraph(t, p)
	fg.op.kern = newFlowDevKernel(t, dev, c.spec)
	vm := fg.machine()
	defer vm.Close()
	for pass := range 2 {
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		if _, ok := fg.op.kern.cur.(*flowDev); !ok {
			t.Fatalf("the op ran %T", fg.op.kern.cur)
		}
		gs := fg.grads(t)
		got := flowRun{fg.out.Value().Data().([]float64), gs[0], gs[1], gs[2]}
		if j := flowRunDiffers(got, want); j >= 0 {
			t.Errorf("pass %d: result %d of the graph differs from the kernel's", pass, j)
		}
		// Zero the accumulated gradients, as a solver step would.
		for _, n := range []*gorgonia.Node{fg.omega0, fg.cond, fg.theta} {
			g, _ := n.Grad()
			g.(*tensor.Dense).Zero()
		}
		vm.Reset()
	}
}

// TestFlowDeviceBytes: FlowDeviceBytes is what a kernel holds on the
// device after passes whose largest was of T tasks of D samples (smaller
// passes reuse the buffers).
func TestFlowDeviceBytes(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 3, Dim: 9, Cond: 5, Hidden: 24}
	k := newFlowDevKernel(t, dev, spec)
	for _, sz := range [][2]int{{2, 8}, {6, 40}, {1, 7}} {
		newFlowProblem(spec, sz[0], sz[1], 0.1, 49).run(t, k)
	}
	fixed, pass := k.dev.r.fixed(), k.dev.r.pass()
	held := 0
	for _, b := range append(fixed[:], pass[:]...) {
		held += 4 * (*b).Len()
	}
	if want := FlowDeviceBytes(spec, 6, 40); float64(held) != want {
		t.Errorf("the kernel holds %d bytes on the device, FlowDeviceBytes says %.0f", held, want)
	}
	t.Logf("Omniglot step's flow (6 tasks of 780 bases): %.1f MB on the device", FlowDeviceBytes(flowOmniglotSpec, flowOmniglotT, flowOmniglotD)/1e6)
}

// TestFlowDevFloat64StaysOnCPU: a test's UseFloat64 runs the CPU's float64
// core even when the pool has a device.
func TestFlowDevFloat64StaysOnCPU(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 1, Dim: 4, Cond: 2, Hidden: 8}
	k := newFlowDevKernel(t, dev, spec)
	k.UseFloat64()
	newFlowProblem(spec, 2, 4, 0.5, 46).run(t, k)
	if _, ok := k.cur.(*flowCore[float64]); !ok {
		t.Fatalf("UseFloat64 on a device pool ran %T", k.cur)
	}
}

// TestFlowDevErrors: a failing device call is an error from the pass that
// made it, never a panic, and a failed Forward leaves nothing to
// differentiate. A released buffer stands in for a device that fails.
func TestFlowDevErrors(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 2, Dim: 6, Cond: 3, Hidden: 8}
	p := newFlowProblem(spec, 2, 8, 0.5, 47)
	out := make([]float64, len(p.r))
	g := flowRun{nil, make([]float64, len(p.omega0)), make([]float64, len(p.cond)), make([]float64, len(p.theta))}
	for _, c := range []struct {
		stage   string
		release func(r *flowDevRes)
		forward bool // the Forward fails
	}{
		{"forward", func(r *flowDevRes) { r.rows.Release() }, true},
		{"backward", func(r *flowDevRes) { r.rows.Release() }, false},
		{"context gradient", func(r *flowDevRes) { r.gcond.Release() }, false},
	} {
		k := newFlowDevKernel(t, dev, spec)
		p.run(t, k)
		if c.forward {
			c.release(k.dev.r)
		}
		err := k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, out)
		if c.forward {
			if err == nil || !strings.Contains(err.Error(), "released") {
				t.Errorf("%s: Forward on a failing device returned %v, want the device's error", c.stage, err)
			}
			if err := k.Backward(p.r, g[1], g[2], g[3]); err == nil || !strings.Contains(err.Error(), "before Forward") {
				t.Errorf("%s: Backward after a failed Forward returned %v, want a refusal", c.stage, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.stage, err)
		}
		c.release(k.dev.r)
		if err := k.Backward(p.r, g[1], g[2], g[3]); err == nil || !strings.Contains(err.Error(), "released") && !strings.Contains(err.Error(), "live float32 buffers") {
			t.Errorf("%s: Backward on a failing device returned %v, want the device's error", c.stage, err)
		}
	}
}

// BenchmarkCouplingFlowOmniglotDevice is BenchmarkCouplingFlowOmniglot on
// the first OpenCL device (on PoCL: the path's overhead, not a GPU's
// speed).
func BenchmarkCouplingFlowOmniglotDevice(b *testing.B) {
	dev := testDevice(b)
	benchFlowPass(b, newFlowDevKernel(b, dev, flowOmniglotSpec), newFlowProblem(flowOmniglotSpec, flowOmniglotT, flowOmniglotD, 0, 10))
}

// flowEvalGraph is a graph of one flow op on pool that takes no gradient
// (an evaluation or display graph): its Forward gives the arena's slot
// back.
func flowEvalGraph(t testing.TB, pool *Pool, p *flowProblem) (gorgonia.VM, *FlowOp) {
	t.Helper()
	s := p.spec
	g := gorgonia.NewGraph()
	omega0 := gorgonia.NewTensor(g, gorgonia.Float64, 3, gorgonia.WithShape(p.T, p.D, s.Dim), gorgonia.WithName("omega0"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(p.T, p.D, s.Dim), tensor.WithBacking(slices.Clone(p.omega0)))))
	cond := gorgonia.NewMatrix(g, gorgonia.Float64, gorgonia.WithShape(p.T, s.Cond), gorgonia.WithName("cond"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(p.T, s.Cond), tensor.WithBacking(slices.Clone(p.cond)))))
	theta := gorgonia.NewVector(g, gorgonia.Float64, gorgonia.WithShape(s.NumParams()), gorgonia.WithName("theta"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(s.NumParams()), tensor.WithBacking(slices.Clone(p.theta)))))
	_, op, err := CouplingFlow(pool, omega0, cond, theta, s)
	if err != nil {
		t.Fatal(err)
	}
	return gorgonia.NewTapeMachine(g), op
}

// Varying episode shapes, each with a new training kernel and a new
// evaluation graph (the engine builds graphs per shape), lease the flows'
// buffers from the pool's arena: once the largest shape has run, no
// episode allocates on the device, and the device holds about what the
// largest pass needs (a training pass and an evaluation pass: two slots at
// most), not a set per kernel.
func TestFlowDevArenaVaryingShapes(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 3, Dim: 9, Cond: 5, Hidden: 24}
	pool := &Pool{}
	pool.SetDevice(dev)
	base := dev.MemStats()
	shapes := [][2]int{{6, 40}, {3, 16}, {6, 33}, {1, 7}, {4, 40}, {5, 12}, {6, 40}, {2, 39}}
	var allocs []int64
	var keep []*FlowKernel // the kernels stay alive: collection is not what frees their memory
	for i, sz := range shapes {
		p := newFlowProblem(spec, sz[0], sz[1], 0.1, uint64(60+i))
		k, err := NewFlowKernel(pool, spec)
		if err != nil {
			t.Fatal(err)
		}
		p.run(t, k)
		vm, op := flowEvalGraph(t, pool, p)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		if st := op.Steps(0); len(st) != spec.Layers+1 {
			t.Fatalf("episode %d: Steps after an evaluation gave %d steps", i, len(st))
		}
		vm.Close()
		keep = append(keep, k, op.Kernel())
		allocs = append(allocs, dev.MemStats().Allocs-base.Allocs)
	}
	live := dev.MemStats().Live - base.Live
	for i := 1; i < len(allocs); i++ {
		if allocs[i] != allocs[i-1] {
			t.Errorf("episode %d (T=%d, D=%d, no larger than the first) made %d device buffers", i, shapes[i][0], shapes[i][1], allocs[i]-allocs[i-1])
		}
	}
	if most := 2 * FlowDeviceBytes(spec, 6, 40); float64(live) > most {
		t.Errorf("%d kernels hold %d bytes on the device, two passes of the largest shape %.0f", len(keep), live, most)
	}
	t.Logf("%d episodes (%d kernels): %d device buffers, %d bytes held (one pass of the largest shape: %.0f)", len(shapes), len(keep), allocs[len(allocs)-1], live, FlowDeviceBytes(spec, 6, 40))
}

// Steps after a Forward whose slot went back (an evaluation graph) reads
// ω of that Forward: from the slot if no other pass took it since, else
// computed again, never another pass's buffers. A Backward after the slot
// went back refuses.
func TestFlowDevStepsAfterRelease(t *testing.T) {
	dev := testDevice(t)
	spec := FlowSpec{Layers: 2, Dim: 6, Cond: 3, Hidden: 16}
	pool := &Pool{}
	pool.SetDevice(dev)
	p, q := newFlowProblem(spec, 3, 20, 0.3, 70), newFlowProblem(spec, 4, 24, 0.3, 71)
	ref := newFlowDevKernel(t, dev, spec)
	p.forward(t, ref)
	want := flowDevSteps(ref, p.T)

	vm, op := flowEvalGraph(t, pool, p)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got := flowDevSteps(op.Kernel(), p.T)
	// The evaluation again, then another kernel's pass takes the free slot
	// and writes its own ω there.
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	q.run(t, func() *FlowKernel {
		k, err := NewFlowKernel(pool, spec)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}())
	if l := &op.Kernel().dev.lease; l.slot.last == l.id {
		t.Fatal("the other kernel's pass did not take the evaluation's slot: the test reads nothing computed again")
	}
	again := flowDevSteps(op.Kernel(), p.T)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("step %d: Steps right after the evaluation differs from its own kernel's", i)
		}
		if !slices.Equal(again[i], want[i]) {
			t.Errorf("step %d: Steps after another pass took the slot differs (read that pass's buffers?)", i)
		}
	}
	k := op.Kernel()
	if err := k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, make([]float64, len(p.r))); err != nil {
		t.Fatal(err)
	}
	k.releaseDevice()
	g := [3][]float64{make([]float64, len(p.omega0)), make([]float64, len(p.cond)), make([]float64, len(p.theta))}
	if err := k.Backward(p.r, g[0], g[1], g[2]); err == nil || !strings.Contains(err.Error(), "given back") {
		t.Errorf("Backward after the slot went back: %v, want a refusal", err)
	}
}
