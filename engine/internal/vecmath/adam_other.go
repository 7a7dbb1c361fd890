//go:build !amd64 || purego

package vecmath

var adamVec func(p, g, m, v *float64, n int, scale, step, b1, b2, eps float64)
