package task

import "testing"

// A shift moves every pixel, all channels together, by (dy, dx); pixels
// moved past the edge are gone and the ones uncovered are zero.
func TestShiftImage(t *testing.T) {
	const h, w, c = 5, 4, 2
	val := func(y, x, ch int) float64 { return float64(1 + (y*w+x)*c + ch) }
	for _, d := range [][2]int{{0, 0}, {1, -2}, {-3, 1}, {4, 3}, {-4, -3}, {0, 1}, {2, 0}} {
		img := make([]float64, h*w*c)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				for ch := 0; ch < c; ch++ {
					img[(y*w+x)*c+ch] = val(y, x, ch)
				}
			}
		}
		ShiftImage(img, make([]float64, h*w*c), h, w, c, d[0], d[1])
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				for ch := 0; ch < c; ch++ {
					sy, sx := y-d[0], x-d[1]
					want := 0.0
					if sy >= 0 && sy < h && sx >= 0 && sx < w {
						want = val(sy, sx, ch)
					}
					if got := img[(y*w+x)*c+ch]; got != want {
						t.Fatalf("shift %v: pixel (%d, %d, %d) = %v, want %v", d, y, x, ch, got, want)
					}
				}
			}
		}
	}
}
