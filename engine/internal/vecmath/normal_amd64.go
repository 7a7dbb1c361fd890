//go:build amd64 && !purego

package vecmath

import "golang.org/x/sys/cpu"

//go:noescape
func normThetaAVX2(theta *float64, bits *uint64, n int)

//go:noescape
func normRadiusAVX2(c, s *float64, bits *uint64, n int)

// normThetaVec and normRadiusVec are the vector passes of Normals for n a
// multiple of 4, or nil. The bit tricks need AVX2's integer YMM shifts.
var normThetaVec, normRadiusVec = func() (func(theta *float64, bits *uint64, n int), func(c, s *float64, bits *uint64, n int)) {
	if cpu.X86.HasAVX && cpu.X86.HasAVX2 {
		return normThetaAVX2, normRadiusAVX2
	}
	return nil, nil
}()
