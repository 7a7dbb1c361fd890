package sgemm

import (
	"testing"

	"github.com/mkbench/mkbench/engine/internal/gemmcore/gemmtest"
)

// forEachImpl runs f once with every kernel set this machine supports
// active, so that the assembly and the pure-Go kernels are both tested.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			old := active
			active = im
			defer func() { active = old }()
			f(t)
		})
	}
}

// guard marks memory a routine must not touch.
const guard = float32(-12345.5)

// The product tests and benchmarks are gemmtest's, shared with dgemm.
var suite = gemmtest.New[float32, Workspace](Gemm, &active, impls, func(im *impl) string { return im.name })

func TestGemm(t *testing.T) { suite.Test(t) }

func BenchmarkGemm(b *testing.B) { suite.Bench(b) }
