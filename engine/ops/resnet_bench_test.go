package ops

import (
	"fmt"
	"runtime"
	"testing"
	"time"
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

// resPart names the group of a convolution in BenchmarkResNet18Parts: the
// stem, the strided 3×3 and 1×1 convolutions, and the 3×3 stride-1 (and
// 1×1 stride-1) convolutions per resolution.
func resPart(c ResNetConv) string {
	switch {
	case c.Name == "stem":
		return "stem7x7s2"
	case c.K == 1:
		return fmt.Sprintf("1x1s%d@%d", c.Stride, c.Height)
	case c.Stride > 1:
		return "3x3s2"
	}
	return fmt.Sprintf("3x3s1@%d", c.Height)
}

// BenchmarkResNet18Parts times the parts of BenchmarkResNet18Step's
// convolutions one after another, as the profile in docs/cpu-backbones.md
// lists them: for each group of convolutions (resPart) the forward
// product with its im2col ("fwd"), the input gradient with the batch
// norm's backward and col2im ("dgrad") and the weight gradient ("wgrad"),
// each over the episode with all the pool's workers, in ms per step.
// "rest" is a whole step less all the parts: batch norm's sums and passes,
// ReLU, residual adds, the stem's max-pool, the head and the setup.
func BenchmarkResNet18Parts(b *testing.B) {
	s := ResNet18(3, 84, 84)
	p := newResProblem(s, resBenchEpisode, 1)
	k := newResKernel(b, s, false)
	out, grads, _ := p.run(b, k, BNTrain)
	c := k.c32
	if c == nil {
		b.Skip("the kernel runs on a device")
	}
	cvs := s.Convs()
	parts := map[string]time.Duration{}
	var order []string
	add := func(name string, d time.Duration) {
		if _, ok := parts[name]; !ok {
			order = append(order, name)
		}
		parts[name] += d
	}
	var step time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := k.Forward(p.x, p.params, p.lay, BNTrain, nil, out); err != nil {
			b.Fatal(err)
		}
		if err := k.Backward(p.r, grads, nil); err != nil {
			b.Fatal(err)
		}
		step += time.Since(t0)
		// Backward left the coefficients of every batch norm's gradient;
		// the parts below recompute what a step computes, on its buffers
		// (the values do not matter to the time).
		c.params, c.grads, c.xIn = p.params, grads, p.x
		for l, cv := range cvs {
			g := resPart(cv)
			t := time.Now()
			c.convs(l, -1)
			add(g+".fwd", time.Since(t))
			dst := c.gb[0]
			if l == 0 {
				dst = nil
			}
			j := funcJob(func(ci int) {
				sc := c.scratch()
				c.gradIn(sc, l, ci, c.z[l], dst, false)
				c.release(sc)
			})
			t = time.Now()
			c.overChunks(j)
			add(g+".dgrad", time.Since(t))
			t = time.Now()
			c.weights(l, l)
			add(g+".wgrad", time.Since(t))
		}
		c.params, c.grads, c.xIn = nil, nil, nil
	}
	var sum time.Duration
	for _, name := range order {
		sum += parts[name]
		b.ReportMetric(float64(parts[name])/float64(b.N)/1e6, name+"-ms")
	}
	b.ReportMetric(float64(step-sum)/float64(b.N)/1e6, "rest-ms")
	b.ReportMetric(float64(step)/float64(b.N)/1e6, "step-ms")
}
