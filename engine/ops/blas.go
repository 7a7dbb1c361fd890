package ops

import (
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
)

// fastBLAS is gonum's BLAS with Dgemm served by our AVX2 kernel. gorgonia's
// matrix products (the dense layers, the batched kernel products) and
// gonum's blas64 both go through it: gonum's pure-Go Dgemm managed 3–6
// GFLOP/s on the engine's small shapes and was 40% of a vrf+ctx step.
type fastBLAS struct{ gonum.Implementation }

// Dgemm computes C = alpha·op(A)·op(B) + beta·C, row-major, as BLAS does.
func (fastBLAS) Dgemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	dgemm.Gemm(tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

var blasOnce sync.Once

// UseFastBLAS installs fastBLAS as gonum's and gorgonia's BLAS. Installing
// it is process-wide by nature (both libraries keep one BLAS), so it is an
// explicit call rather than a side effect of importing the engine: NewModel
// makes it before it builds a graph, and a program may make it earlier.
// It changes speed and rounding, never shapes; every model run in a process
// sees the same BLAS, so equal seeds give equal numbers.
func UseFastBLAS() {
	blasOnce.Do(func() {
		blas64.Use(fastBLAS{})
		G.Use(fastBLAS{})
	})
}
