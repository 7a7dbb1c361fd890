package ops

import (
	"math"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
)

// The reference side of the convolution's tests: the network evaluated
// straight from the ConvSpec doc, pixel by pixel, in float64.

// convReference evaluates the network image by image with a direct
// convolution loop, in float64, with the kernel's dropout masks.
func convReference(s ConvSpec, N int, x []float64, ws, bs [][]float64, seed, stream uint64, train bool) []float64 {
	out := make([]float64, 0, N*s.OutDim())
	drop := train && s.Keep < 1
	for i := 0; i < N; i++ {
		h, w, c := s.Height, s.Width, s.Channels
		a := x[i*s.InDim() : (i+1)*s.InDim()]
		for l := 0; l < s.Blocks; l++ {
			F := s.Filters
			ho, wo := s.pooled(h), s.pooled(w)
			var mask []float64
			if drop {
				// The stream is laid out window by window (convMaskIndex).
				mask = make([]float64, ho*wo*4*F)
				sgemm.BernoulliMaskAny(mask, convMaskKey(seed, stream, i, l), uint64(s.Keep*(1<<32)))
			}
			z := make([]float64, h*w*F)
			for y := 0; y < h; y++ {
				for xx := 0; xx < w; xx++ {
					for f := 0; f < F; f++ {
						sum := bs[l][f]
						for ky := 0; ky < 3; ky++ {
							for kx := 0; kx < 3; kx++ {
								yy, x2 := y+ky-1, xx+kx-1
								if yy < 0 || yy >= h || x2 < 0 || x2 >= w {
									continue
								}
								for ci := 0; ci < c; ci++ {
									sum += a[(yy*w+x2)*c+ci] * ws[l][f*9*c+ci*9+ky*3+kx]
								}
							}
						}
						v := math.Max(sum, 0)
						if drop && y < 2*ho && xx < 2*wo { // floor pooling drops the rest
							v *= mask[convMaskIndex(convLayer{wo: wo}, y, xx, F)+f] / s.Keep
						}
						z[(y*w+xx)*F+f] = v
					}
				}
			}
			pooled := make([]float64, ho*wo*F)
			for oy := 0; oy < ho; oy++ {
				for ox := 0; ox < wo; ox++ {
					for f := 0; f < F; f++ {
						m := math.Inf(-1)
						for dy := 0; dy < 2; dy++ {
							for dx := 0; dx < 2; dx++ {
								if y, x2 := 2*oy+dy, 2*ox+dx; y < h && x2 < w {
									m = math.Max(m, z[(y*w+x2)*F+f])
								}
							}
						}
						pooled[(oy*wo+ox)*F+f] = m
					}
				}
			}
			a, h, w, c = pooled, ho, wo, F
		}
		out = append(out, a...)
	}
	return out
}

// convMaskIndex is where the mask of pixel (y, x) of a block starts in the
// image's dropout stream, which is laid out window-major: window by window
// (row-major over the pooled map), the window's cells (0,0), (0,1), (1,0),
// (1,1), the filters of a cell contiguous; cells that an odd size cuts off
// keep their places. Both paths apply dropout as they pool, one window at a
// time, and so read the stream in order.
func convMaskIndex(ly convLayer, y, x, nf int) int {
	return (((y/2)*ly.wo+x/2)*4 + (y%2)*2 + x%2) * nf
}
