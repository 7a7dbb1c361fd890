//go:build amd64 && !purego

package vecmath

import "golang.org/x/sys/cpu"

//go:noescape
func sincosAVX(s, c, x *float64, n int, scale float64) (outOfRange bool)

// sincosVec is the vector SincosScaled for n a multiple of 4, or nil.
var sincosVec = func() func(s, c, x *float64, n int, scale float64) bool {
	if cpu.X86.HasAVX && cpu.X86.HasSSE41 {
		return sincosAVX
	}
	return nil
}()
