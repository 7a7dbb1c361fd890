//go:build amd64 && !purego

package dgemm

import (
	"golang.org/x/sys/cpu"

	"github.com/mkbench/mkbench/engine/internal/gemmcore"
)

// The assembly micro-kernels implement gemmcore.Kernel with AVX2 and FMA3:
// a 6×8 tile of doubles lives in 12 YMM registers. kernel_amd64.s and the
// declarations in kernel_decl_amd64.go are generated from sgemm's float32
// kernels (see gen).

var avx2Impl = impl{name: "avx2", gemm: gemmcore.Kernels[float64]{Full: kern8AVX2, Half: kern4AVX2}}

// detect returns the assembly kernels when the CPU (and OS, which must save
// the YMM state: x/sys/cpu folds that into HasAVX) supports them.
func detect() []*impl {
	if cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return []*impl{&avx2Impl, &goImpl}
	}
	return []*impl{&goImpl}
}
