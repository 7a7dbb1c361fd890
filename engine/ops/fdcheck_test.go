package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/mkbench/mkbench/internal/testutil"
)

// The finite-difference check of the small ops and the helpers the op
// tests share.

// fdGrad is the central finite-difference gradient of f w.r.t. every
// element of x (see testutil.CentralDiff).
func fdGrad(x []float64, f func() float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		g[i] = testutil.CentralDiff(x, i, f)
	}
	return g
}

// fdCheckOp checks the gradients of loss = Σ op(inputs)⊙R against central
// finite differences, through a real gorgonia graph and tape machine.
func fdCheckOp(t *testing.T, name string, shapes [][]int, diff []bool, init func(i int, x []float64, rng *rand.Rand),
	op func(in []*G.Node) (*G.Node, error)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 0))
	g := G.NewGraph()
	nodes := make([]*G.Node, len(shapes))
	data := make([][]float64, len(shapes))
	for i, s := range shapes {
		n := 1
		for _, v := range s {
			n *= v
		}
		data[i] = make([]float64, n)
		init(i, data[i], rng)
		nodes[i] = G.NewTensor(g, G.Float64, len(s), G.WithShape(s...), G.WithName(string(rune('a'+i))),
			G.WithValue(tensor.New(tensor.WithShape(s...), tensor.WithBacking(data[i]))))
	}
	out, err := op(nodes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	os := out.Shape()
	rdata := make([]float64, os.TotalSize())
	for i := range rdata {
		rdata[i] = rng.NormFloat64()
	}
	R := G.NewTensor(g, G.Float64, os.Dims(), G.WithShape(os...), G.WithName("R"), G.WithValue(tensor.New(tensor.WithShape(os...), tensor.WithBacking(rdata))))
	loss := G.Must(G.Sum(G.Must(G.HadamardProd(out, R))))
	var lossV G.Value
	G.Read(loss, &lossV)
	var wrt []*G.Node
	for i, d := range diff {
		if d {
			wrt = append(wrt, nodes[i])
		}
	}
	if _, err := G.Grad(loss, wrt...); err != nil {
		t.Fatalf("%s: grad: %v", name, err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(wrt...))
	defer vm.Close()
	eval := func() float64 {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatalf("%s: run: %v", name, err)
		}
		return scalarOf(lossV)
	}
	eval()
	// Read every analytic gradient before the finite-difference runs:
	// gorgonia accumulates gradients across runs of the machine.
	analytic := make([][]float64, len(diff))
	for i, d := range diff {
		if !d {
			continue
		}
		gv, err := nodes[i].Grad()
		if err != nil {
			t.Fatalf("%s: input %d: %v", name, i, err)
		}
		analytic[i] = append([]float64(nil), gv.(*tensor.Dense).Data().([]float64)...)
	}
	for i, d := range diff {
		if !d {
			continue
		}
		an := analytic[i]
		for j := range data[i] {
			num := testutil.CentralDiff(data[i], j, eval)
			if err := math.Abs(num-an[j]) / math.Max(1, math.Abs(num)); err > 1e-6 {
				t.Errorf("%s: d/d input%d[%d]: analytic %.9g, numeric %.9g", name, i, j, an[j], num)
			}
		}
	}
}

func normalInit(_ int, x []float64, rng *rand.Rand) {
	for i := range x {
		x[i] = rng.NormFloat64()
	}
}

// dataOf returns the float64 data of a tensor value (nil for others).
func dataOf(v G.Value) []float64 {
	if d, ok := v.(*tensor.Dense); ok {
		return d.Data().([]float64)
	}
	return nil
}

// scalarOf returns the value of a scalar or the first element of a tensor.
func scalarOf(v G.Value) float64 {
	switch x := v.(type) {
	case *G.F64:
		return float64(*x)
	case *tensor.Dense:
		return x.Data().([]float64)[0]
	}
	return 0
}
