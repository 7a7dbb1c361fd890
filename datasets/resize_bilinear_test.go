package datasets

import (
	"slices"
	"testing"
)

// TensorFlow's resize_bilinear with align_corners=True, worked by hand:
// corners map to corners, a 2×2 image grows by linear interpolation, a
// 5×5 shrinks to 3×3 by sampling rows and columns 0, 2, 4, and a 1×1
// output is the top-left pixel.
func TestResizeBilinearAligned(t *testing.T) {
	grey := func(w, h int, v func(x, y int) float32) func(y int, row []float32) {
		return func(y int, row []float32) {
			for x := 0; x < w; x++ {
				f := v(x, y)
				row[3*x], row[3*x+1], row[3*x+2] = f, f, f
			}
		}
	}
	run := func(read func(int, []float32), sw, sh, w, h int) []uint8 {
		dst := make([]uint8, w*h*3)
		resizeBilinearRGB(read, sw, sh, dst, w, h, &rgbScratch{})
		out := make([]uint8, w*h)
		for i := range out {
			if dst[3*i] != dst[3*i+1] || dst[3*i] != dst[3*i+2] {
				t.Fatalf("channels differ at %d: %v", i, dst[3*i:3*i+3])
			}
			out[i] = dst[3*i]
		}
		return out
	}
	two := grey(2, 2, func(x, y int) float32 { return float32(10*x + 20*y) })
	if got, want := run(two, 2, 2, 3, 3), []uint8{0, 5, 10, 10, 15, 20, 20, 25, 30}; !slices.Equal(got, want) {
		t.Errorf("2×2 → 3×3: %v, want %v", got, want)
	}
	five := grey(5, 5, func(x, y int) float32 { return float32(x + 10*y) })
	if got, want := run(five, 5, 5, 3, 3), []uint8{0, 2, 4, 20, 22, 24, 40, 42, 44}; !slices.Equal(got, want) {
		t.Errorf("5×5 → 3×3: %v, want %v", got, want)
	}
	// 4 → 3 columns: scale 1.5, so column 1 is halfway between 1 and 2.
	four := grey(4, 1, func(x, y int) float32 { return float32(100 * x) })
	if got, want := run(four, 4, 1, 3, 1), []uint8{0, 150, 255}; !slices.Equal(got, want) {
		t.Errorf("4 → 3 (300 clamps to 255): %v, want %v", got, want)
	}
	if got := run(five, 5, 5, 1, 1); got[0] != 0 {
		t.Errorf("1×1: %v, want the top-left pixel", got)
	}
}
