package ops

import (
	"testing"
	"time"
)

// conv4Omniglot is ψ of the Omniglot presets, and conv4Batch a meta-batch's
// worth of images.
var conv4Omniglot = ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}

const conv4Batch = 80

// convFlops counts the multiply-adds (×2) of the three products per block
// for N images: forward, weight gradient and (past the first block, whose
// input is data) input gradient.
func convFlops(s ConvSpec, N int, backward bool) float64 {
	var f float64
	for l, ly := range s.layers() {
		prod := 2 * float64(N*ly.p*s.Filters*9*ly.cin)
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

// convReport adds the throughput of N-image passes and, where the process
// CPU time is known, CPU milliseconds per pass (all cores together).
func convReport(b *testing.B, cpu0 time.Duration, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu0 > 0 {
		b.ReportMetric(float64(convCPUTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

// convBenchKernel returns a kernel with its buffers sized, and a problem of
// conv4Batch images.
func convBenchKernel(b *testing.B) (*ConvKernel, *convProblem) {
	return convBenchKernelOn(b, nil)
}

// convBenchKernelOn is convBenchKernel for a kernel of pool p.
func convBenchKernelOn(b *testing.B, p *Pool) (*ConvKernel, *convProblem) {
	k, err := NewConvKernel(p, conv4Omniglot)
	if err != nil {
		b.Fatal(err)
	}
	return k, newConvProblem(conv4Omniglot, conv4Batch, 1)
}

// BenchmarkConv4Forward times the evaluation forward pass (no dropout) of
// 80 images on the plain kernel.
func BenchmarkConv4Forward(b *testing.B) {
	k, p := convBenchKernel(b)
	out := p.forward(b, k, 0, false)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	for b.Loop() {
		if err := k.Forward(p.N, p.x, p.ws, p.bs, 0, false, out); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, convFlops(conv4Omniglot, conv4Batch, false))
}

// BenchmarkConv4Kernel times a training forward and backward pass of the
// plain kernel (BenchmarkConv4Step without gorgonia and Adam).
func BenchmarkConv4Kernel(b *testing.B) {
	k, p := convBenchKernel(b)
	benchConv4Kernel(b, k, p)
}

// BenchmarkConv4KernelDevice is BenchmarkConv4Kernel on the first OpenCL
// device (skipped without one): the weights going up, the images and the
// output gradient converted and sent, the features and gradients read
// back, as a training step does. On PoCL it measures the path's overhead,
// not a GPU's speed; cpu-ms/op counts the host's share.
func BenchmarkConv4KernelDevice(b *testing.B) {
	pool := &Pool{}
	pool.SetDevice(testDevice(b))
	k, p := convBenchKernelOn(b, pool)
	benchConv4Kernel(b, k, p)
}

func benchConv4Kernel(b *testing.B, k *ConvKernel, p *convProblem) {
	out, gws, gbs := p.run(b, k, 0, true)
	b.ReportAllocs()
	cpu0 := convCPUTime()
	seed := uint64(0)
	for b.Loop() {
		seed++
		if err := k.Forward(p.N, p.x, p.ws, p.bs, seed, true, out); err != nil {
			b.Fatal(err)
		}
		if err := k.Backward(p.r, gws, gbs); err != nil {
			b.Fatal(err)
		}
	}
	convReport(b, cpu0, convFlops(conv4Omniglot, conv4Batch, true))
}
