//go:build !amd64 || purego

package vecmath

var (
	normThetaVec  func(theta *float64, bits *uint64, n int)
	normRadiusVec func(c, s *float64, bits *uint64, n int)
)
