package datasets

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

// The fuzz targets feed untrusted bytes to each parser; they must return
// errors with the package prefix, never panic or allocate without bound,
// and whatever they accept must be consistent. Seed corpora beyond the
// f.Add seeds are in testdata/fuzz/<target>/.

func fuzzErr(t *testing.T, err error) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "datasets: ") {
		t.Fatalf("error %q lacks the package prefix", err)
	}
}

// storedZip packs entries uncompressed, so that mutations reach the PNG
// bytes instead of breaking the deflate stream.
func storedZip(entries map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedKeys(entries) {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		w.Write(entries[name])
	}
	zw.Close()
	return buf.Bytes()
}

func FuzzOmniglotZip(f *testing.F) {
	fake := newFakeOmniglot(1, 1)
	f.Add(zipBytes(fake[0]))
	f.Add(storedZip(fake[0]))
	f.Add(storedZip(map[string][]byte{"images_background/A/character01/x.png": fakeDrawing(0, 0)}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return // openZip reports this; archive/zip is not ours to fuzz
		}
		s := &omniglotSource{set: "images_background", path: "fuzz.zip", zr: zr}
		chars, files, err := s.list(true)
		if err != nil {
			fuzzErr(t, err)
			return
		}
		if len(chars) == 0 || len(files) != len(chars)*OmniglotDrawings {
			t.Fatalf("%d characters, %d drawings", len(chars), len(files))
		}
		if _, err := newOmniglot(chars, [32]byte{}, nil); err != nil {
			t.Fatalf("listing gave duplicate characters: %v", err)
		}
		pix := make([]uint8, len(files)*OmniglotPixels)
		if err := decodeDrawings(files, pix, 2); err != nil {
			fuzzErr(t, err)
		}
	})
}

func encodePNG(img image.Image) []byte {
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}

func FuzzOmniglotPNG(f *testing.F) {
	f.Add(fakeDrawing(3, 4))
	f.Add(encodePNG1(105, 105, func(x, y int) bool { return (x/7+y/5)%3 == 0 }))
	f.Add(encodePNG1(104, 105, func(x, y int) bool { return x == y }))
	f.Add(encodePNG(image.NewGray(image.Rect(0, 0, 105, 105))))
	f.Add(encodePNG(image.NewRGBA(image.Rect(0, 0, 105, 105))))
	f.Add(encodePNG(image.NewPaletted(image.Rect(0, 0, 105, 105), color.Palette{color.White, color.Black})))
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s drawingScratch
		a := make([]uint8, OmniglotPixels)
		err := decodeDrawing("fuzz.png", data, a, &s)
		if err != nil {
			fuzzErr(t, err)
			return
		}
		b := make([]uint8, OmniglotPixels)
		if err := decodeDrawing("fuzz.png", data, b, &s); err != nil || !bytes.Equal(a, b) {
			t.Fatalf("second decode differs (error %v)", err)
		}
	})
}

func FuzzOmniglotSplit(f *testing.F) {
	f.Add([]byte("Angelic/character01/rot000\nAngelic/character01/rot090\n"))
	f.Add([]byte("Japanese_(hiragana)/character13/rot270\r\n\r\n"))
	f.Add([]byte("a/b/rot180"))
	f.Add([]byte("a/b/c/rot180\n"))
	f.Add([]byte("../b/rot000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := parseSplit("fuzz.txt", data)
		if err != nil {
			fuzzErr(t, err)
			if !strings.HasPrefix(err.Error(), "datasets: fuzz.txt:") {
				t.Fatalf("error %q names no line", err)
			}
			return
		}
		last := 0
		for _, l := range lines {
			if l.line <= last {
				t.Fatalf("line numbers %d after %d", l.line, last)
			}
			last = l.line
			again, err := parseSplit("again.txt", []byte(l.String()))
			if err != nil || len(again) != 1 || again[0].splitEntry != l.splitEntry {
				t.Fatalf("%q parsed to %v, which reparses to %v, %v", data, l.splitEntry, again, err)
			}
		}
	})
}

// cacheBody is a cache file without its checksum, for characters with
// the given names.
func cacheBody(names ...string) []byte {
	chars := make([]OmniglotCharacter, len(names))
	for i, n := range names {
		chars[i] = OmniglotCharacter{Background: i%2 == 0, Alphabet: "A", Name: n}
	}
	o, _ := newOmniglot(chars, sha256.Sum256([]byte("key")), nil)
	for i := range o.pix {
		o.pix[i] = byte('a' + i%26) // printable, so checked-in seeds stay small
	}
	var buf bytes.Buffer
	encodeOmniglotCache(&buf, o)
	return buf.Bytes()[:buf.Len()-sha256.Size]
}

// The target appends a valid checksum to its input, so that the fuzzer
// explores the parser behind the checksum rather than the checksum.
func FuzzOmniglotCache(f *testing.F) {
	f.Add(cacheBody("character01"))
	f.Add(cacheBody("character01", "character02"))
	f.Add([]byte(omniglotCacheMagic))
	f.Fuzz(func(t *testing.T, body []byte) {
		var key [32]byte
		if len(body) >= 44 {
			copy(key[:], body[12:44])
		}
		data := appendSum(bytes.Clone(body))
		o, err := decodeOmniglotCache(data, key)
		if err != nil {
			fuzzErr(t, err)
			return
		}
		var buf bytes.Buffer
		if err := encodeOmniglotCache(&buf, o); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatal("an accepted cache file does not re-encode to itself")
		}
	})
}
