package datasets

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The files in testdata/pickle and testdata/npy were written by real
// Python (testdata/gen: Python 2.7's cPickle with numpy's reduce protocol
// for the CIFAR-100 and LEO layouts, Python 3.11 with numpy 1.24 for
// protocols 2 to 5 and numpy.save/savez).

func readTestdata(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The CIFAR-100 train layout in every protocol: 2 images, labels [1, 0],
// pixel j of image i = (3072·i + j)·7 mod 256.
func TestPickleCIFARLayout(t *testing.T) {
	for _, name := range []string{"py2_train.pkl", "py3_train_p2.pkl", "py3_train_p3.pkl", "py3_train_p4.pkl", "py3_train_p5.pkl"} {
		t.Run(name, func(t *testing.T) {
			p, err := parseCIFARPickle(name, readTestdata(t, "pickle", name))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.pix) != 2*3072 || !reflect.DeepEqual(p.fine, []int64{1, 0}) || !reflect.DeepEqual(p.coarse, []int64{1, 0}) {
				t.Fatalf("%d pixels, fine %v, coarse %v", len(p.pix), p.fine, p.coarse)
			}
			for i, v := range p.pix {
				want := byte(i * 7 % 256)
				if name == "py2_train.pkl" {
					want = byte((i/3072*7 + i%3072) % 256)
				}
				if v != want {
					t.Fatalf("pixel %d = %d, want %d", i, v, want)
				}
			}
		})
	}
	fine, coarse, err := parseCIFARMeta("meta", readTestdata(t, "pickle", "py2_meta.pkl"))
	if err != nil || !reflect.DeepEqual(fine, []string{"apple", "bridge"}) || len(coarse) != 2 {
		t.Fatalf("meta: %v %v %v", fine, coarse, err)
	}
}

// LEO's layout: 'embeddings' (3, 4) float32 = 0.5·i, 'keys' as NUL-padded
// bytes, unicode or object arrays.
func TestPickleLEOLayout(t *testing.T) {
	for _, name := range []string{"py2_leo.pkl", "py3_leo_p2.pkl", "py3_leo_p3.pkl", "py3_leo_p4.pkl", "py3_leo_p5.pkl", "py3_leo_object_p4.pkl", "py3_leo_unicode_fortran_p2.pkl"} {
		t.Run(name, func(t *testing.T) {
			d, err := pickleDict(name, readTestdata(t, "pickle", name))
			if err != nil {
				t.Fatal(err)
			}
			emb, err := dictArray(name, d, "embeddings")
			if err != nil {
				t.Fatal(err)
			}
			rows, cols, f, err := emb.floatMatrix("embeddings")
			if err != nil || rows != 3 || cols != 4 {
				t.Fatalf("%d×%d, %v", rows, cols, err)
			}
			for i, v := range f {
				if v != 0.5*float32(i) {
					t.Fatalf("embedding %d = %v, want %v", i, v, 0.5*float32(i))
				}
			}
			keys, err := dictArray(name, d, "keys")
			if err != nil {
				t.Fatal(err)
			}
			names, err := keys.labels("keys")
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"0-n01-n01_1", "1-n01-n01_22", "2-n02-n02_3"}; !reflect.DeepEqual(names, want) {
				t.Fatalf("keys %q, want %q", names, want)
			}
		})
	}
}

