package ops

import (
	"fmt"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// bmmDims are the sizes of op(a[t])·op(b[t]): op(a) is m×k, op(b) k×n.
type bmmDims struct{ T, m, k, n, lda, ldb int }

func bmmShape(a, b tensor.Shape, transA, transB bool) (bmmDims, error) {
	d := bmmDims{T: a[0], m: a[1], k: a[2], lda: a[2]}
	if transA {
		d.m, d.k = a[2], a[1]
	}
	kb, n := b[1], b[2]
	if transB {
		kb, n = b[2], b[1]
	}
	d.n, d.ldb = n, b[2]
	if b[0] != d.T || kb != d.k {
		return d, fmt.Errorf("cannot multiply %v (transposed %v) by %v (transposed %v)", a, transA, b, transB)
	}
	return d, nil
}

func blasTrans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// BatchedMatMul returns op(a[t])·op(b[t]) for every t, op transposing
// where asked: a (T,m,k) or (T,k,m), b (T,k,n) or (T,n,k) → (T,m,n).
//
// It replaces gorgonia's BatchedMatMul, which slices a fresh header for
// every task and matrix and allocates its output and each gradient every
// step: on the sine meta-batch, where each product is a few thousand
// flops, that bookkeeping cost more than twice the arithmetic. The tasks
// are spread over p's workers.
func BatchedMatMul(p *Pool, a, b *G.Node, transA, transB bool) (*G.Node, error) {
	tA, tB := blasTrans(transA), blasTrans(transB)
	return newKernelOp(kernelOp{
		name: fmt.Sprintf("bmm%v%v", transA, transB), inDims: []int{3, 3}, outDims: 3, diff: []bool{true, true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			d, err := bmmShape(s[0], s[1], transA, transB)
			return tensor.Shape{d.T, d.m, d.n}, err
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			d, _ := bmmShape(s[0], s[1], transA, transB)
			sa, sb, sc := d.m*d.k, d.k*d.n, d.m*d.n
			p.For(d.T, float64(2*d.T*sc*d.k), func(t int) {
				gemm(tA, tB, d.m, d.n, d.k, 1, in[0][t*sa:], d.lda, in[1][t*sb:], d.ldb, 0, out[t*sc:(t+1)*sc], d.n)
			})
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			d, _ := bmmShape(s[0], s[1], transA, transB)
			sa, sb, sc := d.m*d.k, d.k*d.n, d.m*d.n
			p.For(d.T, float64(4*d.T*sc*d.k), func(t int) {
				a, b, gt := in[0][t*sa:], in[1][t*sb:], g[t*sc:]
				da, db := gr[0][t*sa:(t+1)*sa], gr[1][t*sb:(t+1)*sb]
				// d op(A) = G·op(B)ᵀ and d op(B) = op(A)ᵀ·G, each stored
				// the way its input is (transposed when it was).
				if transA {
					gemm(tB, blas.Trans, d.k, d.m, d.n, 1, b, d.ldb, gt, d.n, 0, da, d.m)
				} else {
					gemm(blas.NoTrans, blasTrans(!transB), d.m, d.k, d.n, 1, gt, d.n, b, d.ldb, 0, da, d.k)
				}
				if transB {
					gemm(blas.Trans, tA, d.n, d.k, d.m, 1, gt, d.n, a, d.lda, 0, db, d.k)
				} else {
					gemm(blasTrans(!transA), blas.NoTrans, d.k, d.n, d.m, 1, a, d.lda, gt, d.n, 0, db, d.n)
				}
			})
		},
	}).apply(a, b)
}

// gemm computes C = alpha·op(A)·op(B) + beta·C on row-major blocks.
func gemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	dgemm.Gemm(tA == blas.Trans, tB == blas.Trans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
