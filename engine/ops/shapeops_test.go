package ops

import (
	"testing"

	G "gorgonia.org/gorgonia"
)

func TestRowsGradients(t *testing.T) {
	fdCheckOp(t, "rows", [][]int{{6, 3}}, []bool{true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return Rows(in[0], 2, 5) })
	// Both halves of one matrix, as the model splits support and query.
	fdCheckOp(t, "rows twice", [][]int{{6, 3}}, []bool{true}, normalInit,
		func(in []*G.Node) (*G.Node, error) {
			a, b := G.Must(Rows(in[0], 0, 2)), G.Must(Rows(in[0], 2, 6))
			return ConcatCols(G.Must(G.Reshape(a, []int{2, 3})), G.Must(G.Reshape(G.Must(Rows(b, 0, 2)), []int{2, 3})))
		})
}

func TestConcatColsGradients(t *testing.T) {
	fdCheckOp(t, "concatCols", [][]int{{4, 3}, {4, 1}, {4, 2}}, []bool{true, true, true}, normalInit,
		func(in []*G.Node) (*G.Node, error) { return ConcatCols(in...) })
}

// The values are gorgonia's Slice and Concat's, which these replace.
func TestShapeOpsMatchGorgonia(t *testing.T) {
	shapes := [][]int{{5, 3}, {5, 2}}
	pairs := []struct {
		name      string
		ours, its func(in []*G.Node) (*G.Node, error)
	}{
		{"rows", func(in []*G.Node) (*G.Node, error) { return Rows(in[0], 1, 4) },
			func(in []*G.Node) (*G.Node, error) { return G.Slice(in[0], G.S(1, 4)) }},
		{"concat", func(in []*G.Node) (*G.Node, error) { return ConcatCols(in[0], in[1]) },
			func(in []*G.Node) (*G.Node, error) { return G.Concat(1, in[0], in[1]) }},
	}
	for _, p := range pairs {
		got, want := evalOp(t, shapes, p.ours), evalOp(t, shapes, p.its)
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, gorgonia %d", p.name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: [%d] = %v, gorgonia %v", p.name, i, got[i], want[i])
			}
		}
	}
	g := G.NewGraph()
	a := G.NewMatrix(g, G.Float64, G.WithShape(3, 2))
	b := G.NewMatrix(g, G.Float64, G.WithShape(4, 2))
	if _, err := ConcatCols(a, b); err == nil {
		t.Error("3 rows beside 4")
	}
	if _, err := Rows(a, 2, 4); err == nil {
		t.Error("rows 2…3 of 3")
	}
}
