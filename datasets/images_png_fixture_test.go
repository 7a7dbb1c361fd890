package datasets

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// pngSpec describes a PNG written by writePNG, which image/png's encoder
// cannot write: any depth of 8 or 16 and colour type, a tRNS chunk,
// Adam7 interlacing, and images of gigabytes streamed a row at a time.
type pngSpec struct {
	w, h         int
	depth, ctype int // 8 or 16; 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA
	interlace    bool
	plte, trns   []byte
}

func (sp pngSpec) bytesPerPixel() int {
	n := map[int]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[sp.ctype]
	return n * sp.depth / 8
}

// writePNG writes sp with the pixels row(y, buf) puts in buf (w pixels of
// bytesPerPixel bytes, big-endian); interlaced images take their passes'
// pixels from the same rows.
func writePNG(out io.Writer, sp pngSpec, row func(y int, buf []byte)) error {
	w := bufio.NewWriter(out)
	w.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(kind string, data []byte) { pngChunk(w, kind, data) }
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(sp.w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(sp.h))
	ihdr[8], ihdr[9] = byte(sp.depth), byte(sp.ctype)
	if sp.interlace {
		ihdr[12] = 1
	}
	chunk("IHDR", ihdr)
	if sp.plte != nil {
		chunk("PLTE", sp.plte)
	}
	if sp.trns != nil {
		chunk("tRNS", sp.trns)
	}
	var idat bytes.Buffer
	z, _ := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	flush := func() {
		if idat.Len() >= 1<<20 {
			chunk("IDAT", idat.Bytes())
			idat.Reset()
		}
	}
	bpp := sp.bytesPerPixel()
	full := make([]byte, sp.w*bpp)
	line := make([]byte, 1+sp.w*bpp)
	if !sp.interlace {
		for y := 0; y < sp.h; y++ {
			row(y, line[1:])
			z.Write(line)
			flush()
		}
	} else {
		for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			if p[0] >= sp.w || p[1] >= sp.h {
				continue
			}
			for y := p[1]; y < sp.h; y += p[3] {
				row(y, full)
				l := line[:1]
				for x := p[0]; x < sp.w; x += p[2] {
					l = append(l, full[x*bpp:(x+1)*bpp]...)
				}
				z.Write(l)
				flush()
			}
		}
	}
	z.Close()
	chunk("IDAT", idat.Bytes())
	chunk("IEND", nil)
	return w.Flush()
}

// pngChunk writes a PNG chunk: length, kind, data, CRC.
func pngChunk(w io.Writer, kind string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	w.Write(n[:])
	c := crc32.NewIEEE()
	c.Write([]byte(kind))
	c.Write(data)
	io.WriteString(w, kind)
	w.Write(data)
	binary.BigEndian.PutUint32(n[:], c.Sum32())
	w.Write(n[:])
}

// pngBytes is writePNG to memory.
func pngBytes(sp pngSpec, row func(y int, buf []byte)) []byte {
	var b bytes.Buffer
	writePNG(&b, sp, row)
	return b.Bytes()
}

// writePNGFile is writePNG to the file path.
func writePNGFile(t testing.TB, path string, sp pngSpec, row func(y int, buf []byte)) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePNG(f, sp, row); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// patternRow fills a row with a pattern that varies with y and x.
func patternRow(y int, buf []byte) {
	for i := range buf {
		buf[i] = byte(i*7 + y*13 + (i*y)>>5)
	}
}

// costCases are images of every kind the decoders allocate differently
// for, at a size where the pixels outweigh the fixed costs.
func costCases(t testing.TB) map[string][]byte {
	const w, h = 640, 480
	grey := func(y int, b []byte) { patternRow(y, b) }
	cases := map[string][]byte{
		"png grey8":            pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 0}, grey),
		"png grey8 tRNS":       pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 0, trns: []byte{0, 7}}, grey),
		"png grey16":           pngBytes(pngSpec{w: w, h: h, depth: 16, ctype: 0}, grey),
		"png grey16 tRNS":      pngBytes(pngSpec{w: w, h: h, depth: 16, ctype: 0, trns: []byte{0, 7}}, grey),
		"png grey+alpha8":      pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 4}, grey),
		"png grey+alpha16":     pngBytes(pngSpec{w: w, h: h, depth: 16, ctype: 4}, grey),
		"png rgb8":             pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 2}, grey),
		"png rgb8 tRNS":        pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 2, trns: []byte{0, 1, 0, 2, 0, 3}}, grey),
		"png rgb16":            pngBytes(pngSpec{w: w, h: h, depth: 16, ctype: 2}, grey),
		"png rgba8":            pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 6}, grey),
		"png rgba16":           pngBytes(pngSpec{w: w, h: h, depth: 16, ctype: 6}, grey),
		"png palette":          pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 3, plte: bytes.Repeat([]byte{1, 2, 3}, 256)}, grey),
		"png palette tRNS":     pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 3, plte: bytes.Repeat([]byte{1, 2, 3}, 256), trns: bytes.Repeat([]byte{9}, 256)}, grey),
		"png rgb8 interlaced":  pngBytes(pngSpec{w: w, h: h, depth: 8, ctype: 2, interlace: true}, grey),
		"png rgba16 interlace": pngBytes(pngSpec{w: w, h: h, depth: 16, ctype: 6, interlace: true}, grey),
		"jpeg grey":            encodeJPEG(image.NewGray(image.Rect(0, 0, w, h))),
		"jpeg 4:2:0":           encodeJPEG(fixturePhoto(1, 2, w, h)),
	}
	for _, name := range []string{"prog444", "prog420", "proggray", "base444", "rgb"} {
		data, err := os.ReadFile(filepath.Join("testdata", "jpeg", name+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		cases["jpeg "+name] = data
	}
	return cases
}
