//go:build !amd64 || purego

package vecmath

var sincosVec func(s, c, x *float64, n int, scale float64) bool
