package datasets

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"image"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets for the readers of issue 6's formats, in the pattern of the
// Omniglot ones: untrusted bytes must give errors (with the package prefix
// where the reader adds it), never panics or unbounded allocations, and
// what a reader accepts must be consistent. Seed corpora beyond the f.Add
// seeds are in testdata/fuzz/<target>/ (written from testdata/npy and
// testdata/pickle, the files real Python wrote).

func FuzzNpy(f *testing.F) {
	f.Add(npyBytes(f32Array(2, 3, []float32{1, 2, 3, 4, 5, 6})))
	f.Add(npyBytes(i64Array([]int64{1, -2})))
	f.Add(npyBytes(&npArray{kind: 'U', size: 8, shape: []int{1}, data: []byte("a\x00\x00\x00b\x00\x00\x00")}))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': '<f4'}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parseNpy(data)
		if err != nil {
			return
		}
		if a.kind == 'O' || len(a.data) != elements(a.shape, len(a.data))*a.size {
			t.Fatalf("accepted %s %v with %d bytes", a.dtype(), a.shape, len(a.data))
		}
		again, err := parseNpy(npyBytes(a))
		if err != nil || !reflect.DeepEqual(again, a) {
			t.Fatalf("an accepted array does not round-trip: %v", err)
		}
		// The conversions either fit the array or say why.
		a.floatMatrix("x")
		a.ints("x")
		a.labels("x")
	})
}

func FuzzNpz(f *testing.F) {
	f.Add(storedNpz(map[string]*npArray{"features": f32Array(1, 2, []float32{1, 2}), "labels": i64Array([]int64{3})}))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, data []byte) {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return // archive/zip is not ours to fuzz
		}
		arrays, names, err := readNpz(zr, 1<<20)
		if err != nil {
			return
		}
		if len(arrays) != len(names) {
			t.Fatalf("%d arrays, %d names", len(arrays), len(names))
		}
	})
}

// FuzzPickle runs the pickle machine and then what the loaders ask of its
// result.
func FuzzPickle(f *testing.F) {
	var p py2Pickler
	f.Add(p.dict([]string{"data", "fine_labels"}, func(k string) {
		if k == "data" {
			p.uint8Array(1, 4, []byte{1, 2, 3, 4})
			return
		}
		p.list(1, func(int) { p.int(7) })
	}))
	f.Add([]byte("\x80\x02}q\x00(U\x01aq\x01]q\x02(K\x01K\x02eu."))
	f.Add([]byte("\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94N\x94s."))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parsePickle(data)
		if err != nil {
			return
		}
		d, ok := v.(*pyDict)
		if !ok {
			return
		}
		for _, k := range d.keyNames() {
			a, err := dictArray("fuzz.pkl", d, k)
			if err != nil {
				fuzzErr(t, err)
				continue
			}
			a.floatMatrix(k)
			a.ints(k)
			a.labels(k)
		}
		if _, err := parseCIFARPickle("fuzz", data); err != nil {
			fuzzErr(t, err)
		}
		if _, _, err := parseCIFARMeta("fuzz", data); err != nil {
			fuzzErr(t, err)
		}
	})
}

func FuzzMiniImageNetCSV(f *testing.F) {
	f.Add([]byte("filename,label\nn0153282900000005.jpg,n01532829\n"))
	f.Add([]byte("\xef\xbb\xbffilename,label\r\n\r\na.jpg,b\r\n"))
	f.Add([]byte("filename,label\na/b.jpg,c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseMiniCSV("fuzz.csv", data)
		if err != nil {
			fuzzErr(t, err)
			if !strings.HasPrefix(err.Error(), "datasets: fuzz.csv") {
				t.Fatalf("error %q names no file", err)
			}
			return
		}
		last := 0
		for _, r := range rows {
			if r.line <= last || r.name == "" || r.label == "" {
				t.Fatalf("row %+v after line %d", r, last)
			}
			last = r.line
			again, err := parseMiniCSV("again.csv", []byte("filename,label\n"+r.name+","+r.label+"\n"))
			if err != nil || len(again) != 1 || again[0].name != r.name || again[0].label != r.label {
				t.Fatalf("row %+v reparses to %v, %v", r, again, err)
			}
		}
	})
}

