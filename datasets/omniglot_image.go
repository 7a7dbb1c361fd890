package datasets

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
)

// drawingScratch is one decoding goroutine's working memory.
type drawingScratch struct {
	ink [OmniglotSourceSide * OmniglotSourceSide]float64
	out [OmniglotPixels]float64
	tmp [OmniglotSourceSide * OmniglotSide]float64
}

// decodeDrawing turns one PNG into the stored 28×28 form. The size is
// checked from the header before decoding so that a corrupt header claiming
// a huge image costs nothing.
func decodeDrawing(label string, data []byte, dst []uint8, s *drawingScratch) error {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("datasets: %s: not a PNG image: %v", label, err)
	}
	if cfg.Width != OmniglotSourceSide || cfg.Height != OmniglotSourceSide {
		return fmt.Errorf("datasets: %s: image is %d×%d, want %d×%d", label, cfg.Width, cfg.Height, OmniglotSourceSide, OmniglotSourceSide)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("datasets: %s: damaged PNG: %v", label, err)
	}
	inkOf(img, s.ink[:])
	resizeArea(s.ink[:], OmniglotSourceSide, s.out[:], OmniglotSide, s.tmp[:])
	for i, v := range s.out {
		dst[i] = uint8(math.Round(255 * min(max(v, 0), 1)))
	}
	return nil
}

// inkOf writes 1 − luminance of each pixel: the drawings are black strokes
// on white, and the models expect strokes 1 on background 0.
func inkOf(img image.Image, ink []float64) {
	b := img.Bounds()
	w := b.Dx()
	if g, ok := img.(*image.Gray); ok {
		// Go decodes the 1-bit grayscale originals to Gray; this path
		// avoids an interface call per pixel.
		for y := 0; y < b.Dy(); y++ {
			row := g.Pix[y*g.Stride:][:w]
			for x, v := range row {
				ink[y*w+x] = inkLevels[255-v]
			}
		}
		return
	}
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < w; x++ {
			v := color.Gray16Model.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.Gray16).Y
			ink[y*w+x] = 1 - float64(v)/65535
		}
	}
}

// rotations[k][i] is the source pixel that lands on pixel i when a 28×28
// image is turned counter-clockwise by k·90°, as PIL's Image.rotate(90·k)
// (used by Prototypical Networks) and numpy's rot90(img, k) do: for k = 1
// the top row becomes the left column, its right end at the top. The area
// filter commutes with these rotations, so rotating the 28×28 image equals
// rotating the 105×105 original first as Prototypical Networks does.
var rotations = func() (r [4][OmniglotPixels]uint16) {
	const n = OmniglotSide
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			i := y*n + x
			r[0][i] = uint16(i)
			r[1][i] = uint16(x*n + (n - 1 - y))
			r[2][i] = uint16((n-1-y)*n + (n - 1 - x))
			r[3][i] = uint16((n-1-x)*n + y)
		}
	}
	return r
}()
