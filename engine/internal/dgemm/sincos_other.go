//go:build !amd64 || purego

package dgemm

var sincosVec func(s, c, x *float64, n int, scale float64) bool
