package engine

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
	"weak"

	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/testutil"
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
	var first, peak float64
	every := max(steps/10, 1)
	for i := 0; i < steps; i++ {
		if _, err := m.trainStep(i, opt, &grads); err != nil {
			t.Fatal(err)
		}
		if (i+1)%every == 0 {
			h := liveHeapMiB()
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
//
// Weak pointers to each dropped model and its graphs say exactly whether
// the collector freed them. The heap is checked as well, for what a model
// might leave behind outside itself; every variant is built once before
// its baseline, so that what the first model of a kind leaves for all
// later ones (pools, once-built tables) is not counted as growth.
func TestDroppedModelsAreFreed(t *testing.T) {
	type dropped struct {
		model  weak.Pointer[Model]
		graphs []weak.Pointer[graph]
	}
	train := func(v string) dropped {
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
		d := dropped{model: weak.Make(m)}
		for _, gr := range m.graphs {
			d.graphs = append(d.graphs, weak.Make(gr))
		}
		if len(d.graphs) == 0 {
			t.Fatal("the model built no graphs: nothing to check")
		}
		return d
	}
	variants := []string{"metakernel", "vrf+ctx", "metakernel"}
	for _, v := range variants[:2] {
		train(v)
	}
	base := liveHeapMiB()
	var all []dropped
	for _, v := range variants {
		all = append(all, train(v))
	}
	// A dropped model is freed eventually: wait for it (on a loaded machine the
	// cleanups can lag a collection by more than a few milliseconds), but
	// not forever, since a leaked model is never freed.
	freed := func() bool {
		for _, d := range all {
			if d.model.Value() != nil {
				return false
			}
			for _, g := range d.graphs {
				if g.Value() != nil {
					return false
				}
			}
		}
		return true
	}
	for deadline := time.Now().Add(5 * time.Second); !freed() && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	for i, d := range all {
		if d.model.Value() != nil {
			t.Errorf("dropped model %d (%s) was not freed within 5 s", i, variants[i])
		}
		for _, g := range d.graphs {
			if g.Value() != nil {
				t.Errorf("a graph of dropped model %d (%s) was not freed within 5 s", i, variants[i])
			}
		}
	}
	grown := liveHeapMiB() - base
	if grown > 4 {
		t.Fatalf("live heap grew by %.1f MiB over three dropped models", grown)
	}
}

// liveHeapMiB is the live heap in MiB once the collector has settled. A
// dropped model is freed a few collections late, not at the first: a
// kernel's cleanup (ops.newTeam) must run and its parked helper goroutines
// exit before what they held can go, and both happen on other goroutines
// after a collection. So it collects, lets them run, and repeats until the
// heap has not shrunk for three rounds in a row (two fixed collections once
// measured the last of three dropped models still alive, 4.0 MiB on CI).
func liveHeapMiB() float64 {
	var ms runtime.MemStats
	low := math.Inf(1)
	for round, still := 0, 0; round < 100 && still < 3; round++ {
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
		runtime.ReadMemStats(&ms)
		if h := float64(ms.HeapAlloc) / (1 << 20); h < low {
			low, still = h, 0
		} else {
			still++
		}
	}
	return low
}

// openTestDevice opens the first OpenCL device (PoCL here and in CI) with
// CLBlast for the test or benchmark, or skips it (fails it with CI=true)
// saying why; at its end the engine is back on the CPU and the device
// closed.
func openTestDevice(tb testing.TB) *opencl.Device {
	tb.Helper()
	sel, err := opencl.ParseSelection("opencl")
	if err != nil {
		tb.Fatal(err)
	}
	dev, _, err := opencl.Open(sel)
	if err == nil {
		err = opencl.LoadCLBlast()
	}
	if err != nil {
		testutil.OpenCL(tb, err)
	}
	tb.Cleanup(func() { UseDevice(nil); dev.Close() })
	return dev
}

// testDeviceInUse is openTestDevice's device, made the process's for the
// test.
func testDeviceInUse(tb testing.TB) *opencl.Device {
	tb.Helper()
	dev := openTestDevice(tb)
	UseDevice(dev)
	return dev
}

// The device estimate is what a run holds there, within a stated factor:
// a Conv model trained on the device (two task stages, Adam with resident
// parameters; with context, and with flows) and evaluated peaks at no
// more than the estimate's buffers and at least half of them.
func TestDeviceMemoryEstimateMatchesMeasured(t *testing.T) {
	for _, variant := range []string{"vrf+ctx", "metakernel"} {
		t.Run(variant, func(t *testing.T) {
			dev := testDeviceInUse(t)
			cfg := classConfig(variant, 0.9)
			cfg.Conv = &ConvSpec{Channels: 1, Height: 14, Width: 14, Blocks: 3, Filters: 8, Keep: 0.9}
			cfg.MetaBatch, cfg.EvalQuery, cfg.EvalTasks = 4, 5, 8
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			src := blobs{way: 3, side: 14}
			m, err := NewModel(cfg, src)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			opt := NewOptimizer(cfg, m.Params.List)
			var grads [][]float64
			for i := range 4 {
				if _, err := m.trainStep(i, opt, &grads); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, 1, 1); err != nil {
				t.Fatal(err)
			}
			peak := float64(dev.MemStats().Peak)
			est, ok := cfg.deviceBuffers(true)
			in, out := src.InDim(), src.OutDim()
			t.Logf("device buffers at their peak: %.0f bytes; estimated %.0f (%.2f×); DeviceMemoryEstimate %d, EvalDeviceMemoryEstimate %d",
				peak, est, est/peak, cfg.DeviceMemoryEstimate(in, out), cfg.EvalDeviceMemoryEstimate(in, out))
			if !ok || !(peak <= est && est <= 2*peak) {
				t.Fatalf("the device held %.0f bytes at its peak, the estimate's buffers are %.0f: want between 1× and 2× of it", peak, est)
			}
			if cfg.EvalDeviceMemoryEstimate(in, out) >= cfg.DeviceMemoryEstimate(in, out) {
				t.Error("evaluating needs as much of the device as training")
			}
		})
	}
	if mlp := sineConfig("vrf"); mlp.DeviceMemoryEstimate(1, 1) != 0 {
		t.Error("a model with nothing on the device has a device estimate")
	}
	if flows := sineConfig("metakernel"); flows.DeviceMemoryEstimate(1, 1) == 0 {
		t.Error("a sine model's flows on the device are not counted")
	}
}

// Varying episodes on the device (a graph per shape, as Meta-Dataset's)
// reuse the device arena's buffers: after the first 20 episodes (by then
// the largest shape of varyBlobs' draw from cfg.Seed has run) no episode
// allocates on the device, and its peak stays within the estimate; with
// the backbone's parameters resident or not (a new graph's ops take the
// gradient-sum buffers of the dropped graph's).
func TestDeviceMemoryVaryingEpisodes(t *testing.T) {
	dev := testDeviceInUse(t)
	for _, resident := range []bool{false, true} {
		t.Run(fmt.Sprintf("resident=%v", resident), func(t *testing.T) {
			residentOff = !resident
			defer func() { residentOff = false }()
			deviceVaryingEpisodes(t, dev)
		})
	}
}

func deviceVaryingEpisodes(t *testing.T, dev *opencl.Device) {
	cfg := varyConfig("vrf+ctx")
	src := varyBlobs{blobs{way: 4, side: 7}, 3, 2}
	m, err := NewModel(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if (m.res != nil) == residentOff {
		t.Fatalf("resident parameters: %v", m.res != nil)
	}
	opt := NewOptimizer(cfg, m.Params.List)
	var grads [][]float64
	var allocs []int64
	for i := range 40 {
		if _, err := m.trainStep(i, opt, &grads); err != nil {
			t.Fatal(err)
		}
		allocs = append(allocs, dev.MemStats().Allocs)
	}
	st := dev.MemStats()
	est, _ := cfg.deviceBuffers(true)
	t.Logf("40 varying episodes: %d device buffers made (%d in the last 20), %d bytes held, peak %d; estimated %.0f",
		st.Allocs, allocs[39]-allocs[19], st.Live, st.Peak, est)
	if n := allocs[39] - allocs[19]; n != 0 {
		t.Errorf("the last 20 varying episodes made %d device buffers, want none", n)
	}
	if float64(st.Peak) > est {
		t.Errorf("the device peaked at %d bytes, over the estimate %.0f for the largest episode", st.Peak, est)
	}
}
