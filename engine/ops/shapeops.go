package ops

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Rows and ConcatCols stand in for gorgonia's Slice and Concat on the
// matrices of the model. gorgonia's go through generic strided iterators
// in both directions (the gradient of a concatenation is a slice per input,
// and of a slice an increment into a zeroed copy), which on the sine step
// cost more than the dense layers they feed; these copy whole rows.

// Rows returns rows lo…hi−1 of the matrix x.
func Rows(x *G.Node, lo, hi int) (*G.Node, error) {
	return newKernelOp(kernelOp{
		name: fmt.Sprintf("rows[%d:%d]", lo, hi), inDims: []int{2}, outDims: 2, diff: []bool{true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			if lo < 0 || hi <= lo || hi > s[0][0] {
				return nil, fmt.Errorf("rows %d…%d of a %v matrix", lo, hi-1, s[0])
			}
			return tensor.Shape{hi - lo, s[0][1]}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			c := s[0][1]
			copy(out, in[0][lo*c:hi*c])
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			c := s[0][1]
			copy(gr[0][lo*c:hi*c], g) // the other rows stay zero
		},
	}).apply(x)
}

// ConcatCols returns the matrices xs, which have equal row counts, side by
// side.
func ConcatCols(xs ...*G.Node) (*G.Node, error) {
	dims, diff := make([]int, len(xs)), make([]bool, len(xs))
	for i := range xs {
		dims[i], diff[i] = 2, true
	}
	// each visits every row's pieces in order: the forward copies them out,
	// the backward back.
	each := func(s []tensor.Shape, fn func(i, r, at, c int)) {
		rows, width := s[0][0], 0
		for _, si := range s {
			width += si[1]
		}
		for r := 0; r < rows; r++ {
			at := r * width
			for i, si := range s {
				fn(i, r, at, si[1])
				at += si[1]
			}
		}
	}
	return newKernelOp(kernelOp{
		name: "concatCols", inDims: dims, outDims: 2, diff: diff,
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			width := 0
			for _, si := range s {
				if si[0] != s[0][0] {
					return nil, fmt.Errorf("cannot put a %v matrix beside a %v one", si, s[0])
				}
				width += si[1]
			}
			return tensor.Shape{s[0][0], width}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			each(s, func(i, r, at, c int) { copy(out[at:at+c], in[i][r*c:(r+1)*c]) })
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			each(s, func(i, r, at, c int) { copy(gr[i][r*c:(r+1)*c], g[at:at+c]) })
		},
	}).apply(xs...)
}
