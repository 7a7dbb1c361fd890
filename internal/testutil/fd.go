package testutil

import "gonum.org/v1/gonum/diff/fd"

// CentralDiff is the central finite difference of f in x[j], step 1e-6,
// by gonum's diff/fd: the reference the gradient tests check analytic
// gradients against. x[j] is restored.
func CentralDiff(x []float64, j int, f func() float64) float64 {
	v := x[j]
	defer func() { x[j] = v }()
	return fd.Derivative(func(y float64) float64 { x[j] = y; return f() }, v, &fd.Settings{Formula: fd.Central, Step: 1e-6})
}
