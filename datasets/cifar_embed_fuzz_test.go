package datasets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Fuzz targets for the readers the other fuzz files leave out: the CIFAR-100
// binary version (records, label-name lists, their agreement and the image
// set built from them) and the embeddings loader on whole files (LEO
// pickles and .npz, through LoadEmbeddings: array lookup, labels, LEO keys).

// allocBound fails t when f allocates more than limit bytes: a size field
// claiming a billion elements must be refused before allocating them.
func allocBound(t *testing.T, limit uint64, what string, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Fatalf("%s allocated %d bytes, more than %d", what, got, limit)
	}
}

// FuzzCIFARBinary feeds arbitrary train.bin/test.bin bytes and label-name
// files to the binary reader: errors carry the package prefix and name
// the file; what it accepts has whole records with labels inside the
// named classes, and builds an image set or says why not.
func FuzzCIFARBinary(f *testing.F) {
	fake := newFakeCIFAR(2, 1, 1).binaryFiles()
	f.Add(fake["train.bin"], fake["test.bin"], fake["fine_label_names.txt"], fake["coarse_label_names.txt"])
	f.Add(fake["train.bin"][:cifarPixels+2], fake["test.bin"], []byte("apple\r\nbridge\n"), []byte("fruit\n\n"))
	f.Add(fake["train.bin"], []byte{}, fake["fine_label_names.txt"], []byte("a b\n"))
	f.Add(append([]byte{0, 7}, fake["train.bin"][2:cifarPixels+2]...), fake["test.bin"], fake["fine_label_names.txt"], fake["coarse_label_names.txt"])
	if _, err := parseCIFAR("fake", false, fake, map[string]string{}); err != nil {
		f.Fatalf("the fixture does not parse: %v", err)
	}
	f.Fuzz(func(t *testing.T, train, test, fine, coarse []byte) {
		files := map[string][]byte{"train.bin": train, "test.bin": test, "fine_label_names.txt": fine, "coarse_label_names.txt": coarse}
		labels := map[string]string{}
		for n := range files {
			labels[n] = "fuzz/" + n
		}
		var d *cifar100
		var err error
		allocBound(t, 8<<20+8*uint64(len(train)+len(test)+len(fine)+len(coarse)), "parseCIFAR", func() {
			d, err = parseCIFAR("fuzz", false, files, labels)
		})
		if err != nil {
			fuzzErr(t, err)
			if !strings.Contains(err.Error(), "fuzz/") {
				t.Fatalf("error %q names no file", err)
			}
			return
		}
		for i, p := range d.parts {
			n := len(p.fine)
			if n == 0 || len(p.coarse) != n || len(p.pix) != n*cifarPixels || len(files[[]string{"train.bin", "test.bin"}[i]]) != n*(cifarPixels+2) {
				t.Fatalf("part %d: %d fine, %d coarse labels, %d pixel bytes", i, n, len(p.coarse), len(p.pix))
			}
			for k := range p.fine {
				if p.fine[k] >= int64(len(d.fine)) || p.coarse[k] >= int64(len(d.coarse)) {
					t.Fatalf("image %d: labels %d/%d outside %d/%d classes", k, p.fine[k], p.coarse[k], len(d.fine), len(d.coarse))
				}
			}
		}
		set, err := d.imageSet()
		if err != nil {
			fuzzErr(t, err)
			return
		}
		if set.NumClasses() != len(d.fine) {
			t.Fatalf("%d classes from %d names", set.NumClasses(), len(d.fine))
		}
		if _, err := d.coarseOf(); err != nil {
			fuzzErr(t, err)
		}
	})
}

// fuzzLEOPickle is a Python 2 LEO pickle: {'embeddings': float32 (n, dim),
// 'keys': [...], 'labels': [...]}, as py2Pickler writes cPickle's bytes.
func fuzzLEOPickle(keys []string, dim int) []byte {
	var p py2Pickler
	return p.dict([]string{"embeddings", "keys", "labels"}, func(k string) {
		switch k {
		case "embeddings":
			v := make([]float32, len(keys)*dim)
			for i := range v {
				v[i] = float32(i%5) - 1.5
			}
			fuzzF32Array(&p, f32Array(len(keys), dim, v))
		case "keys":
			p.list(len(keys), func(i int) { p.str(keys[i]) })
		case "labels":
			p.list(len(keys), func(i int) { p.int(i % 3) })
		}
	})
}

