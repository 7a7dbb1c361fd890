package datasets

// The area filter every image family is resized with: each output pixel is
// the mean of the source over its rectangle, source pixels cut by the edge
// counting with the fraction inside (PIL's BOX filter, OpenCV's
// INTER_AREA). It is separable, so rows are filtered first, into a
// transposed buffer, then columns.

// areaFilter is one axis of an area resize: output o is the sum over
// t < width of w[o·width+t] · source[start[o]+t]. Rows are padded with zero
// weights to a common width so the inner loop has no bounds to look up.
type areaFilter struct {
	start []int
	w     []float64
	width int
}

// newAreaFilter builds the filter from n source pixels to m outputs (n, m
// ≥ 1): each weight is the overlap of a source pixel with the output
// pixel, as a fraction of the output pixel's width n/m. Overlaps are
// computed in integer units of 1/m source pixel, so they are exact and each
// output's weights sum to one up to the rounding of the final divisions.
// The padded width is capped at n, which only tiny sources need (a 2-pixel
// side shrunk to 1, or a 1-pixel side, would otherwise start a window
// before the first pixel).
func newAreaFilter(n, m int) areaFilter {
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

// at is output o of the filter over the single-channel line src.
func (f *areaFilter) at(o int, src []float64) float64 {
	w := f.w[o*f.width:][:f.width]
	in := src[f.start[o]:][:f.width]
	var v float64
	for t, wt := range w {
		v += wt * in[t]
	}
	return v
}

// atRGB is output o of the filter over the interleaved RGB line src.
func (f *areaFilter) atRGB(o int, src []float32) (r, g, b float64) {
	w := f.w[o*f.width:][:f.width]
	in := src[f.start[o]*3:]
	for t, v := range w {
		r += v * float64(in[3*t])
		g += v * float64(in[3*t+1])
		b += v * float64(in[3*t+2])
	}
	return r, g, b
}

// omniglotFilter is the 105 → 28 filter, built once; it is never written.
var omniglotFilter = newAreaFilter(OmniglotSourceSide, OmniglotSide)

// resizeArea area-filters the n×n single-channel image src to the m×m
// image dst (3.75 source pixels per output pixel for Omniglot). tmp holds
// n·m values.
func resizeArea(src []float64, n int, dst []float64, m int, tmp []float64) {
	f := omniglotFilter
	if n != OmniglotSourceSide || m != OmniglotSide {
		f = newAreaFilter(n, m)
	}
	for y := 0; y < n; y++ {
		row := src[y*n : (y+1)*n]
		for x := 0; x < m; x++ {
			tmp[x*n+y] = f.at(x, row) // transposed, so the column pass reads rows
		}
	}
	for x := 0; x < m; x++ {
		col := tmp[x*n : (x+1)*n]
		for y := 0; y < m; y++ {
			dst[y*m+x] = f.at(y, col)
		}
	}
}

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
	f := newAreaFilter(n, m)
	s.filters[[2]int{n, m}] = f
	return f
}

// resizeAreaRGB area-filters the sw×sh interleaved RGB image (values
// 0..255) whose rows readRow writes to w×h and rounds it into dst. The
// aspect ratio is not kept, as PIL's resize((w, h)) does not keep it:
// few-shot pipelines squash photographs to 84×84.
func resizeAreaRGB(readRow func(y int, row []float32), sw, sh int, dst []uint8, w, h int, s *rgbScratch) {
	fx, fy := s.filter(sw, w), s.filter(sh, h)
	s.tmp = growF32(s.tmp, w*sh*3)
	s.row = growF32(s.row, sw*3)
	tmp, row := s.tmp, s.row
	for y := 0; y < sh; y++ {
		readRow(y, row)
		for x := 0; x < w; x++ {
			r, g, b := fx.atRGB(x, row)
			o := tmp[(x*sh+y)*3:]
			o[0], o[1], o[2] = float32(r), float32(g), float32(b)
		}
	}
	for x := 0; x < w; x++ {
		col := tmp[x*sh*3 : (x+1)*sh*3]
		for y := 0; y < h; y++ {
			r, g, b := fy.atRGB(y, col)
			o := dst[(y*w+x)*3:]
			o[0], o[1], o[2] = toByte(r), toByte(g), toByte(b)
		}
	}
}

// resizeBilinearRGB resizes the sw×sh interleaved RGB image (values
// 0..255) whose rows readRow writes to w×h as TensorFlow's
// resize_bilinear with align_corners=True does (the corner pixels map to
// the corners; each output samples the two nearest rows and columns,
// without averaging what lies between: a photograph shrunk to 84×84
// aliases, as in the reference), then rounds into dst.
//
// Only the two source rows an output row samples are held (s.tmp), read
// again when the next output row moves past them, so the working memory is
// two rows, not the image.
func resizeBilinearRGB(readRow func(y int, row []float32), sw, sh int, dst []uint8, w, h int, s *rgbScratch) {
	s.tmp = growF32(s.tmp, 2*sw*3)
	rows := [2][]float32{s.tmp[:sw*3], s.tmp[sw*3:]}
	at := [2]int{-1, -1} // the source row each buffer holds
	row := func(y int) []float32 {
		for i := range at {
			if at[i] == y {
				return rows[i]
			}
		}
		// The rows asked for only move down, and the two of an output
		// row are y and y+1 (or y twice), so the lower-numbered buffer
		// is the one no longer needed.
		i := 0
		if at[1] < at[0] {
			i = 1
		}
		readRow(y, rows[i])
		at[i] = y
		return rows[i]
	}
	scale := func(in, out int) float64 {
		if out > 1 {
			return float64(in-1) / float64(out-1)
		}
		return 0
	}
	sy, sx := scale(sh, h), scale(sw, w)
	for oy := 0; oy < h; oy++ {
		fy := float64(oy) * sy
		top := int(fy)
		bot := min(top+1, sh-1)
		dy := fy - float64(top)
		tr, br := row(top), row(bot)
		for ox := 0; ox < w; ox++ {
			fx := float64(ox) * sx
			left := int(fx)
			right := min(left+1, sw-1)
			dx := fx - float64(left)
			for c := 0; c < 3; c++ {
				tl, trr := float64(tr[left*3+c]), float64(tr[right*3+c])
				bl, brr := float64(br[left*3+c]), float64(br[right*3+c])
				t := tl + (trr-tl)*dx
				b := bl + (brr-bl)*dx
				dst[(oy*w+ox)*3+c] = toByte(t + (b-t)*dy)
			}
		}
	}
}

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
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
