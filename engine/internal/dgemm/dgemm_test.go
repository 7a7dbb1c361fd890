package dgemm

import (
	"testing"

	"github.com/mkbench/mkbench/engine/internal/gemmcore/gemmtest"
)

// The product tests and benchmarks are gemmtest's, shared with sgemm.
var suite = gemmtest.New[float64, Workspace](Gemm, &active, impls, func(im *impl) string { return im.name })

func TestGemm(t *testing.T) { suite.Test(t) }

func BenchmarkGemm(b *testing.B) { suite.Bench(b) }
