package datasets

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

func TestSineTasksFollowThePaper(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b task.Batch
	b.Resize(2000, 5, 10, 1, 1)
	Sine{}.Sample(rng, &b)
	for i, x := range append(append([]float64{}, b.XS...), b.XQ...) {
		if x < -5 || x > 5 {
			t.Fatalf("input %d = %v outside [-5, 5]", i, x)
		}
	}
	var amp, maxAbs float64
	for _, y := range b.YQ {
		amp += y * y
		maxAbs = math.Max(maxAbs, math.Abs(y))
	}
	// E[y²] = E[A²]/2 with A ~ U[0.1, 5]: (5³−0.1³)/(3·4.9)/2 ≈ 4.25.
	if got := amp / float64(len(b.YQ)); math.Abs(got-4.25) > 0.25 {
		t.Fatalf("mean y² = %.3f, want ≈ 4.25", got)
	}
	if maxAbs > 5 {
		t.Fatalf("|y| up to %v, amplitude is at most 5", maxAbs)
	}
	for i := 0; i < 1000; i++ {
		task := DrawSineTask(rng)
		if task.A < 0.1 || task.A > 5 || task.W < 0.8 || task.W > 1.2 || task.B < 0 || task.B > math.Pi {
			t.Fatalf("task %+v outside the paper's ranges", task)
		}
	}
}

// Support and query points of one task lie on one sine: fitting A, w, b
// from the support is not needed, the query must match the same function
// that produced the support (checked through SampleCurve's grid).
func TestSineSameSeedSameTasks(t *testing.T) {
	var a, b task.Batch
	a.Resize(3, 5, 10, 1, 1)
	b.Resize(3, 5, 10, 1, 1)
	Sine{}.Sample(rand.New(rand.NewPCG(9, 9)), &a)
	Sine{}.Sample(rand.New(rand.NewPCG(9, 9)), &b)
	for i := range a.YQ {
		if a.YQ[i] != b.YQ[i] || a.XQ[i] != b.XQ[i] {
			t.Fatal("same seed gave different tasks")
		}
	}
}

func TestSineCurveIsTheTruthOnTheGrid(t *testing.T) {
	grid := []float64{-5, -2.5, 0, 2.5, 5}
	var b task.Batch
	b.Resize(1, 4, len(grid), 1, 1)
	rng := rand.New(rand.NewPCG(4, 4))
	Sine{}.SampleCurve(rng, &b, grid)
	task := DrawSineTask(rand.New(rand.NewPCG(4, 4)))
	for i, x := range grid {
		if b.XQ[i] != x || b.YQ[i] != task.At(x) {
			t.Fatalf("grid point %d: (%v, %v), want (%v, %v)", i, b.XQ[i], b.YQ[i], x, task.At(x))
		}
	}
	for i := range b.XS[:4] {
		if b.YS[i] != task.At(b.XS[i]) {
			t.Fatalf("support point %d is not on the task's curve", i)
		}
	}
}
