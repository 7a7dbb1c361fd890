package engine

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/task"
)

// residentDevice is openTestDevice's device, for tests that choose per
// model whether the engine uses it; residentOff is back to false at the
// end.
func residentDevice(tb testing.TB) *opencl.Device {
	tb.Helper()
	dev := openTestDevice(tb)
	tb.Cleanup(func() { residentOff = false })
	return dev
}

// residentConfig is omniglotLikeConfig at a size PoCL trains in well
// under a second a step: Conv-4 of 16 filters on 14×14 blobs, 4 tasks,
// with ψ's weight decay so that the device's decay is exercised.
func residentConfig() Config {
	c := omniglotLikeConfig()
	c.Conv = &ConvSpec{Channels: 1, Height: 14, Width: 14, Blocks: 4, Filters: 16, Keep: 0.9}
	c.InferHidden, c.PriorHidden, c.FlowHidden, c.Bases = 32, 32, 32, 64
	c.MetaBatch, c.Query = 4, 3
	c.PsiWeightDecay = 1e-2
	c.Iters, c.LogEvery, c.SnapshotEvery = 6, 2, 100
	c.EvalTasks, c.EvalQuery, c.EvalSamples = 4, 3, 1
	return c
}

var residentSrc = blobs{way: 5, side: 14}