// fuzzF32Array writes a 2-D little-endian float32 numpy array as numpy's
// __reduce__ returns it in Python 2 (py2Pickler.uint8Array's layout with
// dtype f4 and byte order '<').
func fuzzF32Array(p *py2Pickler, a *npArray) {
	p.buf.WriteString("cnumpy.core.multiarray\n_reconstruct\n")
	p.put()
	p.buf.WriteString("cnumpy\nndarray\n")
	p.put()
	p.buf.Write([]byte{'K', 0, 0x85})
	p.put()
	p.buf.Write([]byte{'U', 1, 'b', 0x87, 'R'})
	p.put()
	p.buf.WriteByte('(')
	p.int(1)
	p.int(a.shape[0])
	p.int(a.shape[1])
	p.buf.WriteByte(0x86)
	p.put()
	p.buf.WriteString("cnumpy\ndtype\n")
	p.put()
	p.str("f4")
	p.buf.Write([]byte{'K', 0, 'K', 1, 0x87, 'R'})
	p.put()
	p.buf.Write([]byte("(K\x03U\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"))
	p.buf.WriteByte(0x89) // is_fortran False
	p.str(string(a.data))
	p.buf.WriteString("tb")
}

// FuzzLoadEmbeddings writes arbitrary bytes as an embeddings file (.npz
// when they start like a zip, else .pkl) and loads it: errors carry the
// package prefix and name the file; a loaded set is consistent (every
// example has a class, the classes cover the examples, the features are
// finite-sized rows); allocation stays within a multiple of the file size.
func FuzzLoadEmbeddings(f *testing.F) {
	dir := f.TempDir()
	// Real files and valid fixtures, each checked to load.
	for i, name := range []string{"npy/embeddings.npz", "pickle/py2_leo.pkl", "pickle/py3_leo_p2.pkl", "pickle/py3_leo_p4.pkl", "pickle/py3_leo_object_p4.pkl", "fake.npz", "fake.pkl"} {
		var b []byte
		switch name {
		case "fake.npz":
			b = newFakeEmbeddings(0, 3, 2, 4).npz()
		case "fake.pkl":
			b = fuzzLEOPickle([]string{"1-n01-n01_a.jpg", "2-n02-n02_b.jpg", "3-n01-n01_c.jpg"}, 2)
		default:
			var err error
			if b, err = os.ReadFile(filepath.Join("testdata", name)); err != nil {
				f.Fatal(err)
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("seed%d%s", i, filepath.Ext(name)))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			f.Fatal(err)
		}
		if _, err := LoadEmbeddings(path, "train", EmbeddingOptions{}); err != nil {
			f.Fatalf("seed %s does not load: %v", name, err)
		}
		f.Add(b)
	}
	f.Add(fuzzLEOPickle([]string{"1-n01-n02_a.jpg"}, 1))
	f.Add(storedNpz(map[string]*npArray{"features": {kind: 'f', size: 4, shape: []int{1000000000, 640}}, "labels": i64Array([]int64{1})}))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "embeddings.pkl")
		if bytes.HasPrefix(data, []byte("PK")) {
			path = filepath.Join(dir, "embeddings.npz")
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		var e *EmbeddingSet
		var err error
		allocBound(t, 16<<20+64*uint64(len(data)), "LoadEmbeddings", func() {
			e, err = LoadEmbeddings(path, "train", EmbeddingOptions{Normalize: true})
		})
		if err != nil {
			fuzzErr(t, err)
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q names no file", err)
			}
			return
		}
		n, dim := e.NumExamples(), e.InDim()
		if n <= 0 || dim <= 0 || len(e.feats) != n*dim || e.NumClasses() <= 0 {
			t.Fatalf("loaded %d examples of dim %d (%d values), %d classes", n, dim, len(e.feats), e.NumClasses())
		}
		total := 0
		for c := 0; c < e.NumClasses(); c++ {
			if e.ImagesIn(c) <= 0 {
				t.Fatalf("class %d (%s) has %d examples", c, e.Class(c).Name, e.ImagesIn(c))
			}
			total += e.ImagesIn(c)
		}
		if total != n {
			t.Fatalf("classes hold %d examples, the set %d", total, n)
		}
		dst := make([]float64, dim)
		e.Image(e.NumClasses()-1, e.ImagesIn(e.NumClasses()-1)-1, dst)
	})
}
