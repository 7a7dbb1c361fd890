package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mkbench/mkbench/engine/internal/vecmath"
	"github.com/mkbench/mkbench/internal/opencl"
	"gonum.org/v1/gonum/floats"
)

var residentSpec = ConvSpec{Channels: 2, Height: 7, Width: 7, Blocks: 2, Filters: 8, Keep: 0.8}

// residentTensors is a network's tensors in the model's order (block 0's
// weights, its bias, block 1's …), copied.
func residentTensors(ws, bs [][]float64) [][]float64 {
	var ts [][]float64
	for l := range ws {
		ts = append(ts, slices.Clone(ws[l]), slices.Clone(bs[l]))
	}
	return ts
}

func residentZeros(spec ConvSpec) [][]float64 {
	var ts [][]float64
	for l := range spec.Blocks {
		ts = append(ts, make([]float64, spec.Filters*spec.FanIn(l)), make([]float64, spec.Filters))
	}
	return ts
}

func residentRandom(spec ConvSpec, rng *rand.Rand, f func() float64) [][]float64 {
	ts := residentZeros(spec)
	for _, t := range ts {
		for i := range t {
			t[i] = f()
		}
	}
	return ts
}

// residentHostAdam is engine/optim.go's update of tensor p: the decay,
// then vecmath.Adam.
func residentHostAdam(p, g, m, v []float64, s AdamStep) {
	if s.Decay {
		floats.Scale(s.Factor, p)
	}
	vecmath.Adam(p, g, m, v, s.Scale, s.Step, s.B1, s.B2, s.Eps)
}

// residentSteps are Adam steps at iteration it for spec's tensors: the
// weights decayed, the biases at half the learning rate.
func residentSteps(spec ConvSpec, it int, scale float64) []AdamStep {
	const lr, b1, b2 = 1e-3, 0.9, 0.999
	step := lr * math.Sqrt(1-math.Pow(b2, float64(it))) / (1 - math.Pow(b1, float64(it)))
	var ss []AdamStep
	for range spec.Blocks {
		ss = append(ss, AdamStep{Scale: scale, Step: step, B1: b1, B2: b2, Eps: 1e-8, Factor: 1 - lr*0.01, Decay: true},
			AdamStep{Scale: scale, Step: 0.5 * step, B1: b1, B2: b2, Eps: 1e-8})
	}
	return ss
}

// residentCompare checks got against want: bit for bit with double
// masters, else within float32's rounding.
func residentCompare(t *testing.T, what string, fp64 bool, got, want [][]float64) {
	t.Helper()
	for i := range want {
		if fp64 {
			for j := range want[i] {
				if math.Float64bits(got[i][j]) != math.Float64bits(want[i][j]) {
					t.Fatalf("%s: tensor %d value %d is %v, the host's %v", what, i, j, got[i][j], want[i][j])
				}
			}
		} else if e := convRelErr(got[i], want[i]); !(e <= 1e-6) {
			t.Fatalf("%s: tensor %d differs by %.3g relative L2", what, i, e)
		}
	}
}

// residentRound rounds the host's reference tensors to what the device
// holds without fp64 (float32 masters); with it, they stay.
func residentRound(c *ConvResident, tss ...[][]float64) {
	if c.FP64() {
		return
	}
	for _, ts := range tss {
		for _, x := range ts {
			for i := range x {
				x[i] = float64(float32(x[i]))
			}
		}
	}
}

// residentGrad puts a random gradient of wide range in c's step gradient
// and returns it in the model's order.
func residentGrad(t *testing.T, c *ConvResident, rng *rand.Rand) [][]float64 {
	t.Helper()
	g := residentRandom(c.spec, rng, func() float64 { return math.Ldexp(rng.NormFloat64(), -rng.IntN(20)) })
	h := make([]float64, c.n)
	c.pack(h, g)
	if err := c.write(c.r.g, h); err != nil {
		t.Fatal(err)
	}
	return g
}