// residentModel is cfg's model on dev with its optimizer, after its first
// step (the upload, the graphs); closed when the test ends.
func residentModel(t *testing.T, dev *opencl.Device, cfg Config) (*Model, *Optimizer) {
	t.Helper()
	UseDevice(dev)
	m, err := NewModel(cfg, residentSrc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	opt := NewOptimizer(m.Cfg, m.Params.List)
	if _, err := m.Step(0, opt); err != nil {
		t.Fatal(err)
	}
	return m, opt
}

// residentTrain trains cfg for n steps on dev (nil: the CPU), with the
// backbone's parameters resident or not, and returns the parameters (the
// host's copy, synced) and each step's gradient norm.
func residentTrain(t *testing.T, cfg Config, dev *opencl.Device, resident bool, n int) ([][]float64, []float64) {
	t.Helper()
	UseDevice(dev)
	residentOff = !resident
	defer func() { UseDevice(nil); residentOff = false }()
	m, err := NewModel(cfg, residentSrc)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if (m.res != nil) != (resident && dev != nil) {
		t.Fatalf("resident parameters: %v, want %v", m.res != nil, resident && dev != nil)
	}
	opt := NewOptimizer(m.Cfg, m.Params.List)
	var norms []float64
	for i := range n {
		st, err := m.Step(i, opt)
		if err != nil {
			t.Fatal(err)
		}
		norms = append(norms, st.GradNorm)
	}
	if err := m.SyncHost(); err != nil {
		t.Fatal(err)
	}
	var ps [][]float64
	for _, p := range m.Params.List {
		ps = append(ps, slices.Clone(p.Data))
	}
	return ps, norms
}

// residentDiff is the relative L2 difference between two sets of
// parameters, over all of them and over the backbone's (conv*, resnet.*)
// alone.
func residentDiff(names []*Param, a, b [][]float64) (all, backbone float64) {
	var num, den, cnum, cden float64
	for i := range a {
		for j := range a[i] {
			d := a[i][j] - b[i][j]
			num += d * d
			den += b[i][j] * b[i][j]
			if strings.HasPrefix(names[i].Name, "conv") || strings.HasPrefix(names[i].Name, "resnet.") {
				cnum += d * d
				cden += b[i][j] * b[i][j]
			}
		}
	}
	return math.Sqrt(num / den), math.Sqrt(cnum / cden)
}

// Training with the backbone's parameters resident on the device ends
// where part 1's device path ends (the same float32 weights from the same
// masters, the same gradient sums and Adam's formula in the same order:
// with double masters the norm's order is the only difference, within
// 1e-12) and within 1e-4 of the CPU's (float32 sums in another order,
// which Adam's normalisation turns into relative differences of the
// update, not of the gradient, on parameters that move by ~lr a step);
// with a small clip norm the clipping engages on every step and the norms
// agree within 1e-12.
//
// SGD with momentum likewise (its update on the device is sgdUpdate's
// formula in its order).
func TestResidentTrainingMatchesPart1AndCPU(t *testing.T) {
	dev := residentDevice(t)
	for _, tc := range []struct {
		opt  string
		clip float64
	}{{"adam", 0}, {"adam", 1e-2}, {"sgd", 0}, {"sgd", 1e-2}} {
		clip := tc.clip
		cfg := residentConfig()
		cfg.ClipNorm = clip
		if cfg.Optimizer = tc.opt; tc.opt == "sgd" {
			cfg.LR, cfg.Momentum = 0.05, 0.9
		}
		t.Logf("%s:", tc.opt)
		const n = 8
		res, resNorms := residentTrain(t, cfg, dev, true, n)
		part1, p1Norms := residentTrain(t, cfg, dev, false, n)
		cpu, _ := residentTrain(t, cfg, nil, false, n)
		m, _ := NewModel(cfg, residentSrc)
		names := m.Params.List
		m.Close()
		e, ec := residentDiff(names, res, part1)
		t.Logf("clip %g: resident vs part 1: %.3g relative L2 (backbone %.3g)", clip, e, ec)
		if clip == 0 && e != 0 || !(e <= 1e-9) {
			t.Errorf("clip %g: resident parameters differ from part 1's by %.3g relative L2 (backbone %.3g)", clip, e, ec)
		}
		e, ec = residentDiff(names, res, cpu)
		t.Logf("clip %g: resident vs CPU: %.3g relative L2 (backbone %.3g)", clip, e, ec)
		if !(e <= 1e-3) || !(ec <= 1e-4) {
			t.Errorf("clip %g: resident parameters differ from the CPU's by %.3g relative L2 (backbone %.3g)", clip, e, ec)
		}
		for i := range resNorms {
			if math.Abs(resNorms[i]-p1Norms[i]) > 1e-12*p1Norms[i] {
				t.Errorf("clip %g step %d: gradient norm %v, part 1's %v", clip, i, resNorms[i], p1Norms[i])
			}
			if clip > 0 && !(resNorms[i] > clip) {
				t.Errorf("step %d: norm %v does not engage clip %g: the test does not test clipping", i, resNorms[i], clip)
			}
		}
		// Run after run, the same bytes.
		again, _ := residentTrain(t, cfg, dev, true, n)
		for i := range res {
			if !slices.Equal(res[i], again[i]) {
				t.Fatalf("clip %g: two resident trainings differ in %s", clip, names[i].Name)
			}
		}
	}
}

// What crosses per training step with resident parameters: each conv
// op's images up and features down, each backward's output gradient up,
// and the norm's one scalar down; in bytes exactly that, and the images
// are the step's (the task stages' support and query rows, and the
// support rows again in the summary and seeded-summary passes).
func TestResidentTransfersPerStep(t *testing.T) {
	dev := residentDevice(t)
	for _, o := range []string{"adam", "sgd"} {
		t.Run(o, func(t *testing.T) { residentTransfers(t, dev, o) })
	}
}

func residentTransfers(t *testing.T, dev *opencl.Device, optimizer string) {
	cfg := residentConfig()
	cfg.Optimizer, cfg.Momentum = optimizer, 0.9
	// The flows run on the device too (their own transfers, ops/flow_dev.go):
	// without them, the device's counts are the backbone's alone.
	cfg.FlowLayers = 0
	m, opt := residentModel(t, dev, cfg)
	for it := 1; it <= 2; it++ {
		m.res.store.Passes()
		before := dev.Transfers()
		if _, err := m.Step(it, opt); err != nil {
			t.Fatal(err)
		}
		after := dev.Transfers()
		fwd, bwd, fi, bi := m.res.store.Passes()
		T, ns, nq := cfg.MetaBatch, cfg.Way*cfg.TrainingShot(), cfg.Way*cfg.Query
		if fi != T*(ns+nq)+2*T*ns || bi != T*(ns+nq)+T*ns {
			t.Errorf("step %d: %d images forward and %d backward, want %d and %d", it, fi, bi, T*(ns+nq)+2*T*ns, T*(ns+nq)+T*ns)
		}
		in, out := cfg.Conv.InDim(), cfg.Conv.OutDim()
		norm := int64(8)
		if !m.res.store.FP64() {
			norm = 4
		}
		w, r := after.Writes-before.Writes, after.Reads-before.Reads
		wb, rb := after.WriteBytes-before.WriteBytes, after.ReadBytes-before.ReadBytes
		t.Logf("step %d: %d writes (%d bytes), %d reads (%d bytes)", it, w, wb, r, rb)
		if w != int64(fwd+bwd) || wb != int64(4*(fi*in+bi*out)) || r != int64(fwd+1) || rb != int64(4*fi*out)+norm {
			t.Errorf("step %d: %d writes of %d bytes and %d reads of %d bytes, want %d of %d and %d of %d", it,
				w, wb, r, rb, fwd+bwd, 4*(fi*in+bi*out), fwd+1, int64(4*fi*out)+norm)
		}
	}
	// Part 1's path, for the record: the weights up every forward and the
	// gradients down every backward.
	residentOff = true
	p1, p1opt := residentModel(t, dev, cfg)
	residentOff = false
	before := dev.Transfers()
	if _, err := p1.Step(1, p1opt); err != nil {
		t.Fatal(err)
	}
	after := dev.Transfers()
	t.Logf("part 1's step: %d writes (%d bytes), %d reads (%d bytes)", after.Writes-before.Writes, after.WriteBytes-before.WriteBytes,
		after.Reads-before.Reads, after.ReadBytes-before.ReadBytes)
}

// An evaluation on the device reads the resident weights: after training
// steps the host's copy comes down once (masters and moments: three
// reads), and then each pass sends its images up and brings its features
// down, nothing else, evaluation after evaluation; the weights go up only
// when the host's values change. Whatever changed them — the training
// step, a host write nobody announced, a checkpoint restored — the
// evaluation's numbers are, bit for bit, those of part 1's path (weights
// up every pass) on the host's values.
func TestResidentEvalReadsDeviceWeights(t *testing.T) {
	dev := residentDevice(t)
	cfg := residentConfig()
	cfg.FlowLayers = 0 // the backbone's transfers alone (see TestResidentTransfersPerStep)
	m, opt := residentModel(t, dev, cfg)
	residentOff = true
	ref, _ := residentModel(t, dev, cfg)
	residentOff = false
	eval := func(what string, extraReads, extraWrites int64) {
		t.Helper()
		m.res.store.Passes()
		before := dev.Transfers()
		got, err := m.Evaluate(4, 3, 1, 11)
		if err != nil {
			t.Fatal(err)
		}
		after := dev.Transfers()
		fwd, _, fi, _ := m.res.store.Passes()
		w, r := after.Writes-before.Writes, after.Reads-before.Reads
		wb, rb := after.WriteBytes-before.WriteBytes, after.ReadBytes-before.ReadBytes
		in, out := int64(cfg.Conv.InDim()), int64(cfg.Conv.OutDim())
		t.Logf("%s: %d passes of %d images: %d writes (%d bytes), %d reads (%d bytes)", what, fwd, fi, w, wb, r, rb)
		if fwd == 0 || w != int64(fwd)+extraWrites || r != int64(fwd)+extraReads ||
			extraWrites == 0 && wb != 4*int64(fi)*in || extraReads == 0 && rb != 4*int64(fi)*out {
			t.Errorf("%s: %d writes of %d bytes and %d reads of %d bytes for %d passes of %d images, want %d of %d and %d of %d", what,
				w, wb, r, rb, fwd, fi, int64(fwd)+extraWrites, 4*int64(fi)*in, int64(fwd)+extraReads, 4*int64(fi)*out)
		}
		if err := ref.Params.CopyFrom(m.Params.List); err != nil {
			t.Fatal(err)
		}
		ref.State = m.State.clone()
		want, err := ref.Evaluate(4, 3, 1, 11)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.PerTask, want.PerTask) {
			t.Errorf("%s: the evaluation differs from part 1's on the host's values: %v, want %v", what, got.PerTask, want.PerTask)
		}
	}
	eval("after a training step", 3, 0)
	eval("again", 0, 0)
	ckpt := filepath.Join(t.TempDir(), "ck.gob")
	if err := newCheckpoint("test", "blobs", m, opt, 1, window{}, 0).Save(ckpt); err != nil {
		t.Fatal(err)
	}
	for it := 1; it <= 2; it++ {
		if _, err := m.Step(it, opt); err != nil {
			t.Fatal(err)
		}
	}
	eval("after two more steps", 3, 0)
	m.Params.Get("conv1.w").Data[5] += 0.125
	eval("after a host write", 0, 1)
	eval("again", 0, 0)
	ck, err := LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if err := ck.restore(m, opt); err != nil {
		t.Fatal(err)
	}
	eval("after a checkpoint restored", 0, 1)
	// Training goes on from the restored values.
	if _, err := m.Step(3, opt); err != nil {
		t.Fatal(err)
	}
	eval("after the next step", 3, 0)
}

