package datasets

import (
	"math"
	"math/rand/v2"

	"github.com/mkbench/mkbench/internal/task"
)

// Sine is the few-shot regression family of the paper (after MAML):
// y = A·sin(w·x + b) with A ~ U[0.1, 5], w ~ U[0.8, 1.2], b ~ U[0, π] and
// inputs x ~ U[-5, 5]. Targets are noiseless.
type Sine struct{}

// SineTask is one member of the family.
type SineTask struct{ A, W, B float64 }

// At evaluates the task's function.
func (s SineTask) At(x float64) float64 { return s.A * math.Sin(s.W*x+s.B) }

const sineLo, sineHi = -5.0, 5.0

// DrawSineTask draws the parameters of one task.
func DrawSineTask(rng *rand.Rand) SineTask {
	return SineTask{
		A: 0.1 + 4.9*rng.Float64(),
		W: 0.8 + 0.4*rng.Float64(),
		B: math.Pi * rng.Float64(),
	}
}

func (Sine) Name() string             { return "sine" }
func (Sine) InDim() int               { return 1 }
func (Sine) OutDim() int              { return 1 }
func (Sine) Domain() (lo, hi float64) { return sineLo, sineHi }
func uniformX(rng *rand.Rand) float64 { return sineLo + (sineHi-sineLo)*rng.Float64() }
func fill(task SineTask, x, y []float64, rng *rand.Rand) {
	for i := range x {
		x[i] = uniformX(rng)
		y[i] = task.At(x[i])
	}
}

// Sample fills b with b.T tasks; support and query inputs are independent
// uniform draws on [-5, 5].
func (Sine) Sample(rng *rand.Rand, b *task.Batch) {
	for t := 0; t < b.T; t++ {
		task := DrawSineTask(rng)
		fill(task, b.XS[t*b.NS:(t+1)*b.NS], b.YS[t*b.NS:(t+1)*b.NS], rng)
		fill(task, b.XQ[t*b.NQ:(t+1)*b.NQ], b.YQ[t*b.NQ:(t+1)*b.NQ], rng)
	}
}

// SampleCurve draws one task with b.NS random support points and the truth
// on grid as its query set.
func (Sine) SampleCurve(rng *rand.Rand, b *task.Batch, grid []float64) {
	task := DrawSineTask(rng)
	fill(task, b.XS[:b.NS], b.YS[:b.NS], rng)
	for i, x := range grid {
		b.XQ[i], b.YQ[i] = x, task.At(x)
	}
}
