package datasets

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers JPEG for image.Decode
	"io/fs"
	"os"

	"github.com/mkbench/mkbench/internal/runfile"
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

// decodeRGBWith is decodeRGB with the given resize filter. data is the
// caller's; the decode's own memory waits for its turn at decodeGate.
func decodeRGBWith(label string, data []byte, h, w int, dst []uint8, s *rgbScratch, filter resizeFilter) error {
	hd, err := readImageHead(label, data, w, h, filter)
	if err != nil {
		return err
	}
	held := decodeGate.acquire(hd.cost)
	defer decodeGate.releaseDecode(held, hd.cost)
	return decodeHeaded(label, data, hd, hd.cost, h, w, dst, s, filter)
}

// decodeHeaded decodes an image whose headers readImageHead has read and
// resizes it into dst; holding is the memory it holds at decodeGate, for
// decodeHook.
func decodeHeaded(label string, data []byte, hd imageHead, holding int64, h, w int, dst []uint8, s *rgbScratch, filter resizeFilter) error {
	if decodeHook != nil {
		decodeHook(label, holding, true)
		defer decodeHook(label, holding, false)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("datasets: %s: damaged %s image: %v", label, hd.format, err)
	}
	b := img.Bounds()
	if b.Dx() != hd.cfg.Width || b.Dy() != hd.cfg.Height {
		return fmt.Errorf("datasets: %s: image header says %d×%d, pixels are %d×%d", label, hd.cfg.Width, hd.cfg.Height, b.Dx(), b.Dy())
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
	case *image.Paletted:
		// At returns the palette's entry itself, so nothing is allocated;
		// an NRGBA entry (a PNG palette with transparency) is taken as
		// it is, as color.NRGBAModel takes it.
		for x := 0; x < w; x++ {
			var r, g, bl uint8
			if c, ok := m.At(b.Min.X+x, b.Min.Y+y).(color.NRGBA); ok {
				r, g, bl = c.R, c.G, c.B
			} else {
				r, g, bl = straightRGB(m.At(b.Min.X+x, b.Min.Y+y).RGBA())
			}
			o[3*x], o[3*x+1], o[3*x+2] = float32(r), float32(g), float32(bl)
		}
	case image.RGBA64Image:
		// 16-bit PNGs, CMYK JPEGs: RGBA64At is At without
		// an allocation a pixel, and the colour is un-premultiplied as
		// color.NRGBAModel does.
		for x := 0; x < w; x++ {
			c := m.RGBA64At(b.Min.X+x, b.Min.Y+y)
			r, g, bl := straightRGB(uint32(c.R), uint32(c.G), uint32(c.B), uint32(c.A))
			o[3*x], o[3*x+1], o[3*x+2] = float32(r), float32(g), float32(bl)
		}
	default:
		for x := 0; x < w; x++ {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			o[3*x], o[3*x+1], o[3*x+2] = float32(c.R), float32(c.G), float32(c.B)
		}
	}
}

// straightRGB is the colour of color.NRGBAModel.Convert for premultiplied
// 16-bit r, g, b, a, to the byte.
func straightRGB(r, g, b, a uint32) (uint8, uint8, uint8) {
	switch a {
	case 0xffff:
	case 0:
		return 0, 0, 0
	default:
		r, g, b = r*0xffff/a, g*0xffff/a, b*0xffff/a
	}
	return uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)
}

// decodeImageFiles decodes files[i] into pix[i·h·w·3:] on workers
// goroutines (see decodeFiles), a file's bytes and its decode counted
// together at decodeGate.
func decodeImageFiles(files []drawingFile, pix []uint8, h, w, workers int, filter resizeFilter) error {
	n := h * w * ImageChannels
	return forEachFile(len(files), workers, func(i int, s *rgbScratch) error {
		f, dst := files[i], pix[i*n:(i+1)*n]
		if f.path == "" {
			data, err := f.read()
			if err != nil {
				return err
			}
			return decodeRGBWith(f.label, data, h, w, dst, s, filter)
		}
		return decodeImageFile(f, h, w, dst, s, filter)
	})
}

// decodeImageFile reads and decodes the image file f.path. Its bytes are
// taken at decodeGate before it is read; its decode's, once the header has
// told them, are taken only if they fit at once: a holder that waited could
// wait on other holders for ever. Otherwise the bytes are let go, the whole
// is waited for, and the file read again (from the page cache), which
// happens only while large images crowd the gate.
func decodeImageFile(f drawingFile, h, w int, dst []uint8, s *rgbScratch, filter resizeFilter) error {
	size, err := imageFileSize(f)
	if err != nil {
		return err
	}
	held := decodeGate.acquire(size)
	defer func() { decodeGate.releaseDecode(held, held-size) }()
	data, err := readImageFile(f, size)
	if err != nil {
		return err
	}
	hd, err := readImageHead(f.label, data, w, h, filter)
	if err != nil {
		return err
	}
	if decodeGate.tryAcquire(hd.cost) {
		held += hd.cost
	} else {
		decodeGate.release(held)
		held, data = 0, nil
		held = decodeGate.acquire(size + hd.cost)
		if data, err = readImageFile(f, size); err != nil {
			return err
		}
		again, err := readImageHead(f.label, data, w, h, filter)
		if err != nil {
			return err
		}
		if again.cost > hd.cost {
			return fmt.Errorf("datasets: %s changed while it was read; load again when nothing is writing to it", f.label)
		}
		hd = again
	}
	return decodeHeaded(f.label, data, hd, held, h, w, dst, s, filter)
}

// imageFileSize is the size of the image file f.path, refused when it is
// not a regular file (reading a FIFO or a device could block or never end)
// or is larger than maxImageBytes.
func imageFileSize(f drawingFile) (int64, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return 0, fmt.Errorf("datasets: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("datasets: %s is not a regular file (%s); keep only image files in the folder", f.label, fileKind(fi.Mode()))
	}
	if fi.Size() > maxImageBytes {
		return 0, fmt.Errorf("datasets: %s is %s, more than the %s an image file may be; downscale it", f.label, runfile.Size(fi.Size()), runfile.Size(maxImageBytes))
	}
	return fi.Size(), nil
}

// readImageFile reads the image file f.path, which imageFileSize found
// to hold size bytes; a file that has grown since is refused, since the
// bytes it holds at decodeGate are size.
func readImageFile(f drawingFile, size int64) ([]byte, error) {
	data, err := runfile.ReadBounded(f.path, size)
	if errors.Is(err, runfile.ErrTooLarge) {
		return nil, fmt.Errorf("datasets: %s changed while it was read; load again when nothing is writing to it", f.label)
	}
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	return data, nil
}

// fileKind names what a file that is not regular is, for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// imageFile is the drawingFile of the image file p, named in messages as
// runfile.Printable shows it (a file name can hold a terminal's control
// sequences, or bytes that are not UTF-8).
func imageFile(p string) drawingFile {
	return drawingFile{label: runfile.Printable(p), path: p}
}
