package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine/task"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// conv4Omniglot is ψ of the Omniglot presets, and conv4Batch a meta-batch's
// worth of images.
var conv4Omniglot = ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}

const conv4Batch = 80

// convFlops counts the multiply-adds (×2) of the three products per block
// for N images: forward, weight gradient and (past the first block, whose
// input is data) input gradient.
func convFlops(s ConvSpec, N int, backward bool) float64 {
	var f float64
	for l, ly := range s.layers() {
		prod := 2 * float64(N*ly.p*s.Filters*9*ly.cin)
		f += prod
		if backward {
			f += prod
			if l > 0 {
				f += prod
			}
		}
	}
	return f
}

// BenchmarkConv4Step times one training step of Conv-4 on 80 Omniglot-sized
// images through a gorgonia tape machine: forward with dropout, backward to
// every weight and bias, and an Adam update of the engine's optimizer. The
// loss is Σ features ⊙ R, so nearly all the time is the extractor's.
func BenchmarkConv4Step(b *testing.B) {
	spec := conv4Omniglot
	net, err := NewConvNet(spec)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	ws, bs := net.Params(rng)
	params := append(append([]*Param{}, ws...), bs...)
	g := G.NewGraph()
	xd := make([]float64, conv4Batch*spec.InDim())
	for i := range xd {
		xd[i] = rng.Float64()
	}
	rd := make([]float64, conv4Batch*spec.OutDim())
	for i := range rd {
		rd[i] = rng.NormFloat64()
	}
	x := G.NewMatrix(g, G.Float64, G.WithShape(conv4Batch, spec.InDim()), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(conv4Batch, spec.InDim()), tensor.WithBacking(xd))))
	r := G.NewMatrix(g, G.Float64, G.WithShape(conv4Batch, spec.OutDim()), G.WithName("R"),
		G.WithValue(tensor.New(tensor.WithShape(conv4Batch, spec.OutDim()), tensor.WithBacking(rd))))
	var nodes []*G.Node
	for _, p := range params {
		val := tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(p.Data))
		nodes = append(nodes, G.NewTensor(g, G.Float64, len(p.Shape), G.WithShape(p.Shape...), G.WithName(p.Name), G.WithValue(val)))
	}
	out, err := net.Apply(x, nodes[:spec.Blocks], nodes[spec.Blocks:])
	if err != nil {
		b.Fatal(err)
	}
	prod, err := G.HadamardProd(out, r)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := G.Sum(prod)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := G.Grad(loss, nodes...); err != nil {
		b.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(nodes...))
	defer vm.Close()
	opt := NewOptimizer(Config{Optimizer: "adam", LR: 1e-3}, params)
	grads := make([][]float64, len(params))
	step := func(i int) {
		net.SetStep(uint64(i), true)
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
		for j, n := range nodes {
			gv, err := n.Grad()
			if err != nil {
				b.Fatal(err)
			}
			d := gv.Data().([]float64)
			grads[j] = task.Grow(grads[j], len(d))
			copy(grads[j], d)
			clear(d)
		}
		if _, err := opt.Step(params, grads); err != nil {
			b.Fatal(err)
		}
	}
	step(0)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	i := 0
	for b.Loop() {
		i++
		step(i)
	}
	convReport(b, cpu0, convFlops(spec, conv4Batch, true))
}

// convReport adds the throughput of N-image passes and, where the process
// CPU time is known, CPU milliseconds per pass (all cores together).
func convReport(b *testing.B, cpu0 time.Duration, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu0 > 0 {
		b.ReportMetric(float64(convCPUTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

// convBenchKernel returns a kernel with its buffers sized, and a problem of
// conv4Batch images.
func convBenchKernel(b *testing.B) (*ConvKernel, *convProblem) {
	k, err := NewConvKernel(conv4Omniglot)
	if err != nil {
		b.Fatal(err)
	}
	p := newConvProblem(conv4Omniglot, conv4Batch, 1)
	return k, p
}

// BenchmarkConv4Forward times the evaluation forward pass (no dropout) of
// 80 images on the plain kernel.
func BenchmarkConv4Forward(b *testing.B) {
	k, p := convBenchKernel(b)
	out := p.forward(b, k, 0, false)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	for b.Loop() {
		if err := k.Forward(p.N, p.x, p.ws, p.bs, 0, false, out); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, convFlops(conv4Omniglot, conv4Batch, false))
}

// BenchmarkConv4Kernel times a training forward and backward pass of the
// plain kernel (BenchmarkConv4Step without gorgonia and Adam).
func BenchmarkConv4Kernel(b *testing.B) {
	k, p := convBenchKernel(b)
	out, gws, gbs := p.run(b, k, 0, true)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	seed := uint64(0)
	for b.Loop() {
		seed++
		if err := k.Forward(p.N, p.x, p.ws, p.bs, seed, true, out); err != nil {
			b.Fatal(err)
		}
		if err := k.Backward(p.r, gws, gbs); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, convFlops(conv4Omniglot, conv4Batch, true))
}
