package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/mkbench/mkbench/engine/task"
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

// BenchmarkSineStep times one training step (forward, backward, Adam) of
// each variant at the sine-5shot preset's sizes.
func BenchmarkSineStep(b *testing.B) {
	for _, v := range Variants {
		b.Run(v, func(b *testing.B) {
			m, err := NewModel(sineConfig(v), sineLike{})
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
		})
	}
}

var sin = math.Sin
