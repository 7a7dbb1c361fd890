package task

import "math/rand/v2"

// Batch is one meta-batch of few-shot tasks, row-major and flat so that it
// can be bound to graph inputs without copying per task.
type Batch struct {
	T, NS, NQ     int       // tasks, support and query points per task
	InDim, OutDim int       // input and target widths
	XS, YS        []float64 // T·NS·InDim, T·NS·OutDim
	XQ, YQ        []float64 // T·NQ·InDim, T·NQ·OutDim
}

// Resize makes b hold t tasks of ns support and nq query points, reusing its
// storage when it is large enough.
func (b *Batch) Resize(t, ns, nq, in, out int) {
	b.T, b.NS, b.NQ, b.InDim, b.OutDim = t, ns, nq, in, out
	b.XS = Grow(b.XS, t*ns*in)
	b.YS = Grow(b.YS, t*ns*out)
	b.XQ = Grow(b.XQ, t*nq*in)
	b.YQ = Grow(b.YQ, t*nq*out)
}

// Grow returns s resized to n, reusing its backing array when it is large
// enough (the contents are then stale, not zeroed).
func Grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Source draws few-shot tasks. Implementations must draw only from the
// given rng so that a seed fixes the task stream. The engine calls Sample
// from a prefetching goroutine, never concurrently with itself.
type Source interface {
	// Name identifies the task family in summaries, e.g. "sine".
	Name() string
	InDim() int
	OutDim() int
	// Sample fills b (already resized) with b.T fresh tasks.
	Sample(rng *rand.Rand, b *Batch)
}

// Varying is a classification Source whose episodes differ in shape:
// way, shots per class and query size are drawn per episode, as
// Meta-Dataset's sampler does. Its OutDim is the largest way. The engine
// draws one episode per training step and per evaluation task through
// SampleVarying, never Sample.
type Varying interface {
	Source
	// SampleVarying draws one episode into b and sizes b to it: T = 1, NS
	// the support-set size, NQ the query rows, OutDim the episode's way.
	// Every class of the episode has at least one support row.
	SampleVarying(rng *rand.Rand, b *Batch)
}

// CurveSource is a 1-D regression family whose ground truth can be drawn on
// a grid, which the display snapshots use.
type CurveSource interface {
	Source
	// Domain is the input interval tasks are drawn on.
	Domain() (lo, hi float64)
	// SampleCurve fills b (one task, resized to NS support points and
	// len(grid) query points) with a fresh task whose query inputs are grid
	// and whose query targets are the noiseless truth there.
	SampleCurve(rng *rand.Rand, b *Batch, grid []float64)
}

// Gamma is SplitMix64's increment, 2⁶⁴/φ: multiplying a stream number by
// it spreads consecutive streams over all the bits of a seed.
const Gamma = 0x9e3779b97f4a7c15

// Stream is the random source of one purpose (stream) and one draw (index)
// of a seeded run: tasks, noise, initialization and evaluation each draw
// from their own stream, so changing how much one of them draws never
// shifts another.
func Stream(seed, stream, index uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^(stream*Gamma), index))
}
