package datasets

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecodeImageBudget feeds user bytes through the budgeted decode: an
// image is refused from its headers (one line, the package's prefix) or
// decoded, and whatever the decoder makes of the bytes, damaged or not,
// it allocates no more than the headers predicted.
func FuzzDecodeImageBudget(f *testing.F) {
	grey := func(y int, b []byte) { patternRow(y, b) }
	f.Add(pngBytes(pngSpec{w: 7, h: 5, depth: 16, ctype: 6, interlace: true}, grey))
	f.Add(pngBytes(pngSpec{w: 9, h: 4, depth: 8, ctype: 0, trns: []byte{0, 3}}, grey))
	f.Add(pngBytes(pngSpec{w: 6, h: 6, depth: 8, ctype: 3, plte: bytes.Repeat([]byte{5, 6, 7}, 8), trns: []byte{1, 2}}, func(y int, b []byte) {
		for i := range b {
			b[i] = byte(i+y) % 8
		}
	}))
	f.Add(encodeJPEG(fixturePhoto(1, 2, 9, 7)))
	for _, name := range []string{"prog444", "prog420", "proggray", "rgb"} {
		data, err := os.ReadFile(filepath.Join("testdata", "jpeg", name+".jpg"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// Headers claiming more than the budget, with next to no data.
	giant := pngBytes(pngSpec{w: 1, h: 1, depth: 16, ctype: 6}, grey)
	binary.BigEndian.PutUint32(giant[16:], 8192)
	binary.BigEndian.PutUint32(giant[20:], 8192)
	f.Add(giant)
	f.Fuzz(func(t *testing.T, data []byte) {
		hd, err := readImageHead("fuzz.png", data, 8, 6, filterArea)
		if err != nil {
			fuzzErr(t, err)
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal of two lines: %q", err)
			}
			return
		}
		if hd.cost > 16<<20 {
			// Within the budget but slow to explore: the fuzzer's
			// business is the headers and the decoders' corners.
			return
		}
		dst := make([]uint8, 8*6*3)
		var s rgbScratch
		got := allocated(func() { err = decodeRGB("fuzz.png", data, 6, 8, dst, &s) })
		if err != nil {
			fuzzErr(t, err)
		}
		if int64(got) > hd.cost {
			t.Fatalf("%d×%d %s: decoding allocated %d bytes, the headers predicted %d (error %v)", hd.cfg.Width, hd.cfg.Height, hd.format, got, hd.cost, err)
		}
	})
}
