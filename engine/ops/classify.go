package ops

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ClassLogits is γ·s + β for the kernel scores s (n, way) = K̃ᵀα of the
// query points and trainable scalars γ, β (1): the authors' output layer
// (γ starts at 1, β at 0; see REFERENCE-NOTES).
func ClassLogits(s, gamma, beta *G.Node) (*G.Node, error) {
	return newKernelOp(kernelOp{
		name: "classLogits", inDims: []int{2, 1, 1}, outDims: 2, diff: []bool{true, true, true},
		shape: func(sh []tensor.Shape) (tensor.Shape, error) {
			if sh[1].TotalSize() != 1 || sh[2].TotalSize() != 1 {
				return nil, fmt.Errorf("gamma %v and beta %v must hold one value", sh[1], sh[2])
			}
			return sh[0].Clone(), nil
		},
		fwd: func(in [][]float64, _ []tensor.Shape, out []float64) {
			g, b := in[1][0], in[2][0]
			for i, v := range in[0] {
				out[i] = g*v + b
			}
		},
		bwd: func(in [][]float64, _ []tensor.Shape, _, gout []float64, gr [][]float64) {
			g := in[1][0]
			var gg, gb float64
			for i, v := range in[0] {
				gr[0][i] = g * gout[i]
				gg += v * gout[i]
				gb += gout[i]
			}
			gr[1][0], gr[2][0] = gg, gb
		},
	}).apply(s, gamma, beta)
}

// SoftmaxXent is the softmax cross-entropy −Σ_c y_c·log softmax(z)_c of
// each row of the logits z (n, way) against the targets y (n, way; one-hot
// or any distribution), computed through log-sum-exp so that large logits
// do not overflow: (n).
func SoftmaxXent(z, y *G.Node) (*G.Node, error) {
	return newKernelOp(kernelOp{
		name: "softmaxXent", inDims: []int{2, 2}, outDims: 1, diff: []bool{true, false},
		shape: func(sh []tensor.Shape) (tensor.Shape, error) {
			if !sh[0].Eq(sh[1]) {
				return nil, fmt.Errorf("logits %v and targets %v differ", sh[0], sh[1])
			}
			return tensor.Shape{sh[0][0]}, nil
		},
		fwd: func(in [][]float64, sh []tensor.Shape, out []float64) {
			w := sh[0][1]
			for i := range out {
				z, y := in[0][i*w:(i+1)*w], in[1][i*w:(i+1)*w]
				lse := logSumExp(z)
				var l float64
				for c, yc := range y {
					if yc != 0 {
						l -= yc * (z[c] - lse)
					}
				}
				out[i] = l
			}
		},
		bwd: func(in [][]float64, sh []tensor.Shape, _, gout []float64, gr [][]float64) {
			w := sh[0][1]
			for i, g := range gout {
				z, y := in[0][i*w:(i+1)*w], in[1][i*w:(i+1)*w]
				lse := logSumExp(z)
				var sy float64
				for _, yc := range y {
					sy += yc
				}
				for c := range z {
					gr[0][i*w+c] = g * (sy*math.Exp(z[c]-lse) - y[c])
				}
			}
		},
	}).apply(z, y)
}

func logSumExp(z []float64) float64 {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, v)
	}
	var s float64
	for _, v := range z {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// Softmax writes softmax(z) to p.
func Softmax(p, z []float64) {
	lse := logSumExp(z)
	for c, v := range z {
		p[c] = math.Exp(v - lse)
	}
}

// Argmax returns the index of the largest element (the first on ties).
func Argmax(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
