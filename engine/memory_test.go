package engine

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMemoryStaysFlat trains for MKBENCH_MEMORY_STEPS steps (opt-in: it
// is a long run) and checks that the live heap after GC does not grow:
// graphs are built once and every buffer is reused.
//
//	MKBENCH_MEMORY_STEPS=20000 go test ./engine -run MemoryStaysFlat -v
func TestMemoryStaysFlat(t *testing.T) {
	steps, _ := strconv.Atoi(os.Getenv("MKBENCH_MEMORY_STEPS"))
	if steps == 0 {
		t.Skip("set MKBENCH_MEMORY_STEPS (e.g. 20000) to run")
	}
	variant := os.Getenv("MKBENCH_MEMORY_VARIANT")
	if variant == "" {
		variant = "metakernel"
	}
	cfg := sineConfig(variant)
	cfg.Iters = steps
	m, err := NewModel(cfg, sineLike{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	opt := NewOptimizer(cfg, m.Params.List)
	var grads [][]float64
	heap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / (1 << 20)
	}
	var first, peak float64
	every := max(steps/10, 1)
	for i := 0; i < steps; i++ {
		if _, err := m.trainStep(i, opt, &grads); err != nil {
			t.Fatal(err)
		}
		if (i+1)%every == 0 {
			h := heap()
			if first == 0 {
				first = h
			}
			peak = max(peak, h)
			t.Logf("%s step %6d: live heap %.1f MiB", variant, i+1, h)
		}
	}
	if peak > first*1.2+2 {
		t.Fatalf("live heap grew from %.1f to %.1f MiB", first, peak)
	}
}

// A model that is dropped is freed: the workbench starts and stops models
// as variants are toggled. (A read node pointing into the graph struct once
// made graph → tape machine → graph a cycle through the machine's
// finalizer, which Go never collects: ~12–80 MB per model.)
func TestDroppedModelsAreFreed(t *testing.T) {
	heap := func() float64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / (1 << 20)
	}
	train := func(v string) {
		m, err := NewModel(sineConfig(v), sineLike{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		opt := NewOptimizer(m.Cfg, m.Params.List)
		var g [][]float64
		for j := 0; j < 2; j++ {
			if _, err := m.trainStep(j, opt, &g); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Display(2, 0, 2); err != nil {
			t.Fatal(err)
		}
	}
	train("metakernel")
	base := heap()
	for _, v := range []string{"metakernel", "vrf+ctx", "metakernel"} {
		train(v)
	}
	if grown := heap() - base; grown > 4 {
		t.Fatalf("live heap grew by %.1f MiB over three dropped models", grown)
	}
}
