//go:build amd64 && !purego

package sgemm

import (
	"golang.org/x/sys/cpu"

	"github.com/mkbench/mkbench/engine/internal/gemmcore"
)

// The assembly micro-kernels (kernel_amd64.s) implement gemmcore.Kernel with
// AVX2 and FMA3: a 6×16 tile lives in 12 YMM registers.

//go:noescape
func kern16AVX2(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)

//go:noescape
func kern8AVX2(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)

// transpose8AVX: see pack_amd64.s.
//
//go:noescape
func transpose8AVX(dst *float32, ldd int, src *float32, lds, rows, nblk int)

// Element-wise kernels: see vec_amd64.s and vec.go.

//go:noescape
func expAVX(dst, src *float32, n int)

//go:noescape
func tanhAVX(dst, src *float32, n int)

//go:noescape
func couplingAVX(y, x, o, t, s, ld *float32, n int)

//go:noescape
func couplingGradAVX(gs, gt, gy, x, s, gl *float32, n int)

//go:noescape
func rowSumsAVX(dst, src *float32, rows, cols, ld int)

//go:noescape
func toFloat32AVX(dst *float32, ldd int, src *float64, lds, rows, cols int)

//go:noescape
func toFloat64AVX(dst *float64, ldd int, src *float32, lds, rows, cols int)

//go:noescape
func addToFloat64AVX(dst *float64, src *float32, n int)

// Pooling kernels: see pool_amd64.s and pool.go.
//
//go:noescape
func maxPool4AVX(out *float32, arg *uint8, a, b, c, d *float32, n int)

//go:noescape
func maskedMaxPool4AVX(out *float32, arg *uint8, a, b, c, d, ma, mb, mc, md *float32, n int)

//go:noescape
func unpool4AVX(a, b, c, d, gv, out *float32, arg *uint8, scale float32, n int)

// bernoulliAVX: see mask_amd64.s and mask.go.
//
//go:noescape
func bernoulliAVX(m *float32, key uint64, thr uint32, n int)

// Winograd tile kernels: see wino_amd64.s and wino.go.
//
//go:noescape
func winoInAVX(v *float32, ldv int, src *float32, lds, c, n int)

//go:noescape
func winoOutPoolAVX(out *float32, arg *uint8, m *float32, ldm int, bias *float32, alpha float32, mask *float32, nmask, flags, n int)

//go:noescape
func winoGradOutAVX(dm *float32, ldm int, db, gv, out *float32, arg *uint8, alpha float32, n int)

//go:noescape
func winoInTAVX(dst *float32, ldd int, dv *float32, ldv, c, n int)

var avx2Impl = impl{
	name: "avx2", gemm: gemmcore.Kernels[float32]{Full: kern16AVX2, Half: kern8AVX2, Transpose8: transpose8AVX},
	exp: expAVX, tanh: tanhAVX, coupling: couplingAVX, couplingGrad: couplingGradAVX, rowSums: rowSumsAVX,
	toFloat32: toFloat32AVX, toFloat64: toFloat64AVX, addToFloat64: addToFloat64AVX,
	maxPool4: maxPool4AVX, maskedMaxPool4: maskedMaxPool4AVX, unpool4: unpool4AVX, bernoulli: bernoulliAVX,
	winoIn: winoInAVX, winoOutPool: winoOutPoolAVX, winoGradOut: winoGradOutAVX, winoInT: winoInTAVX,
}

// detect returns the assembly kernels when the CPU (and OS, which must save
// the YMM state: x/sys/cpu folds that into HasAVX) supports them.
func detect() []*impl {
	if cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return []*impl{&avx2Impl, &goImpl}
	}
	return []*impl{&goImpl}
}
