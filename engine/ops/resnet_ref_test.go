package ops

import "math"

// The reference side of the ResNet's tests: the network evaluated straight
// from the ResNetSpec doc, one image, pixel and tap at a time, in float64,
// with TensorFlow's SAME padding worked out here again.

// refMaps is a batch of n images of h×w×c, channels-last.
type refMaps struct {
	n, h, w, c int
	v          []float64
}

func (m refMaps) at(i, y, x, ch int) float64 { return m.v[((i*m.h+y)*m.w+x)*m.c+ch] }

// refSame is the output size and top/left padding of SAME.
func refSame(n, k, s int) (int, int) {
	out := int(math.Ceil(float64(n) / float64(s)))
	total := (out-1)*s + k - n
	if total < 0 {
		total = 0
	}
	return out, total / 2
}

func refConv(in refMaps, w []float64, cout, k, s int) refMaps {
	ho, pt := refSame(in.h, k, s)
	wo, pl := refSame(in.w, k, s)
	out := refMaps{in.n, ho, wo, cout, make([]float64, in.n*ho*wo*cout)}
	for i := range in.n {
		for y := range ho {
			for x := range wo {
				for f := range cout {
					var sum float64
					for c := range in.c {
						for ky := range k {
							for kx := range k {
								iy, ix := y*s-pt+ky, x*s-pl+kx
								if iy >= 0 && iy < in.h && ix >= 0 && ix < in.w {
									sum += in.at(i, iy, ix, c) * w[f*in.c*k*k+c*k*k+ky*k+kx]
								}
							}
						}
					}
					out.v[((i*ho+y)*wo+x)*cout+f] = sum
				}
			}
		}
	}
	return out
}

// refBN normalizes z per episode as BNLayout and BNMode say and returns the
// output with each episode's batch mean and variance.
func refBN(z refMaps, lay BNLayout, mode BNMode, run *BNStats, gamma, beta []float64) (refMaps, [][2][]float64) {
	out := refMaps{z.n, z.h, z.w, z.c, make([]float64, len(z.v))}
	var moments [][2][]float64
	S, Q, E := lay.Support, lay.Query, lay.Episodes
	for e := range E {
		imgs := []int{}
		stat := []int{}
		for j := range S {
			imgs, stat = append(imgs, e*S+j), append(stat, e*S+j)
		}
		for j := range Q {
			imgs = append(imgs, E*S+e*Q+j)
			if lay.Transductive {
				stat = append(stat, E*S+e*Q+j)
			}
		}
		mean, vr := make([]float64, z.c), make([]float64, z.c)
		for ch := range z.c {
			if mode == BNRunning {
				mean[ch], vr[ch] = run.Mean[ch], run.Var[ch]
				continue
			}
			var s, cnt float64
			for _, i := range stat {
				for y := range z.h {
					for x := range z.w {
						s += z.at(i, y, x, ch)
						cnt++
					}
				}
			}
			mean[ch] = s / cnt
			var d float64
			for _, i := range stat {
				for y := range z.h {
					for x := range z.w {
						d += (z.at(i, y, x, ch) - mean[ch]) * (z.at(i, y, x, ch) - mean[ch])
					}
				}
			}
			vr[ch] = d / cnt
		}
		moments = append(moments, [2][]float64{mean, vr})
		for _, i := range imgs {
			for y := range z.h {
				for x := range z.w {
					for ch := range z.c {
						o := ((i*z.h+y)*z.w+x)*z.c + ch
						out.v[o] = gamma[ch]*(z.v[o]-mean[ch])/math.Sqrt(vr[ch]+1e-5) + beta[ch]
					}
				}
			}
		}
	}
	return out, moments
}

func refRelu(m refMaps) refMaps {
	out := m
	out.v = make([]float64, len(m.v))
	for i, v := range m.v {
		out.v[i] = math.Max(v, 0)
	}
	return out
}

func refAdd(a, b refMaps) refMaps {
	out := a
	out.v = make([]float64, len(a.v))
	for i := range a.v {
		out.v[i] = a.v[i] + b.v[i]
	}
	return out
}

func refMaxPool(m refMaps) refMaps {
	ho, pt := refSame(m.h, 3, 2)
	wo, pl := refSame(m.w, 3, 2)
	out := refMaps{m.n, ho, wo, m.c, make([]float64, m.n*ho*wo*m.c)}
	for i := range m.n {
		for y := range ho {
			for x := range wo {
				for ch := range m.c {
					best := math.Inf(-1)
					for ky := range 3 {
						for kx := range 3 {
							if iy, ix := 2*y-pt+ky, 2*x-pl+kx; iy >= 0 && iy < m.h && ix >= 0 && ix < m.w {
								best = math.Max(best, m.at(i, iy, ix, ch))
							}
						}
					}
					out.v[((i*ho+y)*wo+x)*m.c+ch] = best
				}
			}
		}
	}
	return out
}

// resnetReference evaluates the network; moments[l] are convolution l's
// per-episode batch moments (Convs order).
func resnetReference(s ResNetSpec, lay BNLayout, mode BNMode, run []BNStats, x []float64, params [][]float64) ([]float64, [][][2][]float64) {
	var moments [][][2][]float64
	l := 0
	convBN := func(in refMaps, cout, k, stride int) refMaps {
		z := refConv(in, params[3*l], cout, k, stride)
		var r *BNStats
		if run != nil {
			r = &run[l]
		}
		y, m := refBN(z, lay, mode, r, params[3*l+1], params[3*l+2])
		moments = append(moments, m)
		l++
		return y
	}
	n := lay.Images()
	a := refMaps{n, s.Height, s.Width, s.Channels, x}
	a = refMaxPool(refRelu(convBN(a, s.Widths[0], 7, 2)))
	for st, w := range s.Widths {
		for b := range 2 {
			stride := 1
			if st > 0 && b == 0 {
				stride = 2
			}
			h := refRelu(convBN(a, w, 3, stride))
			y := convBN(h, w, 3, 1)
			short := a
			if b == 0 {
				short = convBN(a, w, 1, stride)
			}
			a = refRelu(refAdd(y, short))
		}
	}
	L := l
	out := make([]float64, n*s.Out)
	for i := range n {
		feat := make([]float64, a.c)
		for y := range a.h {
			for xx := range a.w {
				for ch := range a.c {
					feat[ch] += a.at(i, y, xx, ch) / float64(a.h*a.w)
				}
			}
		}
		for j := range s.Out {
			v := params[3*L+1][j]
			for ch, f := range feat {
				v += params[3*L][j*a.c+ch] * f
			}
			out[i*s.Out+j] = v
		}
	}
	return out, moments
}
