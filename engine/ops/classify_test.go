package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestClassifyOpsGradients(t *testing.T) {
	fdCheckOp(t, "classLogits", [][]int{{4, 3}, {1}, {1}}, []bool{true, true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return ClassLogits(in[0], in[1], in[2]) })
	oneHot := func(i int, x []float64, rng *rand.Rand) {
		if i == 0 {
			normalInit(i, x, rng)
			return
		}
		for r := 0; r < len(x)/3; r++ {
			x[r*3+rng.IntN(3)] = 1
		}
	}
	fdCheckOp(t, "softmaxXent", [][]int{{5, 3}, {5, 3}}, []bool{true, false}, oneHot,
		func(in []*G.Node) (*G.Node, error) { return SoftmaxXent(in[0], in[1]) })
}

func TestSoftmaxXentIsStable(t *testing.T) {
	g := G.NewGraph()
	z := G.NewMatrix(g, G.Float64, G.WithShape(1, 3), G.WithName("z"), G.WithValue(tensorOf([]float64{1000, -1000, 0}, 1, 3)))
	y := G.NewMatrix(g, G.Float64, G.WithShape(1, 3), G.WithName("y"), G.WithValue(tensorOf([]float64{0, 1, 0}, 1, 3)))
	l := G.Must(SoftmaxXent(z, y))
	if got := runRead(t, g, l)[0]; math.Abs(got-2000) > 1e-9 {
		t.Fatalf("loss %v, want 2000", got)
	}
}

func tensorOf(data []float64, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}
