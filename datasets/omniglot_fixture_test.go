package datasets

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// encodePNG1 writes a 1-bit grayscale PNG like the Omniglot originals
// (Go's encoder would write 8 bits); ink(x, y) marks black stroke pixels.
func encodePNG1(w, h int, ink func(x, y int) bool) []byte {
	stride := (w + 7) / 8
	raw := make([]byte, 0, h*(stride+1))
	for y := 0; y < h; y++ {
		raw = append(raw, 0) // filter: none
		row := make([]byte, stride)
		for x := 0; x < w; x++ {
			if !ink(x, y) { // bit 1 is white
				row[x/8] |= 0x80 >> (x % 8)
			}
		}
		raw = append(raw, row...)
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw)
	zw.Close()
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) { pngChunk(&out, typ, data) }
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8] = 1 // bit depth; colour type 0 (gray), no interlace
	chunk("IHDR", ihdr)
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// fakeDrawing draws character c's drawing k so that every (c, k) and every
// rotation of it gives a different 28×28 image: 15×15 source blocks map
// onto exact 4×4 output blocks, the bits of c·20+k+1 fill block row 3 and a
// marker fills the bottom-left block, which no rotation leaves in place.
func fakeDrawing(c, k int) []byte {
	id := c*OmniglotDrawings + k + 1
	return encodePNG1(OmniglotSourceSide, OmniglotSourceSide, func(x, y int) bool {
		bx, by := x/15, y/15
		if bx == 0 && by == 6 {
			return true
		}
		return by == 3 && id>>bx&1 == 1
	})
}

// fakeOmniglot is a small data set in the original layout: entry name →
// file contents, per half. Tests edit it to inject faults.
type fakeOmniglot [2]map[string][]byte

// newFakeOmniglot makes alphabets×chars characters per half, 20 drawings each.
func newFakeOmniglot(alphabets, chars int) fakeOmniglot {
	var f fakeOmniglot
	c := 0
	for s, set := range omniglotSets {
		f[s] = map[string][]byte{}
		for a := 0; a < alphabets; a++ {
			for ch := 1; ch <= chars; ch++ {
				for k := 0; k < OmniglotDrawings; k++ {
					name := filepath.ToSlash(filepath.Join(set, fakeAlphabet(s, a), fakeCharName(ch), fakeFile(c, k)))
					f[s][name] = fakeDrawing(c, k)
				}
				c++
			}
		}
	}
	return f
}

func fakeAlphabet(set, a int) string { return fmt.Sprintf("Alphabet_%d_%d", set, a) }
func fakeCharName(ch int) string     { return fmt.Sprintf("character%02d", ch) }
func fakeFile(c, k int) string       { return fmt.Sprintf("%04d_%02d.png", c+1, k+1) }

// zipBytes packs entries in sorted order, as a zip tool would.
func zipBytes(entries map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range sortedKeys(entries) {
		w, _ := zw.Create(n)
		w.Write(entries[n])
	}
	zw.Close()
	return buf.Bytes()
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// write puts the data set into dir, each half as a zip or unpacked.
func (f fakeOmniglot) write(t testing.TB, dir string, zipped bool) {
	t.Helper()
	for s, set := range omniglotSets {
		if zipped {
			if err := os.WriteFile(filepath.Join(dir, set+".zip"), zipBytes(f[s]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for name, data := range f[s] {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var realData struct {
	once sync.Once
	o    *Omniglot
	err  error
}

// realOmniglot decodes the real data once per test binary (seconds), with
// no cache so that the test measures and checks the decoder itself.
func realOmniglot(tb testing.TB) *Omniglot {
	tb.Helper()
	dir := testutil.Data(tb, "omniglot")
	realData.once.Do(func() {
		realData.o, realData.err = LoadOmniglot(dir, OmniglotOptions{NoCache: true})
	})
	if realData.err != nil {
		tb.Fatal(realData.err)
	}
	return realData.o
}
