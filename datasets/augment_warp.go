package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mkbench/mkbench/internal/task"
)

// Rotation and scale augmentation of training episodes
// (engine.Config.AugmentRotate, AugmentScale): the affine distortions
// Koch et al. drew for Omniglot, less their shear. A wrapper like
// Shifted, for the same reasons: the wrapped source (shifted or not) draws
// first, then the warps follow from the same rng, so a warped run sees the
// unwarped run's classes and images, turned and resized.

// Warped returns src whose episodes have every image, support and query,
// rotated about its centre by its own angle, uniform in −maxDeg … maxDeg
// degrees, and scaled about it by its own factor, uniform in
// 1−maxScale … 1+maxScale (each image drawing its angle, when maxDeg > 0,
// then its scale, when maxScale > 0), read back by bilinear interpolation
// with the pixels outside the image zero. Images are h×w with c channels,
// channels-last. A varying source stays varying. maxDeg and maxScale both
// 0 return src itself.
func Warped(src task.Source, h, w, c int, maxDeg, maxScale float64) (task.Source, error) {
	switch {
	case maxDeg == 0 && maxScale == 0:
		return src, nil
	case !(maxDeg >= 0 && maxDeg <= 180):
		return nil, fmt.Errorf("datasets: rotating images by up to %g degrees: give 0 … 180", maxDeg)
	case !(maxScale >= 0 && maxScale < 1):
		return nil, fmt.Errorf("datasets: scaling images by up to ±%g: give at least 0 and under 1", maxScale)
	case h < 1 || w < 1 || c < 1:
		return nil, fmt.Errorf("datasets: warping %d×%d×%d images: every size must be positive", h, w, c)
	case src.InDim() != h*w*c:
		return nil, notImages(src, h, w, c)
	}
	maxRad := maxDeg * math.Pi / 180
	return augmentImages(src, func(rng *rand.Rand, img, tmp []float64) {
		theta, scale := 0.0, 1.0
		if maxRad > 0 {
			theta = (2*rng.Float64() - 1) * maxRad
		}
		if maxScale > 0 {
			scale = 1 + (2*rng.Float64()-1)*maxScale
		}
		warpImage(img, tmp, h, w, c, theta, scale)
	}), nil
}

// warpImage rotates the h×w×c image img by theta radians and scales it by
// scale about its centre, in place through tmp: output pixel p reads the
// input at c + R(−theta)·(p − c)/scale, bilinearly, with the pixels
// outside the image zero (the background of strokes-on-zero images).
func warpImage(img, tmp []float64, h, w, c int, theta, scale float64) {
	if theta == 0 && scale == 1 {
		return
	}
	cy, cx := float64(h-1)/2, float64(w-1)/2
	cos, sin := math.Cos(theta)/scale, math.Sin(theta)/scale
	at := func(y, x, ch int) float64 {
		if y < 0 || y >= h || x < 0 || x >= w {
			return 0
		}
		return img[(y*w+x)*c+ch]
	}
	for y := 0; y < h; y++ {
		dy := float64(y) - cy
		for x := 0; x < w; x++ {
			dx := float64(x) - cx
			sy, sx := cy+cos*dy+sin*dx, cx-sin*dy+cos*dx
			out := tmp[(y*w+x)*c : (y*w+x+1)*c]
			if sy <= -1 || sy >= float64(h) || sx <= -1 || sx >= float64(w) {
				clear(out) // all four neighbours outside
				continue
			}
			fy, fx := math.Floor(sy), math.Floor(sx)
			ty, tx := sy-fy, sx-fx
			y0, x0 := int(fy), int(fx)
			if y0 >= 0 && y0+1 < h && x0 >= 0 && x0+1 < w {
				r0, r1 := img[(y0*w+x0)*c:], img[((y0+1)*w+x0)*c:]
				for ch := range out {
					out[ch] = (1-ty)*((1-tx)*r0[ch]+tx*r0[c+ch]) + ty*((1-tx)*r1[ch]+tx*r1[c+ch])
				}
				continue
			}
			for ch := range out {
				out[ch] = (1-ty)*((1-tx)*at(y0, x0, ch)+tx*at(y0, x0+1, ch)) +
					ty*((1-tx)*at(y0+1, x0, ch)+tx*at(y0+1, x0+1, ch))
			}
		}
	}
	copy(img, tmp)
}
