package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/task"
)

// sineLike is a stand-in for datasets.Sine (engine tests cannot import
// datasets, which imports engine): same distribution of tasks.
type sineLike struct{}

func (sineLike) Name() string             { return "sine" }
func (sineLike) InDim() int               { return 1 }
func (sineLike) OutDim() int              { return 1 }
func (sineLike) Domain() (lo, hi float64) { return -5, 5 }
func (s sineLike) Sample(rng *rand.Rand, b *task.Batch) {
	for t := 0; t < b.T; t++ {
		a, w, ph := 0.1+4.9*rng.Float64(), 0.8+0.4*rng.Float64(), 3.14159*rng.Float64()
		for i := 0; i < b.NS; i++ {
			b.XS[t*b.NS+i] = -5 + 10*rng.Float64()
			b.YS[t*b.NS+i] = a * sin(w*b.XS[t*b.NS+i]+ph)
		}
		for i := 0; i < b.NQ; i++ {
			b.XQ[t*b.NQ+i] = -5 + 10*rng.Float64()
			b.YQ[t*b.NQ+i] = a * sin(w*b.XQ[t*b.NQ+i]+ph)
		}
	}
}
func (s sineLike) SampleCurve(rng *rand.Rand, b *task.Batch, grid []float64) {
	a, w, ph := 0.1+4.9*rng.Float64(), 0.8+0.4*rng.Float64(), 3.14159*rng.Float64()
	for i := 0; i < b.NS; i++ {
		b.XS[i] = -5 + 10*rng.Float64()
		b.YS[i] = a * sin(w*b.XS[i]+ph)
	}
	for i, x := range grid {
		b.XQ[i], b.YQ[i] = x, a*sin(w*x+ph)
	}
}

// sineConfig mirrors the sine-5shot preset (presets imports engine, so the
// engine's tests restate it).
func sineConfig(variant string) Config {
	c := Config{
		FlowLayers: 4, FlowHidden: 128,
		EmbedHidden: []int{40, 40}, InferHidden: 40, PriorHidden: 40, Bases: 128,
		KLWeight: 1e-4, LambdaInit: 0.1, Optimizer: "adam", LR: 1e-3, Momentum: 0.9,
		MetaBatch: 25, Shot: 5, Query: 10, Iters: 100, Seed: 1,
		LogEvery: 10, SnapshotEvery: 100, EvalTasks: 100, EvalQuery: 100, EvalSamples: 2,
	}
	if err := c.ApplyVariant(variant, 4); err != nil {
		panic(err)
	}
	return c
}

// omniglotLikeConfig mirrors the omniglot-5w1s preset (Conv-4 on 28×28
// images, 5-way 1-shot, metakernel) for blobs tasks of the same size, so
// the engine's benchmarks time the classification step without the data
// set.
func omniglotLikeConfig() Config {
	c := sineConfig("metakernel")
	c.Conv = &ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	c.EmbedHidden = nil
	c.Way, c.Shot, c.Query = 5, 1, 15
	c.InferHidden, c.InferLayers, c.PriorHidden, c.FlowHidden, c.Bases = 256, 3, 256, 128, 780
	c.MetaBatch = 6
	c.KLWeight = 0.01
	c.EvalQuery, c.EvalSamples = 15, 1
	return c
}

// BenchmarkSineStep times one training step (forward, backward, Adam) of
// each variant at the sine-5shot preset's sizes.
func BenchmarkSineStep(b *testing.B) {
	for _, v := range Variants {
		b.Run(v, func(b *testing.B) { benchStep(b, sineConfig(v), sineLike{}) })
	}
}

// BenchmarkOmniglotLikeStep times one training step at the omniglot-5w1s
// sizes (presets' BenchmarkOmniglotStep runs the real data set).
func BenchmarkOmniglotLikeStep(b *testing.B) {
	benchStep(b, omniglotLikeConfig(), blobs{way: 5, side: 28})
}

