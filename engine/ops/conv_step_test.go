package ops_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/presets"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The training-step benchmark of Conv-4 runs the engine's optimizer, so it
// lives in an external test package (engine imports ops); export_test.go
// lends it the conv benchmarks' helpers.

// BenchmarkConv4Step times one training step of Conv-4 on 80 Omniglot-sized
// images through a gorgonia tape machine: forward with dropout, backward to
// every weight and bias, and an Adam update of the engine's optimizer. The
// loss is Σ features ⊙ R, so nearly all the time is the extractor's.
func BenchmarkConv4Step(b *testing.B) { benchConvStep(b, ops.Conv4Omniglot, ops.Conv4Batch) }

// BenchmarkConv5Step is BenchmarkConv4Step for the Conv-5 backbone of the
// 84×84 presets (folder-5w1s, mini-5w1s: 84×84×3, five blocks of 64
// filters, keep 0.5, floor pooling) on one of their episodes, 5 ways × (1
// shot + 15 queries) = 80 images; a training iteration runs MetaBatch (8)
// of them. Its PyTorch peer is testdata/torch_conv5.py.
func BenchmarkConv5Step(b *testing.B) {
	p, err := presets.Get("folder-5w1s")
	if err != nil {
		b.Fatal(err)
	}
	c := p.Config
	benchConvStep(b, *c.Conv, c.Way*(c.Shot+c.Query))
}

// benchConvStep times a training step of the network spec on n images.
func benchConvStep(b *testing.B, spec ops.ConvSpec, n int) {
	net, err := ops.NewConvNet(nil, spec)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	// The weights of every block, then the biases, as the model names and
	// initializes them.
	params := make([]*engine.Param, 2*spec.Blocks)
	wd, bd := make([][]float64, spec.Blocks), make([][]float64, spec.Blocks)
	for l := range spec.Blocks {
		params[l] = &engine.Param{Name: fmt.Sprintf("conv%d.w", l), Shape: []int{spec.Filters, spec.FanIn(l)}, Data: make([]float64, spec.Filters*spec.FanIn(l))}
		params[spec.Blocks+l] = &engine.Param{Name: fmt.Sprintf("conv%d.b", l), Shape: []int{spec.Filters}, Data: make([]float64, spec.Filters)}
		wd[l], bd[l] = params[l].Data, params[spec.Blocks+l].Data
	}
	ops.InitConvParams(spec, rng, wd, bd)
	g := G.NewGraph()
	xd := make([]float64, n*spec.InDim())
	for i := range xd {
		xd[i] = rng.Float64()
	}
	rd := make([]float64, n*spec.OutDim())
	for i := range rd {
		rd[i] = rng.NormFloat64()
	}
	x := G.NewMatrix(g, G.Float64, G.WithShape(n, spec.InDim()), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(n, spec.InDim()), tensor.WithBacking(xd))))
	r := G.NewMatrix(g, G.Float64, G.WithShape(n, spec.OutDim()), G.WithName("R"),
		G.WithValue(tensor.New(tensor.WithShape(n, spec.OutDim()), tensor.WithBacking(rd))))
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
	opt := engine.NewOptimizer(engine.Config{Optimizer: "adam", LR: 1e-3}, params)
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
	cpu0 := ops.ConvCPUTime()
	i := 0
	for b.Loop() {
		i++
		step(i)
	}
	ops.ConvReport(b, cpu0, ops.ConvFlops(spec, n, true))
}