func TestNpyFiles(t *testing.T) {
	for _, name := range []string{"f4.npy", "f4_v2.npy", "f4_v3.npy", "f8_fortran.npy"} {
		a, err := parseNpy(readTestdata(t, "npy", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows, cols, f, err := a.floatMatrix(name)
		if err != nil || rows != 3 || cols != 4 {
			t.Fatalf("%s: %d×%d %v", name, rows, cols, err)
		}
		for i, v := range f {
			if v != 0.5*float32(i) {
				t.Fatalf("%s: element %d = %v", name, i, v)
			}
		}
	}
	a, err := parseNpy(readTestdata(t, "npy", "i8.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := a.ints("i8"); err != nil || !reflect.DeepEqual(v, []int64{3, -1, 7}) {
		t.Fatalf("i8: %v %v", v, err)
	}
	for _, name := range []string{"unicode.npy", "bytes.npy"} {
		a, err := parseNpy(readTestdata(t, "npy", name))
		if err != nil {
			t.Fatal(err)
		}
		if v, err := a.labels(name); err != nil || v[1] != "1-n01-n01_22" {
			t.Fatalf("%s: %q %v", name, v, err)
		}
	}
	if a, err := parseNpy(readTestdata(t, "npy", "scalar.npy")); err != nil || len(a.shape) != 0 || len(a.data) != 4 {
		t.Fatalf("scalar: %+v %v", a, err)
	}
	if a, err := parseNpy(readTestdata(t, "npy", "u1_2d.npy")); err != nil || a.dtype() != "|u1" || a.shapeString() != "(2, 4)" {
		t.Fatalf("u1: %+v %v", a, err)
	}
	for _, name := range []string{"embeddings.npz", "embeddings_compressed.npz"} {
		arrays, names, err := readNpzFile(filepath.Join("testdata", "npy", name))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(names, []string{"features", "labels"}) {
			t.Fatalf("%s: arrays %v", name, names)
		}
		if _, _, _, err := arrays["features"].floatMatrix("features"); err != nil {
			t.Fatal(err)
		}
	}
}

// npyBytes writes what parseNpy reads, in numpy's header layout.
func TestNpyRoundTrip(t *testing.T) {
	data := make([]byte, 4*6)
	for i := 0; i < 6; i++ {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(i)))
	}
	a := &npArray{kind: 'f', size: 4, shape: []int{2, 3}, data: data}
	b := npyBytes(a)
	if !bytes.Equal(b, readTestdata(t, "npy", "f4.npy")[:0]) && (len(b)-len(data))%64 != 0 {
		t.Fatalf("header of %d bytes is not padded to 64", len(b)-len(data))
	}
	got, err := parseNpy(b)
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// numpy's own header for the same array, byte for byte.
	want := readTestdata(t, "npy", "f4.npy")
	src, _ := parseNpy(want)
	if !bytes.Equal(npyBytes(src), want) {
		t.Fatalf("npyBytes differs from numpy.save:\n%q\n%q", npyBytes(src)[:80], want[:80])
	}
}

func TestNpyRejects(t *testing.T) {
	good := readTestdata(t, "npy", "f4.npy")
	hdr := func(h string) []byte {
		h += strings.Repeat(" ", 63-(10+len(h))%64) + "\n"
		b := []byte("\x93NUMPY\x01\x00")
		b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
		return append(append(b, h...), make([]byte, 48)...)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"no magic":        {[]byte("PK\x03\x04 not npy"), "no \\x93NUMPY magic"},
		"version 4":       {append([]byte("\x93NUMPY\x04\x00"), good[8:]...), "version 4.0"},
		"truncated data":  {good[:len(good)-1], "needs 48 bytes of data, the file has 47"},
		"extra data":      {append(bytes.Clone(good), 0), "the file has 49"},
		"big-endian":      {hdr("{'descr': '>f4', 'fortran_order': False, 'shape': (3, 4), }"), "big-endian"},
		"structured":      {hdr("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3, 4), }"), "structured"},
		"object":          {hdr("{'descr': '|O', 'fortran_order': False, 'shape': (6,), }"), "object arrays"},
		"missing key":     {hdr("{'descr': '<f4', 'shape': (3, 4), }"), "want the keys"},
		"int as shape":    {hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (12), }"), "shape must be a tuple"},
		"negative":        {hdr("{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4), }"), "shape must be a tuple"},
		"huge":            {hdr("{'descr': '<f8', 'fortran_order': False, 'shape': (999999999999, 999999999999), }"), "needs 8e+24 bytes"},
		"float16":         {hdr("{'descr': '<f2', 'fortran_order': False, 'shape': (24,), }"), "float32 and float64"},
		"duplicate key":   {hdr("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"), "twice"},
		"no newline":      {append([]byte("\x93NUMPY\x01\x00\x04\x00{}  "), 0), "newline"},
		"header too long": {[]byte("\x93NUMPY\x01\x00\xff\x00{}"), "exceeds the file"},
	}
	for name, c := range cases {
		_, err := parseNpy(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
}

func TestPickleRejects(t *testing.T) {
	train := readTestdata(t, "pickle", "py2_train.pkl")
	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty":          {nil, "ends without STOP"},
		"truncated":      {train[:len(train)/2], "bytes"},
		"os.system":      {[]byte("\x80\x02cos\nsystem\nq\x00."), "global os.system is not allowed"},
		"builtins eval":  {[]byte("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x8c\x04eval\x93."), "builtins.eval is not allowed"},
		"protocol 1":     {[]byte("\x80\x01N."), "protocol 1"},
		"text opcode":    {[]byte("I42\n."), "not supported"},
		"bad memo":       {[]byte("\x80\x02h\x05."), "memo 5 was never stored"},
		"underflow":      {[]byte("\x80\x02\x85."), "stack underflow"},
		"two values":     {[]byte("\x80\x02NN."), "STOP with 2 values"},
		"huge binstring": {[]byte("\x80\x02T\xff\xff\xff\x7f"), "wants 2147483647 bytes"},
		"negative len":   {[]byte("\x80\x02T\xff\xff\xff\xff"), "negative length"},
		"bad utf8":       {[]byte("\x80\x03X\x01\x00\x00\x00\xff."), "not UTF-8"},
		"not a dict":     {[]byte("\x80\x02]."), "want a dict"},
		"list key":       {[]byte("\x80\x02}]Ns."), "dict key of type list"},
	}
	for name, c := range cases {
		_, err := pickleDict("x.pkl", c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "datasets: x.pkl") {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
}

// storedNpz packs .npy entries into an uncompressed zip, as numpy.savez
// does.
func storedNpz(arrays map[string]*npArray) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedNames(arrays) {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
		w.Write(npyBytes(arrays[name]))
	}
	zw.Close()
	return buf.Bytes()
}

// Entries of an .npz are bounded together, not only one by one: a hostile
// zip can point many entries at one small deflate stream.
func TestNpzTotalBound(t *testing.T) {
	data := storedNpz(map[string]*npArray{"a": f32Array(10, 10, make([]float32, 100)), "b": f32Array(10, 10, make([]float32, 100))})
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := readNpz(zr, 600); err == nil || !strings.Contains(err.Error(), `entry "b.npy" claims 528 bytes, more than the 600 allowed in all`) {
		t.Fatalf("two 528-byte entries under a 600-byte limit: %v", err)
	}
	if _, _, err := readNpz(zr, 1100); err != nil {
		t.Fatal(err)
	}
}

// npyBytes encodes an array as a version 1.0 .npy file, as numpy.save
// does (header padded with spaces to a multiple of 64 bytes, ending in a
// newline). The tests write their fixtures with it.
func npyBytes(a *npArray) []byte {
	shape := make([]string, len(a.shape))
	for i, d := range a.shape {
		shape[i] = strconv.Itoa(d)
	}
	st := strings.Join(shape, ", ")
	if len(shape) == 1 {
		st += ","
	}
	fo := "False"
	if a.fortran {
		fo = "True"
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }", a.dtype(), fo, st)
	pad := 64 - (10+len(h)+1)%64
	if pad == 64 {
		pad = 0
	}
	h += strings.Repeat(" ", pad) + "\n"
	var buf bytes.Buffer
	buf.WriteString(npyMagic)
	buf.Write([]byte{1, 0})
	binary.Write(&buf, binary.LittleEndian, uint16(len(h)))
	buf.WriteString(h)
	buf.Write(a.data)
	return buf.Bytes()
}