// mdLikeShapes are the episodes BenchmarkMetaDatasetLikeStep cycles
// through: Meta-Dataset's kind (ways and shots vary, classes uneven),
// smaller than its largest (50 ways, 500 support images) so that PoCL
// runs a step in tens of seconds. Each is {way, support images of each
// class…, queries a class}.
var mdLikeShapes = [][]int{
	{5, 1, 2, 1, 3, 1, 2},
	{8, 2, 1, 1, 2, 3, 1, 2, 2, 2},
	{6, 4, 3, 5, 2, 4, 3, 3},
}

// mdLike is a task.Varying source of 84×84 RGB images of mdLikeShapes'
// episodes, one after another (datasets.MetaDataset's episodes, whose
// sampler needs the converted records, drawn at these shapes): every
// episode has another shape than the one before, so each step builds its
// graphs, as Meta-Dataset's steps do (the model keeps one varying shape).
type mdLike struct{ next *atomic.Uint64 }

func (mdLike) Name() string { return "metadataset-like" }
func (mdLike) InDim() int   { return 3 * mdLikeSide * mdLikeSide }
func (mdLike) OutDim() int {
	w := 0
	for _, s := range mdLikeShapes {
		w = max(w, s[0])
	}
	return w
}
func (mdLike) Sample(*rand.Rand, *task.Batch) { panic("mdLike: Sample") }

const mdLikeSide = 84

func (s mdLike) SampleVarying(rng *rand.Rand, b *task.Batch) {
	sh := mdLikeShapes[(s.next.Add(1)-1)%uint64(len(mdLikeShapes))]
	way := sh[0]
	sampleUneven(rng, b, sh[1:1+way], sh[1+way], s.InDim())
}

// mdLikeConfig mirrors the metadataset preset (the Omniglot heads,
// metakernel, on ResNet-18 ψ at 84×84, varying episodes one a step) with
// the bounds of mdLikeShapes.
func mdLikeConfig() Config {
	c := omniglotLikeConfig()
	r := ops.ResNet18(3, mdLikeSide, mdLikeSide)
	c.Conv, c.Backbone, c.ResNet = nil, BackboneResNet18, &r
	c.Varying, c.MetaBatch = true, 1
	c.Way, c.Shot, c.Query = 0, 0, 0
	for _, sh := range mdLikeShapes {
		ns := 0
		for _, k := range sh[1 : 1+sh[0]] {
			ns += k
		}
		c.Way, c.Shot, c.Query = max(c.Way, sh[0]), max(c.Shot, ns), max(c.Query, sh[1+sh[0]])
	}
	c.EvalQuery = c.Query
	return c
}

// BenchmarkMetaDatasetLikeStep times one training step of the metadataset
// preset's model (ResNet-18 at 84×84) on episodes of varying ways and
// shots (mdLikeShapes in turn, a graph built each step as on
// Meta-Dataset). Use -benchtime Nx with N a multiple of 3, the shapes.
func BenchmarkMetaDatasetLikeStep(b *testing.B) {
	benchStepOn(b, mdLikeConfig(), mdLike{new(atomic.Uint64)}, nil, len(mdLikeShapes))
}

// benchStep times cfg's training step on src, after one untimed step
// (see benchStepOn).
func benchStep(b *testing.B, cfg Config, src task.Source) { benchStepOn(b, cfg, src, nil, 1) }