// A checkpoint written on the device resumes on the CPU and finishes, one
// written on the CPU resumes on the device; resumed on the device that
// wrote it, a run ends with the bytes of an uninterrupted one (syncing the
// host's copy changes nothing).
//
// ResNet-18's resident weights likewise.
func TestResidentCheckpointResume(t *testing.T) {
	dev := residentDevice(t)
	rn := resnetConfig("metakernel", "")
	rn.Iters, rn.LogEvery, rn.SnapshotEvery = 6, 2, 100
	rn.EvalTasks, rn.EvalQuery, rn.EvalSamples = 3, 2, 1
	for _, b := range []struct {
		name string
		cfg  Config
		src  task.Source
	}{{"conv", residentConfig(), residentSrc}, {"resnet", rn, blobs{way: 3, side: 7}}} {
		t.Run(b.name, func(t *testing.T) { residentResume(t, dev, b.cfg, b.src) })
	}
}

func residentResume(t *testing.T, dev *opencl.Device, cfg Config, src task.Source) {
	stopAt3 := ObserverFunc(func(s Snapshot) error {
		if s.Iter >= 3 {
			return ErrStopped
		}
		return nil
	})
	final := func(dir string) *Checkpoint {
		t.Helper()
		ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
		if err != nil {
			t.Fatal(err)
		}
		if ck.Iter != cfg.Iters {
			t.Fatalf("%s: the checkpoint is at iteration %d, want %d", dir, ck.Iter, cfg.Iters)
		}
		return ck
	}
	run := func(d *opencl.Device, dir string, resume bool, obs Observer) {
		t.Helper()
		UseDevice(d)
		defer UseDevice(nil)
		res, err := Run(context.Background(), cfg, src, RunOptions{Preset: "test", Dir: dir, Resume: resume}, obs)
		if obs != nil {
			if !res.Interrupted {
				t.Fatalf("want a stopped run, got %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	whole := filepath.Join(root, "whole")
	run(dev, whole, false, nil)
	want := final(whole)

	for _, c := range []struct {
		name        string
		first, then *opencl.Device
	}{{"device-device", dev, dev}, {"device-cpu", dev, nil}, {"cpu-device", nil, dev}} {
		dir := filepath.Join(root, c.name)
		run(c.first, dir, false, stopAt3)
		mid, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
		if err != nil {
			t.Fatal(err)
		}
		if (mid.Device != "") != (c.first != nil) {
			t.Errorf("%s: the checkpoint's device %q", c.name, mid.Device)
		}
		run(c.then, dir, true, nil)
		got := final(dir)
		e, ec := residentDiff(got.Params, paramData(got.Params), paramData(want.Params))
		t.Logf("%s: %.3g relative L2 from the uninterrupted device run (backbone %.3g)", c.name, e, ec)
		if c.name == "device-device" && e != 0 {
			t.Errorf("resumed on the device that wrote the checkpoint, the run differs from an uninterrupted one by %.3g", e)
		}
		if !(e <= 1e-2) {
			t.Errorf("%s: the resumed run's parameters differ by %.3g relative L2", c.name, e)
		}
		for i, p := range got.Params {
			for _, x := range append(slices.Clone(p.Data), got.Optimizer.V[i]...) {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%s: %s holds %v", c.name, p.Name, x)
				}
			}
		}
	}
}

func paramData(ps []*Param) [][]float64 {
	var d [][]float64
	for _, p := range ps {
		d = append(d, p.Data)
	}
	return d
}

// A non-finite gradient stops the step as ErrNonFinite and changes no
// parameter, the device's included: the norm's scalar is read before any
// update runs, on the host or the device.
func TestResidentNonFiniteGradient(t *testing.T) {
	dev := residentDevice(t)
	cfg := residentConfig()
	m, opt := residentModel(t, dev, cfg)
	if err := m.SyncHost(); err != nil {
		t.Fatal(err)
	}
	before := paramData(m.Params.List)
	for i := range before {
		before[i] = slices.Clone(before[i])
	}
	steps := opt.Steps
	// Step 1's forward and backward with a NaN pixel in a query image
	// (in a support image, the kernel ridge regression refuses it), then
	// the update as trainStep calls it (whose loss check would stop it
	// first).
	in := m.input(1)
	in.batch.XQ[3] = math.NaN()
	sh := m.batchShape(&in.batch, m.Src)
	sh.train = true
	st, err := m.staged(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.res.toDevice(m, opt); err != nil {
		t.Fatal(err)
	}
	next := m.State.clone()
	var grads [][]float64
	if _, err := st.run(m.Params, &in.batch, &in.noise, &next, nil, &grads); err != nil {
		t.Fatal(err)
	}
	_, err = opt.step(m.Params.List, grads, m.res)
	if !errors.Is(err, ErrNonFinite) {
		t.Fatalf("a NaN gradient: %v, want ErrNonFinite", err)
	}
	t.Log(err)
	if opt.Steps != steps {
		t.Errorf("the optimizer counted the failed step")
	}
	if err := m.SyncHost(); err != nil {
		t.Fatal(err)
	}
	for i, p := range m.Params.List {
		if !slices.Equal(p.Data, before[i]) {
			t.Fatalf("the failed step changed %s", p.Name)
		}
	}
}

// BenchmarkOmniglotLikeStepDevicePart1 is BenchmarkOmniglotLikeStepDevice
// (whose backbone parameters are resident) with part 1's path: the
// weights up and the gradients down every pass, Adam on the host.
func BenchmarkOmniglotLikeStepDevicePart1(b *testing.B) {
	dev := residentDevice(b)
	UseDevice(dev)
	residentOff = true
	b.Logf("device %s, parameters not resident", DeviceLabel())
	benchStep(b, omniglotLikeConfig(), blobs{way: 5, side: 28})
}

// ResNet-18's convolution weights are resident too: trained with Adam or
// SGD they end where part 1's path ends, bit for bit with double masters
// (the same float32 weights, the same gradient sums in the same order; γ,
// β and the linear layer are updated on the host by both), and what a
// step moves is part 1's traffic less each forward's weights and each
// backward's weight gradients (4 bytes a weight each), plus the norm's
// one scalar; an evaluation then gives part 1's numbers.
func TestResidentResNet(t *testing.T) {
	dev := residentDevice(t)
	src := blobs{way: 3, side: 7}
	for _, o := range []string{"adam", "sgd"} {
		cfg := resnetConfig("metakernel", "")
		cfg.Optimizer, cfg.Momentum, cfg.PsiWeightDecay = o, 0.9, 1e-2
		train := func(resident bool) (*Model, []opencl.Transfers, [][2]int) {
			UseDevice(dev)
			residentOff = !resident
			defer func() { UseDevice(nil); residentOff = false }()
			m, err := NewModel(cfg, src)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			if (m.res != nil) != resident {
				t.Fatalf("resident parameters: %v, want %v", m.res != nil, resident)
			}
			opt := NewOptimizer(m.Cfg, m.Params.List)
			var xs []opencl.Transfers
			var passes [][2]int
			for i := range 4 {
				if m.res != nil {
					m.res.store.Passes()
				}
				before := dev.Transfers()
				if _, err := m.Step(i, opt); err != nil {
					t.Fatal(err)
				}
				after := dev.Transfers()
				xs = append(xs, opencl.Transfers{Writes: after.Writes - before.Writes, WriteBytes: after.WriteBytes - before.WriteBytes,
					Reads: after.Reads - before.Reads, ReadBytes: after.ReadBytes - before.ReadBytes})
				if m.res != nil {
					f, b, _, _ := m.res.store.Passes()
					passes = append(passes, [2]int{f, b})
				}
			}
			if err := m.SyncHost(); err != nil {
				t.Fatal(err)
			}
			return m, xs, passes
		}
		res, rx, passes := train(true)
		ref, px, _ := train(false)
		for i, p := range res.Params.List {
			if !slices.Equal(p.Data, ref.Params.List[i].Data) {
				if !res.res.store.FP64() {
					t.Logf("%s: float32 masters: %s differs from part 1's", o, p.Name)
					continue
				}
				t.Fatalf("%s: %s differs from part 1's after 4 steps", o, p.Name)
			}
		}
		n := int64(0)
		for _, cv := range cfg.ResNet.Convs() {
			n += int64(cv.Out * cv.FanIn())
		}
		norm := int64(8)
		if !res.res.store.FP64() {
			norm = 4
		}
		for i := 1; i < len(rx); i++ { // step 0 uploads the parameters and moments
			f, b := int64(passes[i][0]), int64(passes[i][1])
			want := opencl.Transfers{Writes: px[i].Writes - f, WriteBytes: px[i].WriteBytes - 4*n*f,
				Reads: px[i].Reads - b + 1, ReadBytes: px[i].ReadBytes - 4*n*b + norm}
			t.Logf("%s step %d: %d forward and %d backward passes: resident %+v, part 1 %+v", o, i, f, b, rx[i], px[i])
			if rx[i] != want {
				t.Errorf("%s step %d: the resident step moved %+v, want %+v", o, i, rx[i], want)
			}
		}
		got, err := res.Evaluate(3, 2, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Evaluate(3, 2, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.PerTask, want.PerTask) {
			t.Errorf("%s: the evaluation differs from part 1's: %v, want %v", o, got.PerTask, want.PerTask)
		}
	}
}
