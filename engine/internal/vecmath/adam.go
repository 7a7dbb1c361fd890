package vecmath

import "math"

// Adam applies one Adam update to the parameters p with gradients g and
// moments m, v (all of one length):
//
//	g' = scale·g;  m = b1·m + (1−b1)·g';  v = b2·v + (1−b2)·g'·g'
//	p -= step·m / (√v + eps)
//
// The assembly version computes exactly these operations in this order
// (no fused multiply-adds), so both give the same bits.
func Adam(p, g, m, v []float64, scale, step, b1, b2, eps float64) {
	n := len(p)
	if len(g) != n || len(m) != n || len(v) != n {
		panic("dgemm: Adam slices differ in length")
	}
	done := 0
	if adamVec != nil && n >= 4 {
		done = n &^ 3
		adamVec(&p[0], &g[0], &m[0], &v[0], done, scale, step, b1, b2, eps)
	}
	adamGo(p[done:], g[done:], m[done:], v[done:], scale, step, b1, b2, eps)
}

func adamGo(p, g, m, v []float64, scale, step, b1, b2, eps float64) {
	c1, c2 := 1-b1, 1-b2
	for j := range p {
		gj := g[j] * scale
		// float64(…) rounds each product before the sum, so that no
		// compiler fuses a multiply-add (arm64, GOAMD64=v3) and the bits
		// stay those of the vector path.
		m[j] = float64(b1*m[j]) + float64(c1*gj)
		v[j] = float64(b2*v[j]) + float64(c2*gj*gj)
		p[j] -= step * m[j] / (math.Sqrt(v[j]) + eps)
	}
}
