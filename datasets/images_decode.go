package datasets

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers JPEG for image.Decode
)

const (
	// maxImageBytes bounds one image file (the largest ImageNet and
	// DomainNet JPEGs are a few MB), so a damaged or hostile archive
	// cannot exhaust memory.
	maxImageBytes = 64 << 20
	// maxImagePixels bounds the decoded size a header may claim (64
	// megapixels, 256 MB as RGBA), checked before decoding.
	maxImagePixels = 64 << 20
)

// decodeRGB decodes a JPEG or PNG (whatever the file's extension says: some
// ImageNet "JPEGs" are PNGs) and area-resizes it to h×w RGB, written to
// dst[:h·w·3] HWC. Colour is converted as PIL's Image.convert("RGB") does
// for the common cases: grey is replicated, transparency dropped. The size
// is checked from the header before decoding.
func decodeRGB(label string, data []byte, h, w int, dst []uint8, s *rgbScratch) error {
	return decodeRGBWith(label, data, h, w, dst, s, filterArea)
}

// The filters images are resized with.
type resizeFilter int

const (
	// filterArea averages each output pixel's footprint (PIL's
	// Image.resize with a box filter): the sets whose pipelines use PIL.
	filterArea resizeFilter = iota
	// filterBilinearAligned is TensorFlow's resize_bilinear with
	// align_corners=True: Meta-Dataset's decoder (data/decoder.py).
	filterBilinearAligned
)

// decodeRGBWith is decodeRGB with the given resize filter.
func decodeRGBWith(label string, data []byte, h, w int, dst []uint8, s *rgbScratch, filter resizeFilter) error {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("datasets: %s: not a JPEG or PNG image: %v", label, err)
	}
	if format != "jpeg" && format != "png" {
		return fmt.Errorf("datasets: %s: a %s image, want JPEG or PNG", label, format)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxImagePixels/cfg.Height {
		return fmt.Errorf("datasets: %s: image claims to be %d×%d pixels", label, cfg.Width, cfg.Height)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("datasets: %s: damaged %s image: %v", label, format, err)
	}
	b := img.Bounds()
	if b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return fmt.Errorf("datasets: %s: image header says %d×%d, pixels are %d×%d", label, cfg.Width, cfg.Height, b.Dx(), b.Dy())
	}
	read := func(y int, row []float32) { rgbRow(img, y, row) }
	if filter == filterBilinearAligned {
		resizeBilinearRGB(read, b.Dx(), b.Dy(), dst[:h*w*3], w, h, s)
	} else {
		resizeAreaRGB(read, b.Dx(), b.Dy(), dst[:h*w*3], w, h, s)
	}
	return nil
}

// rgbRow writes row y (counted from the top of the bounds) of img as
// interleaved R, G, B in 0..255; converting a row at a time keeps the
// working memory at one row instead of a float copy of the image.
func rgbRow(img image.Image, y int, o []float32) {
	b := img.Bounds()
	w := b.Dx()
	switch m := img.(type) {
	case *image.YCbCr:
		// Baseline JPEGs decode to YCbCr; converting here avoids an
		// interface call and an allocation per pixel.
		for x := 0; x < w; x++ {
			yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
			ci := m.COffset(b.Min.X+x, b.Min.Y+y)
			r, g, bl := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			o[3*x], o[3*x+1], o[3*x+2] = float32(r), float32(g), float32(bl)
		}
	case *image.Gray:
		row := m.Pix[y*m.Stride:][:w]
		for x, v := range row {
			f := float32(v)
			o[3*x], o[3*x+1], o[3*x+2] = f, f, f
		}
	case *image.RGBA:
		// Premultiplied; opaque images (all JPEG-derived ones) are
		// unaffected, and PNG decodes translucent images to NRGBA.
		row := m.Pix[y*m.Stride:][:4*w]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = float32(row[4*x]), float32(row[4*x+1]), float32(row[4*x+2])
		}
	case *image.NRGBA:
		// Straight alpha: the colour is kept and alpha dropped, as PIL's
		// convert("RGB") does.
		row := m.Pix[y*m.Stride:][:4*w]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = float32(row[4*x]), float32(row[4*x+1]), float32(row[4*x+2])
		}
	default:
		for x := 0; x < w; x++ {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			o[3*x], o[3*x+1], o[3*x+2] = float32(c.R), float32(c.G), float32(c.B)
		}
	}
}

// decodeImageFiles decodes files[i] into pix[i·h·w·3:] on workers
// goroutines (see decodeFiles).
func decodeImageFiles(files []drawingFile, pix []uint8, h, w, workers int, filter resizeFilter) error {
	n := h * w * ImageChannels
	return decodeFiles(files, workers, func(i int, data []byte, s *rgbScratch) error {
		return decodeRGBWith(files[i].label, data, h, w, pix[i*n:(i+1)*n], s, filter)
	})
}

// imageFileReader reads a file on disk for decodeImageFiles, bounded by
// maxImageBytes.
func imageFileReader(p string) func() ([]byte, error) {
	return func() ([]byte, error) { return readFileAtMost(p, maxImageBytes) }
}
