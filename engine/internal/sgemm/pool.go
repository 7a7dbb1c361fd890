package sgemm

// Kernels of a 2×2 max-pooling layer with a backward pass: the four cells
// of a window are four slices (channels of one pixel each, in a
// channels-last image), so one call pools all channels of one window. A
// window cut by the image border passes a valid cell again in place of each
// missing one, always one that comes earlier in the order a, b, c, d; the
// kernels are written so that such repeats are harmless (see Unpool4).
// Both functions only select, compare and multiply once, so the assembly
// and portable versions give identical bits.

// MaxPool4 sets out[i] to the largest of a[i], b[i], c[i], d[i] and arg[i]
// to the index (0 for a … 3 for d) of the first of them that holds it. A
// NaN wins over any number, so that a NaN input is not silently dropped
// from the pooled output. All slices must be at least as long as out.
func MaxPool4(out []float32, arg []uint8, a, b, c, d []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	arg, a, b, c, d = arg[:n], a[:n], b[:n], c[:n], d[:n]
	n0 := 0
	if f := active.maxPool4; f != nil && n >= 8 {
		n0 = n &^ 7
		f(&out[0], &arg[0], &a[0], &b[0], &c[0], &d[0], n0)
	}
	for i := n0; i < n; i++ {
		m, k := a[i], uint8(0)
		if v := b[i]; v > m || v != v {
			m, k = v, 1
		}
		if v := c[i]; v > m || v != v {
			m, k = v, 2
		}
		if v := d[i]; v > m || v != v {
			m, k = v, 3
		}
		out[i], arg[i] = m, k
	}
}

// MaskedMaxPool4 is MaxPool4 of the four cells after dropout: cell x
// counts as 0 where its mask mx is not > 0 (a NaN mask drops too). All
// slices must be at least as long as out.
func MaskedMaxPool4(out []float32, arg []uint8, a, b, c, d, ma, mb, mc, md []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	arg, a, b, c, d = arg[:n], a[:n], b[:n], c[:n], d[:n]
	ma, mb, mc, md = ma[:n], mb[:n], mc[:n], md[:n]
	n0 := 0
	if f := active.maskedMaxPool4; f != nil && n >= 8 {
		n0 = n &^ 7
		f(&out[0], &arg[0], &a[0], &b[0], &c[0], &d[0], &ma[0], &mb[0], &mc[0], &md[0], n0)
	}
	for i := n0; i < n; i++ {
		m, k := keep(a[i], ma[i]), uint8(0)
		if v := keep(b[i], mb[i]); v > m || v != v {
			m, k = v, 1
		}
		if v := keep(c[i], mc[i]); v > m || v != v {
			m, k = v, 2
		}
		if v := keep(d[i], md[i]); v > m || v != v {
			m, k = v, 3
		}
		out[i], arg[i] = m, k
	}
}

func keep(v, m float32) float32 {
	if m > 0 {
		return v
	}
	return 0
}

// Unpool4 is the backward pass of MaxPool4 followed by a gate: with
// v = scale·g[i] where out[i] > 0 and v = 0 elsewhere, it writes v into
// the cell that arg[i] names and 0 into the other three. The cells are
// written in the order d, c, b, a, so a slice passed again for a missing
// cell (which never holds the maximum) is overwritten by the cell it
// repeats. All slices must be at least as long as g.
func Unpool4(a, b, c, d []float32, g, out []float32, arg []uint8, scale float32) {
	n := len(g)
	if n == 0 {
		return
	}
	a, b, c, d, out, arg = a[:n], b[:n], c[:n], d[:n], out[:n], arg[:n]
	n0 := 0
	if f := active.unpool4; f != nil && n >= 8 {
		n0 = n &^ 7
		f(&a[0], &b[0], &c[0], &d[0], &g[0], &out[0], &arg[0], scale, n0)
	}
	for i := n0; i < n; i++ {
		var v float32
		if out[i] > 0 {
			v = scale * g[i]
		}
		k := arg[i]
		d[i] = sel(k == 3, v)
		c[i] = sel(k == 2, v)
		b[i] = sel(k == 1, v)
		a[i] = sel(k == 0, v)
	}
}

func sel(ok bool, v float32) float32 {
	if ok {
		return v
	}
	return 0
}