// The device's Adam is engine/optim.go's on random inputs: with double
// masters (cl_khr_fp64, which PoCL has) the parameters and moments are the
// host's bits after each of three steps with decay, an LR scale and a
// clipping scale; the float32 weights the kernels read are float32() of
// the masters in conv_dev.go's layouts, bit for bit.
func TestResidentAdamMatchesHost(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: double masters %v", dev.Info.Name, c.FP64())
	rng := rand.New(rand.NewPCG(3, 4))
	p := residentRandom(spec, rng, rng.NormFloat64)
	m := residentRandom(spec, rng, func() float64 { return 0.01 * rng.NormFloat64() })
	v := residentRandom(spec, rng, func() float64 { return 1e-4 * math.Abs(rng.NormFloat64()) })
	if err := c.Upload(p, m, v); err != nil {
		t.Fatal(err)
	}
	residentRound(c, p, m, v)
	gp, gm, gv := residentZeros(spec), residentZeros(spec), residentZeros(spec)
	for it := 1; it <= 3; it++ {
		g := residentGrad(t, c, rng)
		steps := residentSteps(spec, it, 0.25*float64(it))
		if err := c.Adam(steps); err != nil {
			t.Fatal(err)
		}
		for i := range p {
			residentHostAdam(p[i], g[i], m[i], v[i], steps[i])
		}
		if err := c.Download(gp, gm, gv); err != nil {
			t.Fatal(err)
		}
		residentCompare(t, "parameters", c.FP64(), gp, p)
		residentCompare(t, "first moments", c.FP64(), gm, m)
		residentCompare(t, "second moments", c.FP64(), gv, v)
	}
	// The weights the kernels read: convDev.setWeights's packing.
	nf := spec.Filters
	want := make([]float32, c.r.w.Len())
	for l, ly := range c.ls {
		wt := want[c.wOff[l] : c.wOff[l]+ly.k1*nf]
		var wrot []float32
		if l > 0 {
			wrot = want[c.wOff[l]+ly.k1*nf:][:9*nf*ly.cin]
		}
		convPackIm2col(wt, wrot, gp[2*l], gp[2*l+1], ly.cin, nf)
	}
	got := make([]float32, len(want))
	if err := opencl.Read(c.r.w, 0, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the packed float32 weights are not float32() of the masters in the kernels' layouts")
	}
}

