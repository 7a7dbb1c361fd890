package engine

import (
	"fmt"
	"testing"
)

func BenchmarkProbeOneGraph(b *testing.B) {
	for _, v := range Variants {
		b.Run(v, func(b *testing.B) {
			m, _ := NewModel(sineConfig(v), sineLike{})
			defer m.Close()
			c := m.Cfg
			opt := NewOptimizer(m.Cfg, m.Params.List)
			gr, _ := m.graph(shape{T: c.MetaBatch, NS: c.Shot, NQ: c.Query, train: true})
			var grads [][]float64
			step := func(i int) {
				in := m.input(i)
				next := m.State.clone()
				if err := m.run(gr, &in.batch, &in.noise, &next, func() { m.prefetch(i+1, in) }); err != nil {
					b.Fatal(err)
				}
				grads, _ = gr.grads(grads, len(m.Params.List))
				opt.Step(m.Params.List, grads)
				m.State = next
			}
			step(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step(i + 1)
			}
		})
	}
}

func omniLikeConfig() Config {
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

func BenchmarkProbeOmni(b *testing.B) {
	m, _ := NewModel(omniLikeConfig(), blobs{way: 5, side: 28})
	defer m.Close()
	opt := NewOptimizer(m.Cfg, m.Params.List)
	var grads [][]float64
	m.trainStep(0, opt, &grads)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.trainStep(i+1, opt, &grads)
	}
}

func BenchmarkProbeOmniEval(b *testing.B) {
	m, _ := NewModel(omniLikeConfig(), blobs{way: 5, side: 28})
	defer m.Close()
	for i := 0; i < b.N; i++ {
		m.Evaluate(6, 15, 1, 1)
	}
}

func BenchmarkProbeSeededAlone(b *testing.B) {
	m, _ := NewModel(sineConfig("vrf+ctx"), sineLike{})
	defer m.Close()
	opt := NewOptimizer(m.Cfg, m.Params.List)
	var grads [][]float64
	m.trainStep(0, opt, &grads)
	st := m.stages[shape{T: 25, NS: 5, NQ: 10, train: true}]
	for _, k := range []int{0, 1} {
		gs := [][]*graph{st.sums, st.seeded}[k]
		b.Run(fmt.Sprint(k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runGraph(gs[0], 1)
			}
			n, _ := countOps(gs[0])
			b.ReportMetric(float64(n), "ops")
		})
	}
}

func countOps(gr *graph) (int, map[string]int) {
	counts := map[string]int{}
	n := 0
	for _, nd := range gr.g.AllNodes() {
		if nd.Op() == nil {
			continue
		}
		n++
		counts[fmt.Sprintf("%T", nd.Op())]++
	}
	return n, counts
}
