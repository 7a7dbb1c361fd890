package ops_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
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
func BenchmarkConv4Step(b *testing.B) {
	spec := ops.Conv4Omniglot
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
	xd := make([]float64, ops.Conv4Batch*spec.InDim())
	for i := range xd {
		xd[i] = rng.Float64()
	}
	rd := make([]float64, ops.Conv4Batch*spec.OutDim())
	for i := range rd {
		rd[i] = rng.NormFloat64()
	}
	x := G.NewMatrix(g, G.Float64, G.WithShape(ops.Conv4Batch, spec.InDim()), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(ops.Conv4Batch, spec.InDim()), tensor.WithBacking(xd))))
	r := G.NewMatrix(g, G.Float64, G.WithShape(ops.Conv4Batch, spec.OutDim()), G.WithName("R"),
		G.WithValue(tensor.New(tensor.WithShape(ops.Conv4Batch, spec.OutDim()), tensor.WithBacking(rd))))
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
	ops.ConvReport(b, cpu0, ops.ConvFlops(spec, ops.Conv4Batch, true))
}
