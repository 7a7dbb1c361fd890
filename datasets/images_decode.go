package datasets

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers JPEG for image.Decode
	"io"
	"os"
	"sync"
	"sync/atomic"
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

// rgbScratch is one decoding goroutine's working memory. Filters are
// cached by (source, output) length because the sizes of photographs
// repeat.
type rgbScratch struct {
	row, tmp []float32
	filters  map[[2]int]areaFilter
}

func (s *rgbScratch) filter(n, m int) areaFilter {
	if f, ok := s.filters[[2]int{n, m}]; ok {
		return f
	}
	if s.filters == nil || len(s.filters) > 256 {
		s.filters = map[[2]int]areaFilter{}
	}
	f := rgbAreaFilter(n, m)
	s.filters[[2]int{n, m}] = f
	return f
}

// rgbAreaFilter is newAreaFilter (Omniglot's 105 → 28) for any sizes
// n, m ≥ 1: its padded width is capped at n, which newAreaFilter's
// fixed-size use never needs (a 2-pixel side shrunk to 1, or a 1-pixel
// side, would start its window before the first pixel). Where both apply
// they give the same weights.
func rgbAreaFilter(n, m int) areaFilter {
	f := areaFilter{start: make([]int, m), width: min((n+m-1)/m+1, n)}
	f.w = make([]float64, m*f.width)
	for o := 0; o < m; o++ {
		lo, hi := o*n, (o+1)*n // output o covers [lo, hi) in units of 1/m
		f.start[o] = min(lo/m, n-f.width)
		for t := 0; t < f.width; t++ {
			i := f.start[o] + t
			if overlap := min(hi, (i+1)*m) - max(lo, i*m); overlap > 0 {
				f.w[o*f.width+t] = float64(overlap) / float64(n)
			}
		}
	}
	return f
}

// decodeRGB decodes a JPEG or PNG (whatever the file's extension says: some
// ImageNet "JPEGs" are PNGs) and area-resizes it to h×w RGB, written to
// dst[:h·w·3] HWC. Colour is converted as PIL's Image.convert("RGB") does
// for the common cases: grey is replicated, transparency dropped. The size
// is checked from the header before decoding.
func decodeRGB(label string, data []byte, h, w int, dst []uint8, s *rgbScratch) error {
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
	resizeAreaRGB(func(y int, row []float32) { rgbRow(img, y, row) }, b.Dx(), b.Dy(), dst[:h*w*3], w, h, s)
	return nil
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
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

// resizeAreaRGB area-filters the sw×sh interleaved RGB image src (values
// 0..255) to w×h and rounds it into dst: each output pixel is the mean of
// the source over its rectangle, source pixels cut by the edge counting
// with the fraction inside (PIL's BOX filter, OpenCV's INTER_AREA). The
// aspect ratio is not kept, as PIL's resize((w, h)) does not keep it:
// few-shot pipelines squash photographs to 84×84. Rows, which readRow
// writes (interleaved RGB), are filtered first, into a transposed buffer,
// then columns.
func resizeAreaRGB(readRow func(y int, row []float32), sw, sh int, dst []uint8, w, h int, s *rgbScratch) {
	fx, fy := s.filter(sw, w), s.filter(sh, h)
	s.tmp = growF32(s.tmp, w*sh*3)
	s.row = growF32(s.row, sw*3)
	tmp, row := s.tmp, s.row
	for y := 0; y < sh; y++ {
		readRow(y, row)
		for x := 0; x < w; x++ {
			wt := fx.w[x*fx.width:][:fx.width]
			in := row[fx.start[x]*3:]
			var r, g, b float64
			for t, v := range wt {
				r += v * float64(in[3*t])
				g += v * float64(in[3*t+1])
				b += v * float64(in[3*t+2])
			}
			o := tmp[(x*sh+y)*3:]
			o[0], o[1], o[2] = float32(r), float32(g), float32(b)
		}
	}
	for x := 0; x < w; x++ {
		col := tmp[x*sh*3 : (x+1)*sh*3]
		for y := 0; y < h; y++ {
			wt := fy.w[y*fy.width:][:fy.width]
			in := col[fy.start[y]*3:]
			var r, g, b float64
			for t, v := range wt {
				r += v * float64(in[3*t])
				g += v * float64(in[3*t+1])
				b += v * float64(in[3*t+2])
			}
			o := dst[(y*w+x)*3:]
			o[0], o[1], o[2] = toByte(r), toByte(g), toByte(b)
		}
	}
}

// toByte rounds a filtered value to the nearest byte; the weights sum to
// one only up to rounding, so the result is clamped.
func toByte(v float64) uint8 {
	v += 0.5
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(v)
}

// decodeImageFiles decodes files[i] into pix[i·h·w·3:] on workers
// goroutines. Results land by index, so the order never depends on
// scheduling, and the error returned is the one of the first failing file
// in list order (as decodeDrawings does for Omniglot).
func decodeImageFiles(files []drawingFile, pix []uint8, h, w, workers int) error {
	n := h * w * ImageChannels
	if workers > len(files) {
		workers = len(files)
	}
	errs := make([]error, len(files))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch rgbScratch
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				data, err := files[i].read()
				if err == nil {
					err = decodeRGB(files[i].label, data, h, w, pix[i*n:(i+1)*n], &scratch)
				}
				if err != nil {
					errs[i] = err
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// imageFileReader reads a file on disk for decodeImageFiles, bounded by
// maxImageBytes.
func imageFileReader(p string) func() ([]byte, error) {
	return func() ([]byte, error) { return readFileAtMost(p, maxImageBytes) }
}

// readFileAtMost reads the regular file p unless it holds more than limit
// bytes; errors name the file.
func readFileAtMost(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	} else if !fi.Mode().IsRegular() {
		// A FIFO would block the reader forever.
		return nil, fmt.Errorf("datasets: %s is not a regular file", p)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("datasets: reading %s: %w", p, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("datasets: %s is larger than %d MB, more than any file of the data set", p, limit>>20)
	}
	return data, nil
}
