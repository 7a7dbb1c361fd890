//go:build amd64 && !purego

package vecmath

import "golang.org/x/sys/cpu"

//go:noescape
func bitsAVX2(s *[4][4]uint64, dst *uint64, n int)

// bitsVec is the vector Fill for n a positive multiple of 4, or nil. The
// shifts of a YMM register of 64-bit words need AVX2.
var bitsVec = func() func(s *[4][4]uint64, dst *uint64, n int) {
	if cpu.X86.HasAVX && cpu.X86.HasAVX2 {
		return bitsAVX2
	}
	return nil
}()
