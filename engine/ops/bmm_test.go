package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type bmmCase struct {
	ta, tb bool
	as, bs []int
}

// bmmCases are the four transpositions of a T-task product of an m×k by a
// k×n matrix, with the input shapes each needs.
func bmmCases(T, m, k, n int) []bmmCase {
	var cs []bmmCase
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			c := bmmCase{ta, tb, []int{T, m, k}, []int{T, k, n}}
			if ta {
				c.as = []int{T, k, m}
			}
			if tb {
				c.bs = []int{T, n, k}
			}
			cs = append(cs, c)
		}
	}
	return cs
}

func TestBatchedMatMulGradients(t *testing.T) {
	// op(a) is 3×4 and op(b) 4×5 over 2 tasks.
	for _, c := range bmmCases(2, 3, 4, 5) {
		ta, tb, as, bs := c.ta, c.tb, c.as, c.bs
		fdCheckOp(t, fmt.Sprintf("bmm %v %v", ta, tb), [][]int{as, bs}, []bool{true, true}, normalInit,
			func(in []*G.Node) (*G.Node, error) { return BatchedMatMul(nil, in[0], in[1], ta, tb) })
	}
	// A Gram matrix, the node on both sides: the two gradients add up.
	fdCheckOp(t, "gram", [][]int{{2, 3, 4}}, []bool{true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return BatchedMatMul(nil, in[0], in[0], false, true) })
}

// The values are gorgonia's BatchedMatMul's, which this op replaces.
func TestBatchedMatMulMatchesGorgonia(t *testing.T) {
	for _, c := range bmmCases(3, 2, 6, 4) {
		ta, tb, as, bs := c.ta, c.tb, c.as, c.bs
		got := evalOp(t, [][]int{as, bs}, func(in []*G.Node) (*G.Node, error) { return BatchedMatMul(nil, in[0], in[1], ta, tb) })
		want := evalOp(t, [][]int{as, bs}, func(in []*G.Node) (*G.Node, error) { return G.BatchedMatMul(in[0], in[1], ta, tb) })
		for i := range want {
			if d := got[i] - want[i]; d > 1e-12 || d < -1e-12 {
				t.Fatalf("trans %v %v: [%d] = %v, gorgonia %v", ta, tb, i, got[i], want[i])
			}
		}
	}
	if _, err := BatchedMatMul(nil, G.NewTensor(G.NewGraph(), G.Float64, 3, G.WithShape(2, 3, 4)),
		G.NewTensor(G.NewGraph(), G.Float64, 3, G.WithShape(2, 5, 4)), false, false); err == nil {
		t.Fatal("3×4 by 5×4 multiplied")
	}
}

// evalOp runs op on inputs of the given shapes, filled from a fixed seed,
// and returns a copy of its output.
func evalOp(t *testing.T, shapes [][]int, op func(in []*G.Node) (*G.Node, error)) []float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 0))
	g := G.NewGraph()
	in := make([]*G.Node, len(shapes))
	for i, s := range shapes {
		v := tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float64))
		normalInit(i, v.Float64s(), rng)
		in[i] = G.NewTensor(g, G.Float64, len(s), G.WithShape(s...), G.WithValue(v))
	}
	out, err := op(in)
	if err != nil {
		t.Fatal(err)
	}
	return runRead(t, g, out)
}

// runRead runs g once and returns a copy of n's value.
func runRead(t *testing.T, g *G.ExprGraph, n *G.Node) []float64 {
	t.Helper()
	var v G.Value
	G.Read(n, &v)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	return append([]float64(nil), miscValueData(t, v)...)
}
