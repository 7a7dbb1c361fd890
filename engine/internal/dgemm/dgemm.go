package dgemm

import (
	"sync"

	"github.com/mkbench/mkbench/engine/internal/gemmcore"
)

// impl is a set of micro-kernels: gemm.Full computes 8-column panels,
// gemm.Half 4-column ones.
type impl struct {
	name string
	gemm gemmcore.Kernels[float64]
}

var (
	goImpl = impl{name: "go", gemm: gemmcore.GoKernels[float64]()}
	// impls lists the kernel sets this CPU can run, best first; active is
	// the one in use (tests switch it to cover every set).
	impls  = detect()
	active = impls[0]
)

// Kernel names the micro-kernel in use: "avx2" or "go".
func Kernel() string { return active.name }

// Epilogue is work fused into the store of a product: a row bias, ReLU
// and a zero mask, applied in that order; see gemmcore.Epilogue.
type Epilogue = gemmcore.Epilogue[float64]

// Workspace holds the packing buffers of a product. The zero value is ready
// to use; buffers grow to the largest product seen and are then reused, so a
// caller that keeps a Workspace per goroutine allocates nothing in steady
// state. A Workspace must not be used by two goroutines at once.
type Workspace struct {
	core gemmcore.Workspace[float64]
}

var pool = sync.Pool{New: func() any { return new(Workspace) }}

// Gemm computes C = alpha·op(A)·op(B) + beta·C with a workspace from an
// internal pool; see Workspace.Gemm.
func Gemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
}

// GemmEpilogue is Workspace.GemmEpilogue with a workspace from an internal
// pool.
func GemmEpilogue(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, ep Epilogue) {
	w := pool.Get().(*Workspace)
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep)
	pool.Put(w)
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C, where op(A) is m×k and
// op(B) is k×n, all row-major: op(A) = A (stored m×k, row stride lda) or, if
// tA, Aᵀ (A stored k×m); likewise for B with tB. C is m×n with row stride
// ldc. With beta == 0, C is not read (NaNs in it are overwritten), and with
// alpha == 0 or k == 0 neither A nor B is read, as in BLAS. It panics on
// inconsistent sizes.
func (w *Workspace) Gemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
}

// GemmEpilogue is Gemm followed by the element-wise epilogue ep, fused into
// the store of each tile.
func (w *Workspace) GemmEpilogue(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int, ep Epilogue) {
	w.core.GemmEpilogue(&active.gemm, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &ep)
}
