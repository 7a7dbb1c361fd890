package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
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

// benchStep times m's training step and reports the live heap afterwards
// and the ops of the step's graphs: gorgonia's cost per op, not the
// arithmetic, dominated the small steps, so a growing op count is a
// regression of its own.
func benchStep(b *testing.B, cfg Config, src task.Source) {
	m, err := NewModel(cfg, src)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	opt := NewOptimizer(m.Cfg, m.Params.List)
	var grads [][]float64
	if _, err := m.trainStep(0, opt, &grads); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.trainStep(i+1, opt, &grads); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
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

// BenchmarkOmniglotLikeStepDevice is BenchmarkOmniglotLikeStep with the
// backbone on the first OpenCL device (the head, flows and optimizer stay
// on the CPU: issue 43's part 1). On PoCL the figure is the path's
// overhead, not a GPU's speed; it is skipped without a platform.
func BenchmarkOmniglotLikeStepDevice(b *testing.B) {
	sel, err := opencl.ParseSelection("opencl")
	if err != nil {
		b.Fatal(err)
	}
	dev, _, err := opencl.Open(sel)
	if err == nil {
		err = opencl.LoadCLBlast()
	}
	if err != nil {
		testutil.OpenCL(b, err)
	}
	UseDevice(dev)
	defer func() { UseDevice(nil); dev.Close() }()
	b.Logf("device %s", DeviceLabel())
	benchStep(b, omniglotLikeConfig(), blobs{way: 5, side: 28})
}
