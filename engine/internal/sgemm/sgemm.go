package sgemm

import (
	"sync"

	"github.com/mkbench/mkbench/engine/internal/gemmcore"
)

// impl is a set of micro-kernels.
type impl struct {
	name string
	// gemm holds the product's micro-kernels (16- and 8-column panels)
	// and, if not nil, gemm.Transpose8, which packs with 8×8 transposes
	// (see transpose8AVX) for the products and Transpose alike.
	gemm gemmcore.Kernels[float32]
	// Element-wise kernels over n (a multiple of 8) elements, or nil; see
	// vec.go for their meaning.
	exp, tanh    func(dst, src *float32, n int)
	coupling     func(y, x, o, t, s, ld *float32, n int)
	couplingGrad func(gs, gt, g, x, s, gl *float32, n int)
	rowSums      func(dst, src *float32, rows, cols, ld int)
	toFloat32    func(dst *float32, ldd int, src *float64, lds, rows, cols int)
	toFloat64    func(dst *float64, ldd int, src *float32, lds, rows, cols int)
	addToFloat64 func(dst *float64, src *float32, n int)
	// Pooling kernels over n (a multiple of 8) elements, or nil; see
	// pool.go.
	maxPool4 func(out *float32, arg *uint8, a, b, c, d *float32, n int)
	unpool4  func(a, b, c, d, gv, out *float32, arg *uint8, scale float32, n int)
	// maskedMaxPool4 is maxPool4 after dropout masks per cell.
	maskedMaxPool4 func(out *float32, arg *uint8, a, b, c, d, ma, mb, mc, md *float32, n int)
	// bernoulli fills n (a multiple of 16) mask elements, or is nil; see
	// mask.go.
	bernoulli func(m *float32, key uint64, thr uint32, n int)
	// Winograd tile kernels over the leading n (a multiple of 8) channels,
	// or nil; see wino.go.
	winoIn      func(v *float32, ldv int, src *float32, lds, c, n int)
	winoOutPool func(out *float32, arg *uint8, m *float32, ldm int, bias *float32, alpha float32, mask *float32, nmask, flags, n int)
	winoGradOut func(dm *float32, ldm int, db, gv, out *float32, arg *uint8, alpha float32, n int)
	winoInT     func(dst *float32, ldd int, dv *float32, ldv, c, n int)
	winoOut     func(dst *float32, ldd int, m *float32, ldm, c, flags, n int)
}

var (
	goImpl = impl{name: "go", gemm: gemmcore.GoKernels[float32]()}
	// impls lists the kernel sets this CPU can run, best first; active is
	// the one in use (tests switch it to cover every set).
	impls  = detect()
	active = impls[0]
)

// Kernel names the micro-kernel in use: "avx512", "avx2" or "go".
func Kernel() string { return active.name }

// Epilogue is work fused into the store of a product: a row bias, ReLU
// and a zero mask, applied in that order; see gemmcore.Epilogue.
type Epilogue = gemmcore.Epilogue[float32]

// Workspace holds the packing buffers of a product. The zero value is ready
// to use; buffers grow to the largest product seen and are then reused, so a
// caller that keeps a Workspace per goroutine allocates nothing in steady
// state. A Workspace must not be used by two goroutines at once.
type Workspace struct {
	core gemmcore.Workspace[float32]
}

var pool = sync.Pool{New: func() any { return new(Workspace) }}

// Gemm computes C = alpha·op(A)·op(B) + beta·C with a workspace from an
// internal pool; see Workspace.Gemm.
func Gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	w := pool.Get().(*Workspace)
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
	pool.Put(w)
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C, where op(A) is m×k and
// op(B) is k×n, all row-major: op(A) = A (stored m×k, row stride lda) or, if
// tA, Aᵀ (A stored k×m); likewise for B with tB. C is m×n with row stride
// ldc. With beta == 0, C is not read (NaNs in it are overwritten), and with
// alpha == 0 or k == 0 neither A nor B is read, as in BLAS. It panics on
// inconsistent sizes.
func (w *Workspace) Gemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	w.GemmEpilogue(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Epilogue{})
}

// GemmEpilogue is Gemm followed by the element-wise epilogue ep, fused into
// the store of each tile.
func (w *Workspace) GemmEpilogue(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, ep Epilogue) {
	w.core.GemmEpilogue(&active.gemm, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &ep)
}
