package experiments

import (
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// SeedStats summarizes one point's per-seed means: their mean, sample
// standard deviation and the half-width of the Student-t 95% interval of
// the mean (n-1 degrees of freedom). With fewer than two seeds sd and ci95
// are 0: one seed says nothing about the spread across seeds.
func SeedStats(means []float64) (mean, sd, ci95 float64) {
	n := len(means)
	if n == 0 {
		return 0, 0, 0
	}
	if n == 1 {
		return means[0], 0, 0
	}
	mean, sd = stat.MeanStdDev(means, nil)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	return mean, sd, t * sd / math.Sqrt(float64(n))
}
