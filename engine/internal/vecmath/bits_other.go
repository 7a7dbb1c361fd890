//go:build !amd64 || purego

package vecmath

var bitsVec func(s *[4][4]uint64, dst *uint64, n int)