// benchStepOn times m's training step, after warm steps untimed (a varying
// source's shapes, a device's first compilations), and reports the live
// heap afterwards and the ops of the step's graphs: gorgonia's cost per
// op, not the arithmetic, dominated the small steps, so a growing op
// count is a regression of its own. With dev (the engine's device) it
// also reports what the device measured per step: the copies' time
// (xfer-ms/op), the bytes they moved (xfer-B/op), the time of the kernels
// (kernel-ms/op) and of CLBlast's products (sgemm-ms/op, each from the
// end of the work before it: see opencl.Timing), so that the share of a
// step the copies take is read off one run; timing the kernels costs an
// event each, which ns/op includes.
func benchStepOn(b *testing.B, cfg Config, src task.Source, dev *opencl.Device, warm int) {
	m, err := NewModel(cfg, src)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	opt := NewOptimizer(m.Cfg, m.Params.List)
	var grads [][]float64
	for i := range warm {
		if _, err := m.trainStep(i, opt, &grads); err != nil {
			b.Fatal(err)
		}
	}
	var t0 opencl.Timing
	var x0 opencl.Transfers
	if dev != nil {
		dev.ProfileKernels(true)
		defer dev.ProfileKernels(false)
		if t0, err = dev.Timing(); err != nil {
			b.Fatal(err)
		}
		x0 = dev.Transfers()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.trainStep(warm+i, opt, &grads); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if dev != nil {
		t1, err := dev.Timing()
		if err != nil {
			b.Fatal(err)
		}
		t, x1, n := t1.Sub(t0), dev.Transfers(), float64(b.N)
		b.ReportMetric(float64(t.TransferNS())/1e6/n, "xfer-ms/op")
		b.ReportMetric(float64(x1.WriteBytes-x0.WriteBytes+x1.ReadBytes-x0.ReadBytes)/n, "xfer-B/op")
		b.ReportMetric(float64(t.KernelNS)/1e6/n, "kernel-ms/op")
		b.ReportMetric(float64(t.BlasNS)/1e6/n, "sgemm-ms/op")
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heapMB")
	ops := 0
	for _, st := range m.stages {
		for _, gs := range [][]*graph{st.tasks, st.sums, st.seeded} {
			for _, gr := range gs {
				ops += gr.ops()
			}
		}
	}
	b.ReportMetric(float64(ops), "ops")
}

// ops counts the op nodes of gr (inputs and parameters are not ops).
func (gr *graph) ops() int {
	n := 0
	for _, nd := range gr.g.AllNodes() {
		if nd.Op() != nil {
			n++
		}
	}
	return n
}

// TestOpCounts bounds the number of op nodes of each task stage of the
// sine training step, which the fused ops (Dense, Rows, ConcatCols,
// BatchedMatMul, the ELBO's terms) keep small: a change that adds nodes to
// every step should be deliberate, and update the bounds.
func TestOpCounts(t *testing.T) {
	most := map[string]int{"rbf": 69, "rff": 69, "vrf": 160, "vrf+ctx": 163, "vrf+cnf": 194, "metakernel": 197}
	for _, v := range Variants {
		m, err := NewModel(sineConfig(v), sineLike{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		c := m.Cfg
		st, err := m.staged(shape{T: c.MetaBatch, NS: c.SupportPoints(), NQ: c.QueryPoints(), train: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, gr := range st.tasks {
			if n := gr.ops(); n > most[v] {
				t.Errorf("%s: %d ops in a task stage, at most %d before", v, n, most[v])
			}
		}
	}
}

var sin = math.Sin

// BenchmarkOmniglotLikeStepDevice is BenchmarkOmniglotLikeStep on the
// first OpenCL device (what runs there: docs/gpu.md), with what the device
// measured per step beside ns/op (see benchStep). On PoCL the figure is
// the path's overhead, not a GPU's speed; it is skipped without a
// platform.
func BenchmarkOmniglotLikeStepDevice(b *testing.B) {
	dev := benchDevice(b)
	benchStepOn(b, omniglotLikeConfig(), blobs{way: 5, side: 28}, dev, 1)
}

// BenchmarkMetaDatasetLikeStepDevice is BenchmarkMetaDatasetLikeStep on
// the first OpenCL device, reported as BenchmarkOmniglotLikeStepDevice.
func BenchmarkMetaDatasetLikeStepDevice(b *testing.B) {
	dev := benchDevice(b)
	benchStepOn(b, mdLikeConfig(), mdLike{new(atomic.Uint64)}, dev, len(mdLikeShapes))
}

// benchDevice is testDeviceInUse for a benchmark, which logs the device.
func benchDevice(b *testing.B) *opencl.Device {
	dev := testDeviceInUse(b)
	b.Logf("device %s", DeviceLabel())
	return dev
}
