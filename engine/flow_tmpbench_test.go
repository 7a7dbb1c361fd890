package engine

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestFlowTmpBench(t *testing.T) {
	if os.Getenv("FLOWBENCH") == "" {
		t.Skip()
	}
	spec := FlowSpec{Layers: 4, Dim: 40, Cond: 80, Hidden: 128}
	p := newFlowProblem(spec, 25, 128, 0, 10)
	k, _ := NewFlowKernel(spec)
	out := make([]float64, len(p.r))
	gO := make([]float64, len(p.omega0))
	gC := make([]float64, len(p.cond))
	gT := make([]float64, len(p.theta))
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		bf, bb := time.Hour, time.Hour
		for i := 0; i < 25; i++ {
			s := time.Now()
			k.Forward(p.T, p.D, p.omega0, p.cond, p.theta, out)
			m := time.Now()
			k.Backward(p.r, gO, gC, gT)
			e := time.Now()
			bf = min(bf, m.Sub(s))
			bb = min(bb, e.Sub(m))
		}
		runtime.GOMAXPROCS(old)
		fmt.Printf("GOMAXPROCS=%d min fwd %v bwd %v\n", procs, bf, bb)
	}
}