// Two kernels with resident parameters compute, over three training
// steps, part 1's outputs bit for bit (same float32 weights from the same
// masters), their summed gradient's square norm is the host's within
// 1e-12, Adam on the device leaves the host's parameters (bits with
// double masters), and what crosses per step is the images and output
// gradients up, the features and the norm down, nothing else. The
// callers' gradient slices are left untouched.
func TestResidentConvMatchesPart1(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	probs := []*convProblem{newConvProblem(spec, 5, 1), newConvProblem(spec, 3, 2)}
	probs[1].ws, probs[1].bs = probs[0].ws, probs[0].bs // one network, two ops
	var res, ref []*ConvKernel
	for range probs {
		k := newConvDevKernel(t, dev, spec)
		if err := c.attach(k, false); err != nil {
			t.Fatal(err)
		}
		res, ref = append(res, k), append(ref, newConvDevKernel(t, dev, spec))
	}
	p := residentTensors(probs[0].ws, probs[0].bs)
	m, v := residentZeros(spec), residentZeros(spec)
	if err := c.Upload(p, m, v); err != nil {
		t.Fatal(err)
	}
	for it := 1; it <= 3; it++ {
		var ws, bs [][]float64
		for l := range spec.Blocks {
			ws, bs = append(ws, p[2*l]), append(bs, p[2*l+1])
		}
		before := dev.Transfers()
		var wantBytes int64
		outs := make([][]float64, len(probs))
		for i, pr := range probs {
			outs[i] = make([]float64, pr.N*spec.OutDim())
			if err := res[i].Forward(pr.N, pr.x, ws, bs, uint64(it), true, outs[i]); err != nil {
				t.Fatal(err)
			}
			z := residentZeros(spec)
			var gws, gbs [][]float64
			for l := range spec.Blocks {
				gws, gbs = append(gws, z[2*l]), append(gbs, z[2*l+1])
			}
			if err := res[i].Backward(pr.r, gws, gbs); err != nil {
				t.Fatal(err)
			}
			for l := range gws {
				if slices.ContainsFunc(gws[l], func(x float64) bool { return x != 0 }) || slices.ContainsFunc(gbs[l], func(x float64) bool { return x != 0 }) {
					t.Fatalf("a resident backward wrote the caller's gradients")
				}
			}
			wantBytes += 4 * int64(pr.N*(spec.InDim()+2*spec.OutDim()))
		}
		sq, err := c.GradNormSq()
		if err != nil {
			t.Fatal(err)
		}
		steps := residentSteps(spec, it, 0.5)
		if err := c.Adam(steps); err != nil {
			t.Fatal(err)
		}
		after := dev.Transfers()
		wantBytes += 8
		if !c.FP64() {
			wantBytes -= 4
		}
		if w, r := after.Writes-before.Writes, after.Reads-before.Reads; w != 2*int64(len(probs)) || r != int64(len(probs))+1 ||
			after.WriteBytes+after.ReadBytes-before.WriteBytes-before.ReadBytes != wantBytes {
			t.Fatalf("step %d: %d writes and %d reads of %d bytes, want %d, %d and %d", it, w, r,
				after.WriteBytes+after.ReadBytes-before.WriteBytes-before.ReadBytes, 2*len(probs), len(probs)+1, wantBytes)
		}
		// Part 1's path on the host's parameters.
		g := residentZeros(spec)
		for i, pr := range probs {
			want, rgws, rgbs := ref[i].run(t, &convProblem{spec: spec, N: pr.N, x: pr.x, ws: ws, bs: bs, r: pr.r}, uint64(it), true)
			if !slices.Equal(outs[i], want) {
				t.Fatalf("step %d op %d: the features differ from part 1's", it, i)
			}
			for l := range rgws {
				floats.Add(g[2*l], rgws[l])
				floats.Add(g[2*l+1], rgbs[l])
			}
		}
		var hsq float64
		for _, x := range g {
			hsq += floats.Dot(x, x)
		}
		if math.Abs(sq-hsq) > 1e-12*hsq {
			t.Fatalf("step %d: device square norm %v, host %v", it, sq, hsq)
		}
		for i := range p {
			residentHostAdam(p[i], g[i], m[i], v[i], steps[i])
		}
		gp, gm, gv := residentZeros(spec), residentZeros(spec), residentZeros(spec)
		if err := c.Download(gp, gm, gv); err != nil {
			t.Fatal(err)
		}
		if c.FP64() {
			residentCompare(t, "parameters", true, gp, p)
			residentCompare(t, "moments", true, gv, v)
		} else {
			p = gp // float32 masters: the host follows the device's
		}
	}
}

