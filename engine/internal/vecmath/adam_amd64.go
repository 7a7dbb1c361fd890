//go:build amd64 && !purego

package vecmath

import "golang.org/x/sys/cpu"

//go:noescape
func adamAVX(dp, dg, dm, dv *float64, n int, scale, step, b1, b2, eps float64)

// adamVec is the vector Adam for n a multiple of 4, or nil.
var adamVec = func() func(p, g, m, v *float64, n int, scale, step, b1, b2, eps float64) {
	if cpu.X86.HasAVX {
		return adamAVX
	}
	return nil
}()