func FuzzDomainNetList(f *testing.F) {
	f.Add([]byte("clipart/aircraft_carrier/clipart_001_000018.jpg 0\nclipart/zigzag/clipart_345_000001.jpg 344\n"))
	f.Add([]byte("clipart/a/b.jpg\t7\r\n\r\n"))
	f.Add([]byte("real/a/b.jpg 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := parseDomainList("fuzz.txt", "clipart", data)
		if err != nil {
			fuzzErr(t, err)
			return
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if !strings.HasPrefix(l.path, "clipart/"+l.category+"/") || l.label < 0 || seen[l.path] {
				t.Fatalf("accepted %+v", l)
			}
			seen[l.path] = true
		}
	})
}

func FuzzCIFARFSSplit(f *testing.F) {
	f.Add([]byte(`[["aquatic_mammals","dolphin"],["fish","ray"]]`))
	f.Add([]byte(`[["a","b"]] [`))
	f.Add([]byte(`[["a"]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pairs, err := parseCIFARFSSplit("fuzz.json", data)
		if err != nil {
			fuzzErr(t, err)
			return
		}
		b, _ := json.Marshal(pairs)
		again, err := parseCIFARFSSplit("again.json", b)
		if err != nil || !reflect.DeepEqual(again, pairs) {
			t.Fatalf("%v does not round-trip: %v", pairs, err)
		}
	})
}

// imageCacheBody is a valid image cache file without its checksum.
func imageCacheBody(names ...string) []byte {
	classes := make([]ImageClass, len(names))
	for i, n := range names {
		classes[i] = ImageClass{Name: n, Images: i + 1}
	}
	s, _ := newImageSet("fuzz", "fuzz", 2, 3, classes, [32]byte{1}, nil)
	for i := range s.pix {
		s.pix[i] = byte('a' + i%26)
	}
	var buf bytes.Buffer
	encodeImageCache(&buf, s)
	return buf.Bytes()[:buf.Len()-32]
}

// The target appends a valid checksum, so that the fuzzer explores the
// parser behind it.
func FuzzImageCache(f *testing.F) {
	f.Add(imageCacheBody("n01532829"))
	f.Add(imageCacheBody("apple", "bridge"))
	f.Add([]byte(imageCacheMagic))
	f.Fuzz(func(t *testing.T, body []byte) {
		var key [32]byte
		if len(body) >= 44 {
			copy(key[:], body[12:44])
		}
		data := appendSum(bytes.Clone(body))
		s, err := decodeImageCache(data, key)
		if err != nil {
			fuzzErr(t, err)
			return
		}
		var buf bytes.Buffer
		if err := encodeImageCache(&buf, s); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatal("an accepted cache file does not re-encode to itself")
		}
	})
}

func FuzzDecodeRGB(f *testing.F) {
	f.Add(encodeJPEG(fixturePhoto(1, 2, 9, 7)))
	f.Add(encodePNGImage(fixturePhoto(2, 1, 5, 11)))
	f.Add(encodePNGImage(image.NewGray16(image.Rect(0, 0, 3, 2))))
	f.Add(encodePNG1(4, 4, func(x, y int) bool { return x == y }))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Headers may claim up to maxImagePixels, which decodes (slowly)
		// to hundreds of MB; the fuzzer explores small images.
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && cfg.Width*cfg.Height > 1<<16 {
			return
		}
		var s rgbScratch
		a := make([]uint8, 8*6*3)
		if err := decodeRGB("fuzz.jpg", data, 6, 8, a, &s); err != nil {
			fuzzErr(t, err)
			return
		}
		b := make([]uint8, len(a))
		if err := decodeRGB("fuzz.jpg", data, 6, 8, b, &s); err != nil || !bytes.Equal(a, b) {
			t.Fatalf("second decode differs (error %v)", err)
		}
	})
}
