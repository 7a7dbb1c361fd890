package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestDenseGradients(t *testing.T) {
	for _, act := range []Activation{ActNone, ActReLU, ActELU, ActSoftBound} {
		for _, diffX := range []bool{true, false} {
			fdCheckOp(t, "dense", [][]int{{5, 3}, {3, 4}, {1, 4}}, []bool{diffX, true, true}, normalInit,
				func(in []*G.Node) (*G.Node, error) { return Dense(in[0], in[1], in[2], act, diffX) })
		}
	}
}

// Dense equals gorgonia's own composition of the layer.
func TestDenseMatchesGorgonia(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	val := func(s ...int) *tensor.Dense {
		x := tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float64))
		for i := range x.Data().([]float64) {
			x.Data().([]float64)[i] = 2 * rng.NormFloat64()
		}
		return x
	}
	for _, act := range []Activation{ActNone, ActReLU, ActELU, ActSoftBound} {
		g := G.NewGraph()
		x := G.NewTensor(g, G.Float64, 2, G.WithShape(7, 3), G.WithValue(val(7, 3)))
		w := G.NewTensor(g, G.Float64, 2, G.WithShape(3, 5), G.WithValue(val(3, 5)))
		b := G.NewTensor(g, G.Float64, 2, G.WithShape(1, 5), G.WithValue(val(1, 5)))
		got := G.Must(Dense(x, w, b, act, true))
		ref := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
		switch act {
		case ActReLU:
			ref = G.Must(G.Rectify(ref))
		case ActELU:
			// ELU(x) = ReLU(x) + min(eˣ − 1, 0) = ReLU(x) − ReLU(1 − eˣ).
			one := G.NewConstant(1.0)
			ref = G.Must(G.Sub(G.Must(G.Rectify(ref)), G.Must(G.Rectify(G.Must(G.Sub(one, G.Must(G.Exp(ref))))))))
		case ActSoftBound:
			B := G.NewConstant(SoftBound)
			ref = G.Must(G.HadamardProd(B, G.Must(G.Tanh(G.Must(G.HadamardDiv(ref, B))))))
		}
		var gv, rv G.Value
		G.Read(got, &gv)
		G.Read(ref, &rv)
		vm := G.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		vm.Close()
		a, r := dataOf(gv), dataOf(rv)
		for i := range r {
			if math.Abs(a[i]-r[i]) > 1e-12*math.Max(1, math.Abs(r[i])) {
				t.Fatalf("Activation %d, element %d: %v, gorgonia %v", act, i, a[i], r[i])
			}
		}
	}
}
