package ops

import (
	"runtime"
	"testing"
)

// resFlops counts the multiply-adds (×2) of the convolutions of N images:
// forward, and with backward the weight and input gradients (none for the
// stem's input, which is data).
func resFlops(s ResNetSpec, N int, backward bool) float64 {
	var f float64
	for l, c := range s.Convs() {
		prod := 2 * float64(N*c.OutHeight*c.OutWidth*c.Out*c.FanIn())
		f += prod
		if backward {
			f += prod
			if l > 0 {
				f += prod
			}
		}
	}
	return f
}

// resBenchEpisode is a 5-way 5-shot episode with 10 queries per class:
// 25 support and 50 query images.
var resBenchEpisode = BNLayout{Episodes: 1, Support: 25, Query: 50}

// resReportMemory adds the heap in use and the memory obtained from the OS
// after the passes, in MB.
func resReportMemory(b *testing.B) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MB")
}

// BenchmarkResNet18Step times a training forward and backward pass of the
// paper's ResNet-18 (84×84×3, widths 64–512, 256-d features) on one
// 5-way 5-shot episode of 75 images, on the plain kernel (float32).
func BenchmarkResNet18Step(b *testing.B) {
	s := ResNet18(3, 84, 84)
	p := newResProblem(s, resBenchEpisode, 1)
	k := newResKernel(b, s, false)
	out, grads, _ := p.run(b, k, BNTrain)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	for b.Loop() {
		if err := k.Forward(p.x, p.params, p.lay, BNTrain, nil, out); err != nil {
			b.Fatal(err)
		}
		if err := k.Backward(p.r, grads, nil); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, resFlops(s, resBenchEpisode.Images(), true))
	resReportMemory(b)
}

// BenchmarkResNet18StepDevice is BenchmarkResNet18Step on the first
// OpenCL device (skipped without one): the weights going up, the forward
// and backward passes and the gradients coming down. On PoCL (OpenCL on
// the CPU) it shows the device path's overhead, not a GPU's speed.
func BenchmarkResNet18StepDevice(b *testing.B) {
	s := ResNet18(3, 84, 84)
	p := newResProblem(s, resBenchEpisode, 1)
	k := newResDevKernel(b, s)
	out, grads, _ := p.run(b, k, BNTrain)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	for b.Loop() {
		if err := k.Forward(p.x, p.params, p.lay, BNTrain, nil, out); err != nil {
			b.Fatal(err)
		}
		if err := k.Backward(p.r, grads, nil); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, resFlops(s, resBenchEpisode.Images(), true))
}

// BenchmarkResNet18Forward times the evaluation forward pass of the same
// episode (episode statistics, no backward).
func BenchmarkResNet18Forward(b *testing.B) {
	s := ResNet18(3, 84, 84)
	p := newResProblem(s, resBenchEpisode, 1)
	k := newResKernel(b, s, false)
	out := p.forward(b, k, BNEpisode)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	for b.Loop() {
		if err := k.Forward(p.x, p.params, p.lay, BNEpisode, nil, out); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, resFlops(s, resBenchEpisode.Images(), false))
	resReportMemory(b)
}