// A NaN in the images reaches the square norm (the host learns of a
// non-finite gradient from the one scalar it reads).
func TestResidentNaNNorm(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	pr := newConvProblem(spec, 3, 5)
	k := newConvDevKernel(t, dev, spec)
	if err := c.attach(k, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(residentTensors(pr.ws, pr.bs), residentZeros(spec), residentZeros(spec)); err != nil {
		t.Fatal(err)
	}
	pr.x[7] = math.NaN()
	pr.run(t, k, 1, true)
	sq, err := c.GradNormSq()
	if err != nil || !math.IsNaN(sq) {
		t.Fatalf("square norm %v (%v), want NaN", sq, err)
	}
	// No backward since: the gradient is zero.
	if sq, err = c.GradNormSq(); err != nil || sq != 0 {
		t.Fatalf("square norm without a backward %v (%v), want 0", sq, err)
	}
}

// A dropped graph's ops leave the resident parameters (ReleaseResident):
// the others keep their order, and only their gradients are summed.
func TestResidentRelease(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	pr := newConvProblem(spec, 3, 6)
	var ks []*ConvKernel
	for range 3 {
		k := newConvDevKernel(t, dev, spec)
		if err := c.attach(k, false); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	if err := c.Upload(residentTensors(pr.ws, pr.bs), residentZeros(spec), residentZeros(spec)); err != nil {
		t.Fatal(err)
	}
	(&ConvNet{spec: spec, ops: []*ConvOp{{kern: ks[1]}}}).ReleaseResident(c)
	if len(c.cores) != 2 || c.cores[0] != &ks[0].dev.residentCore || c.cores[1] != &ks[2].dev.residentCore || ks[2].dev.seq != 1 || ks[1].dev.res != nil {
		t.Fatalf("after the release: %d cores, the last at %d", len(c.cores), ks[2].dev.seq)
	}
	ref := newConvDevKernel(t, dev, spec)
	_, gws, gbs := pr.run(t, ref, 1, true)
	var want float64
	for l := range gws {
		want += floats.Dot(gws[l], gws[l]) + floats.Dot(gbs[l], gbs[l])
	}
	pr.run(t, ks[2], 1, true)
	got, err := c.GradNormSq()
	if err != nil || math.Abs(got-want) > 1e-12*want {
		t.Fatalf("square norm %v (%v), want %v", got, err, want)
	}
}

// residentHostSGD is engine/optim.go's SGD update of tensor p: the decay,
// then sgdUpdate.
func residentHostSGD(p, g, m []float64, s SGDStep) {
	if s.Decay {
		floats.Scale(s.Factor, p)
	}
	for j := range p {
		m[j] = float64(s.Momentum*m[j]) + float64(g[j]*s.Scale)
		p[j] -= float64(s.LR * m[j])
	}
}

// The device's SGD with momentum is engine/optim.go's on random inputs:
// with double masters the parameters and velocities are the host's bits
// after each of three steps with decay, an LR scale and a clipping scale
// (float32 masters: within float32's rounding, 1e-6 relative L2).
func TestResidentSGDMatchesHost(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	p := residentRandom(spec, rng, rng.NormFloat64)
	m := residentRandom(spec, rng, func() float64 { return 0.01 * rng.NormFloat64() })
	if err := c.Upload(p, m, nil); err != nil {
		t.Fatal(err)
	}
	residentRound(c, p, m)
	gp, gm := residentZeros(spec), residentZeros(spec)
	for it := 1; it <= 3; it++ {
		g := residentGrad(t, c, rng)
		var steps []SGDStep
		for range spec.Blocks {
			steps = append(steps, SGDStep{Scale: 0.3 * float64(it), LR: 0.05, Momentum: 0.9, Factor: 1 - 0.05*0.01, Decay: true},
				SGDStep{Scale: 0.3 * float64(it), LR: 0.025, Momentum: 0.9})
		}
		if err := c.SGD(steps); err != nil {
			t.Fatal(err)
		}
		for i := range p {
			residentHostSGD(p[i], g[i], m[i], steps[i])
		}
		if err := c.Download(gp, gm, nil); err != nil {
			t.Fatal(err)
		}
		residentCompare(t, "parameters", c.FP64(), gp, p)
		residentCompare(t, "velocities", c.FP64(), gm, m)
	}
}

// Graphs made and dropped one after another (Meta-Dataset's episode
// shapes, two task stages each) allocate no device memory once the first
// has run: the gradient sums of a dropped graph's ops serve the next
// graph's, as the arena's slots serve their passes.
func TestResidentSumsReused(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	pool := &Pool{}
	pool.SetDevice(dev)
	pr := newConvProblem(spec, 4, 8)
	if err := c.Upload(residentTensors(pr.ws, pr.bs), residentZeros(spec), residentZeros(spec)); err != nil {
		t.Fatal(err)
	}
	var allocs int64
	for round := range 5 {
		var net ConvNet
		for range 2 {
			k, err := NewConvKernel(pool, spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.attach(k, false); err != nil {
				t.Fatal(err)
			}
			net.ops = append(net.ops, &ConvOp{kern: k})
			pr.run(t, k, uint64(round), true)
		}
		if _, err := c.GradNormSq(); err != nil {
			t.Fatal(err)
		}
		net.ReleaseResident(c)
		got := dev.MemStats().Allocs
		if round == 0 {
			allocs = got
		} else if got != allocs {
			t.Fatalf("graph %d: %d device buffers allocated so far, %d after the first graph", round+1, got, allocs)
		}
	}
	if len(c.r.sums) != 2 {
		t.Errorf("%d gradient-sum buffers for two ops at a time", len(c.r.sums))
	}
}

// An evaluation op reading the resident weights sends only its images up
// (and its features down) while the host's values are the ones the
// weights were made from; values changed on the host, whoever changed
// them, go up (the masters, one write) before the pass that is given them, so its output is part
// 1's on those values, bit for bit; with the device's masters ahead of
// the host's the pass is refused, and it takes no gradient.
func TestResidentReaderWeights(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	pr := newConvProblem(spec, 3, 9)
	k, ref := newConvDevKernel(t, dev, spec), newConvDevKernel(t, dev, spec)
	if err := c.attach(k, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Upload(residentTensors(pr.ws, pr.bs), residentZeros(spec), residentZeros(spec)); err != nil {
		t.Fatal(err)
	}
	pass := func(what string, writes int64) {
		t.Helper()
		before := dev.Transfers()
		got := pr.forward(t, k, 1, false)
		after := dev.Transfers()
		if w, r := after.Writes-before.Writes, after.Reads-before.Reads; w != writes || r != 1 {
			t.Errorf("%s: %d writes and %d reads, want %d and 1", what, w, r, writes)
		}
		if want := pr.forward(t, ref, 1, false); !slices.Equal(got, want) {
			t.Errorf("%s: the features differ from part 1's on the host's values", what)
		}
	}
	pass("unchanged", 1)
	pass("unchanged again", 1)
	pr.ws[1][4] += 0.25 // a host write nobody announced
	pass("a weight changed on the host", 2)
	pass("unchanged after it", 1)
	pr.bs[0][0] = math.Copysign(0, -1)
	pass("a bias changed to −0", 2)
	pr.bs[0][0] = 0 // +0: another float32 weight bit
	pass("−0 to +0", 2)
	// An update on the device (of the decay alone: no op left a
	// gradient): the host's values are behind.
	if _, err := c.GradNormSq(); err != nil {
		t.Fatal(err)
	}
	if err := c.Adam(residentSteps(spec, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pr.runErr(k); err == nil {
		t.Fatal("an evaluation pass on stale host values ran")
	} else {
		t.Log(err)
	}
	gw := residentZeros(spec)
	if err := c.Download(gw, nil, nil); err != nil {
		t.Fatal(err)
	}
	for l := range spec.Blocks {
		pr.ws[l], pr.bs[l] = gw[2*l], gw[2*l+1]
	}
	pass("after the download", 1)
	pr.forward(t, k, 1, true)
	g := residentZeros(spec)
	if err := k.Backward(pr.r, [][]float64{g[0], g[2]}, [][]float64{g[1], g[3]}); err == nil {
		t.Error("an evaluation op took a gradient")
	}
}

// A model that only evaluates holds the masters and the float32 weights
// on the device, not the moments and the gradient a training step needs:
// those are made by the first upload of moments (or the first norm).
func TestResidentEvaluationHoldsMasters(t *testing.T) {
	dev := testDevice(t)
	spec := residentSpec
	before := dev.MemStats().Live
	c, err := NewConvResident(dev, spec)
	if err != nil {
		t.Fatal(err)
	}
	held := dev.MemStats().Live - before
	pr := newConvProblem(spec, 3, 10)
	k, ref := newConvDevKernel(t, dev, spec), newConvDevKernel(t, dev, spec)
	if err := c.attach(k, true); err != nil {
		t.Fatal(err)
	}
	if got, want := pr.forward(t, k, 1, false), pr.forward(t, ref, 1, false); !slices.Equal(got, want) {
		t.Fatal("the evaluation's features differ from part 1's")
	}
	real := int64(4)
	if c.FP64() {
		real = 8
	}
	if want := real*int64(c.n) + 4*int64(c.r.w.Len()); c.r.m != nil || c.r.v != nil || c.r.g != nil || held != want {
		t.Errorf("an evaluation's resident parameters: moments %v, gradient %v, %d bytes held (masters and weights: %d)", c.r.m != nil, c.r.g != nil, held, want)
	}
	if err := c.Download(residentZeros(spec), residentZeros(spec), nil); err == nil {
		t.Error("moments that were never on the device came down")
	} else {
		t.Log(err)
	}
	if err := c.Adam(residentSteps(spec, 1, 1)); err == nil {
		t.Error("an update ran without a gradient")
	}
}
