package ops

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/internal/task"
)

// Activation is the element-wise function a Dense layer applies.
type Activation int

const (
	ActNone      Activation = iota
	ActReLU                 // max(x, 0)
	ActELU                  // x > 0 ? x : eˣ − 1
	ActSoftBound            // SoftBound·tanh(x / SoftBound)
)

// SoftBound is the bound of ActSoftBound, which the model applies to q's
// log-variance: logvar = B·tanh(raw/B) lies in (−B, B).
const SoftBound = 2.0

// Dense is act(x·W + b) for x (n, in), W (in, out), b (1, out) as one op.
// Built from gorgonia's MatMul, BroadcastAdd and activation it takes some
// ten graph nodes forward and backward, each with its own allocation and
// dispatch; the model has up to ten such layers, and on the sine sizes
// that per-node cost, not arithmetic, was most of a step. diffX is false
// for layers whose input is data.
func Dense(x, w, b *G.Node, act Activation, diffX bool) (*G.Node, error) {
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
			DenseForward(out, in[0], in[1], in[2], s[0][0], s[0][1], s[1][1], act)
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			n, k, m := s[0][0], s[0][1], s[1][1]
			pre = task.Grow(pre, n*m)
			ActivateGrad(act, pre, g, out)
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

// DenseForward sets y = act(x·W + b) for the rows of x (rows, k), W (k, m)
// and b (m): the forward kernel of Dense, for callers that run a layer
// outside a graph.
func DenseForward(y, x, w, b []float64, rows, k, m int, act Activation) {
	dgemm.Gemm(false, false, rows, m, k, 1, x, k, w, m, 0, y, m)
	for i := 0; i < rows; i++ {
		row := y[i*m : (i+1)*m : (i+1)*m]
		for j := range row {
			row[j] += b[j]
		}
		Activate(act, row)
	}
}

// Activate applies act to x in place, one loop per activation so that
// the switch is not paid per element (this ran ~10% of a small graph).
func Activate(act Activation, x []float64) {
	switch act {
	case ActReLU:
		for j, v := range x {
			x[j] = max(v, 0)
		}
	case ActELU:
		for j, v := range x {
			if v <= 0 {
				x[j] = math.Expm1(v)
			}
		}
	case ActSoftBound:
		for j, v := range x {
			x[j] = SoftBound * math.Tanh(v/SoftBound)
		}
	}
}

// ActivateGrad sets dst = g ⊙ act'(·), the derivative written in terms of
// the outputs y; dst may be g.
func ActivateGrad(act Activation, dst, g, y []float64) {
	switch act {
	case ActReLU:
		for i, v := range y {
			if v > 0 {
				dst[i] = g[i]
			} else {
				dst[i] = 0
			}
		}
	case ActELU:
		for i, v := range y {
			if v > 0 {
				dst[i] = g[i]
			} else {
				dst[i] = g[i] * (v + 1)
			}
		}
	case ActSoftBound:
		for i, v := range y {
			t := v / SoftBound
			dst[i] = g[i] * (1 - t*t)
		}
	default:
		copy(dst, g)
	}
}
