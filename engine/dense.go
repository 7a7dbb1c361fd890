package engine

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/task"
)

// activation is the element-wise function a Dense layer applies.
type activation int

const (
	actNone      activation = iota
	actReLU                 // max(x, 0)
	actELU                  // x > 0 ? x : eˣ − 1
	actSoftBound            // logVarBound·tanh(x / logVarBound)
)

// Dense is act(x·W + b) for x (n, in), W (in, out), b (1, out) as one op.
// Built from gorgonia's MatMul, BroadcastAdd and activation it takes some
// ten graph nodes forward and backward, each with its own allocation and
// dispatch; the model has up to ten such layers, and on the sine sizes
// that per-node cost, not arithmetic, was most of a step. diffX is false
// for layers whose input is data.
func Dense(x, w, b *G.Node, act activation, diffX bool) (*G.Node, error) {
	var pre []float64 // reused scratch: x·W + b before the activation
	return newKernelOp(kernelOp{
		name: "dense", inDims: []int{2, 2, 2}, outDims: 2, diff: []bool{diffX, true, true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			if s[0][1] != s[1][0] || s[2][0] != 1 || s[2][1] != s[1][1] {
				return nil, fmt.Errorf("x %v, W %v and b %v do not match", s[0], s[1], s[2])
			}
			return tensor.Shape{s[0][0], s[1][1]}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			n, k, m := s[0][0], s[0][1], s[1][1]
			dgemm.Gemm(false, false, n, m, k, 1, in[0], k, in[1], m, 0, out, m)
			bias := in[2]
			for i := 0; i < n; i++ {
				row := out[i*m : (i+1)*m : (i+1)*m]
				for j := range row {
					row[j] += bias[j]
				}
				activateRow(act, row)
			}
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			n, k, m := s[0][0], s[0][1], s[1][1]
			pre = task.Grow(pre, n*m)
			activateGradRow(act, pre, g, out)
			if gr[0] != nil {
				dgemm.Gemm(false, true, n, k, m, 1, pre, m, in[1], m, 0, gr[0], k)
			}
			dgemm.Gemm(true, false, k, m, n, 1, in[0], k, pre, m, 0, gr[1], m)
			db := gr[2]
			for i := 0; i < n; i++ {
				for j, v := range pre[i*m : (i+1)*m] {
					db[j] += v
				}
			}
		},
	}).apply(x, w, b)
}

// activateRow applies act to x in place, one loop per activation so that
// the switch is not paid per element (this ran ~10% of a small graph).
func activateRow(act activation, x []float64) {
	switch act {
	case actReLU:
		for j, v := range x {
			x[j] = max(v, 0)
		}
	case actELU:
		for j, v := range x {
			if v <= 0 {
				x[j] = math.Expm1(v)
			}
		}
	case actSoftBound:
		for j, v := range x {
			x[j] = logVarBound * math.Tanh(v/logVarBound)
		}
	}
}

// activateGradRow sets dst = g ⊙ act'(·), the derivative written in terms
// of the outputs y.
func activateGradRow(act activation, dst, g, y []float64) {
	switch act {
	case actReLU:
		for i, v := range y {
			if v > 0 {
				dst[i] = g[i]
			} else {
				dst[i] = 0
			}
		}
	case actELU:
		for i, v := range y {
			if v > 0 {
				dst[i] = g[i]
			} else {
				dst[i] = g[i] * (v + 1)
			}
		}
	case actSoftBound:
		for i, v := range y {
			t := v / logVarBound
			dst[i] = g[i] * (1 - t*t)
		}
	default:
		copy(dst, g)
	}
}
