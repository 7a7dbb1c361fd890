package datasets

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// classColour is the base colour of fixture class c: hues far apart, so
// that classes are told apart by colour alone even after JPEG and resizing.
func classColour(c int) [3]float64 {
	h := float64(c) * 0.618034 // golden-ratio hues spread any number of classes
	h -= math.Floor(h)
	r := 0.5 + 0.4*math.Cos(2*math.Pi*h)
	g := 0.5 + 0.4*math.Cos(2*math.Pi*(h-1.0/3))
	b := 0.5 + 0.4*math.Cos(2*math.Pi*(h-2.0/3))
	return [3]float64{r, g, b}
}

// fixturePhoto is image k of class c: the class colour, a horizontal
// gradient whose direction depends on the class's parity, and per-pixel
// noise, w×h. Images of one class differ; images of different classes
// differ more.
func fixturePhoto(c, k, w, h int) *image.RGBA {
	rng := rand.New(rand.NewPCG(uint64(c), uint64(k)))
	base := classColour(c)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			t := float64(x)/float64(max(w-1, 1)) - 0.5
			if c%2 == 1 {
				t = -t
			}
			var px [3]uint8
			for ch := range px {
				v := base[ch] + 0.15*t + 0.05*rng.NormFloat64()
				px[ch] = uint8(math.Round(255 * min(max(v, 0), 1)))
			}
			img.SetRGBA(x, y, color.RGBA{px[0], px[1], px[2], 255})
		}
	}
	return img
}

// hardPhoto is image k of class c for the learning tests: the class's
// colour at a third of fixturePhoto's saturation under a random brightness
// shift per image that is larger than the differences between classes,
// so that features must be learned (an untrained network sorts images by
// brightness), plus per-pixel noise.
func hardPhoto(c, k, w, h int) *image.RGBA {
	rng := rand.New(rand.NewPCG(uint64(c)+1000, uint64(k)))
	base := classColour(c)
	shift := 0.6 * (rng.Float64() - 0.5)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		for ch := 0; ch < 3; ch++ {
			v := 0.5 + (base[ch]-0.5)/3 + shift + 0.05*rng.NormFloat64()
			img.Pix[4*i+ch] = uint8(math.Round(255 * min(max(v, 0), 1)))
		}
		img.Pix[4*i+3] = 255
	}
	return img
}

func encodeJPEG(img image.Image) []byte {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func encodePNGImage(img image.Image) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// photoSize varies the fixture sizes as photographs vary: landscape,
// portrait, smaller and larger than the output.
func photoSize(c, k int) (w, h int) {
	sizes := [][2]int{{40, 30}, {30, 44}, {84, 84}, {20, 17}, {101, 64}}
	s := sizes[(c+k)%len(sizes)]
	return s[0], s[1]
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// meanColour is the mean R, G, B in [0, 1] of an HWC image.
func meanColour(img []float64) [3]float64 {
	var m [3]float64
	for i, v := range img {
		m[i%3] += v
	}
	for i := range m {
		m[i] /= float64(len(img) / 3)
	}
	return m
}
