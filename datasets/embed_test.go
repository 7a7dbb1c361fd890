package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeEmbeddings is a split of features: classes Gaussian clusters of
// width dim around well separated centres, per examples each, rows
// interleaved across classes as a feature extractor would write them in
// file order.
type fakeEmbeddings struct {
	dim     int
	feats   []float32
	labels  []int64
	classes int
}

func newFakeEmbeddings(first, classes, per, dim int) fakeEmbeddings {
	return newFakeEmbeddingsNoisy(first, classes, per, dim, dim, 0)
}

// newFakeEmbeddingsNoisy puts the class centres in the first informative
// dimensions only; the rest hold noise of standard deviation nuisance, which
// an untrained embedding weighs as much as the signal.
func newFakeEmbeddingsNoisy(first, classes, per, dim, informative int, nuisance float64) fakeEmbeddings {
	f := fakeEmbeddings{dim: dim, classes: classes}
	for k := 0; k < per; k++ {
		for c := first; c < first+classes; c++ {
			centre := rand.New(rand.NewPCG(uint64(c), 99))
			noise := rand.New(rand.NewPCG(uint64(c), uint64(k)))
			for i := 0; i < dim; i++ {
				v := 2*centre.NormFloat64() + 0.5*noise.NormFloat64()
				if i >= informative {
					v = nuisance * noise.NormFloat64()
				}
				f.feats = append(f.feats, float32(v))
			}
			f.labels = append(f.labels, int64(c))
		}
	}
	return f
}

func f32Array(rows, cols int, v []float32) *npArray {
	a := &npArray{kind: 'f', size: 4, shape: []int{rows, cols}, data: make([]byte, 4*len(v))}
	for i, x := range v {
		binary.LittleEndian.PutUint32(a.data[4*i:], math.Float32bits(x))
	}
	return a
}

func i64Array(v []int64) *npArray {
	a := &npArray{kind: 'i', size: 8, shape: []int{len(v)}, data: make([]byte, 8*len(v))}
	for i, x := range v {
		binary.LittleEndian.PutUint64(a.data[8*i:], uint64(x))
	}
	return a
}

func (f fakeEmbeddings) npz() []byte {
	return storedNpz(map[string]*npArray{
		"features": f32Array(len(f.labels), f.dim, f.feats),
		"labels":   i64Array(f.labels),
	})
}

func TestEmbeddingsNpz(t *testing.T) {
	f := newFakeEmbeddings(10, 3, 4, 5)
	path := filepath.Join(t.TempDir(), "train.npz")
	writeFile(t, path, f.npz())
	e, err := LoadEmbeddings(path, "train", EmbeddingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.NumClasses() != 3 || e.InDim() != 5 || e.NumExamples() != 12 || e.Family() != "embeddings" || e.Name() != "train" {
		t.Fatalf("%d classes, dim %d, %d examples", e.NumClasses(), e.InDim(), e.NumExamples())
	}
	// Class 1 (label 11) example 2 is file row 2·3+1.
	if c := e.Class(1); c.Name != "11" || c.Examples != 4 {
		t.Fatalf("class 1: %+v", c)
	}
	got := make([]float64, 5)
	e.Image(1, 2, got)
	for i, v := range got {
		if float32(v) != f.feats[(2*3+1)*5+i] {
			t.Fatalf("class 1 example 2 = %v", got)
		}
	}
	// The same as .npy files and with unit-length rows.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "f.npy"), npyBytes(f32Array(12, 5, f.feats)))
	writeFile(t, filepath.Join(dir, "l.npy"), npyBytes(i64Array(f.labels)))
	n, err := LoadEmbeddings(filepath.Join(dir, "f.npy"), "train", EmbeddingOptions{LabelsFile: filepath.Join(dir, "l.npy"), Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	n.Image(1, 2, got)
	var norm, dot float64
	want := make([]float64, 5)
	e.Image(1, 2, want)
	for i := range got {
		norm += got[i] * got[i]
		dot += got[i] * want[i]
	}
	if math.Abs(norm-1) > 1e-6 || dot <= 0 {
		t.Fatalf("normalized row has squared length %v", norm)
	}
}

// The real files (numpy.savez, Python 2 and 3 LEO pickles) load.
func TestEmbeddingsRealFiles(t *testing.T) {
	for _, name := range []string{"npy/embeddings.npz", "npy/embeddings_compressed.npz", "pickle/py2_leo.pkl", "pickle/py3_leo_p4.pkl", "pickle/py3_leo_object_p4.pkl"} {
		e, err := LoadEmbeddings(filepath.Join("testdata", name), "test", EmbeddingOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var names []string
		for c := 0; c < e.NumClasses(); c++ {
			names = append(names, fmt.Sprintf("%s×%d", e.Class(c).Name, e.Class(c).Examples))
		}
		want := []string{"n01×2", "n02×1"}
		switch name {
		case "npy/embeddings.npz":
			want = []string{"5×2", "9×1"}
		case "npy/embeddings_compressed.npz":
			// Labels called "labels" are class names as they stand, even
			// when they look like LEO's keys.
			want = []string{"0-n01-n01_1×1", "1-n01-n01_22×1", "2-n02-n02_3×1"}
		}
		if !reflect.DeepEqual(names, want) || e.InDim() != 4 {
			t.Fatalf("%s: classes %v, dim %d; want %v", name, names, e.InDim(), want)
		}
		got := make([]float64, 4)
		e.Image(e.NumClasses()-1, 0, got)
		if got[0] != 4 || got[3] != 5.5 {
			t.Fatalf("%s: class 1 = %v, want row 2 of 0.5·i", name, got)
		}
	}
}

func TestEmbeddingsErrors(t *testing.T) {
	dir := t.TempDir()
	f := newFakeEmbeddings(0, 2, 2, 3)
	write := func(name string, arrays map[string]*npArray) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, storedNpz(arrays))
		return p
	}
	feats := f32Array(4, 3, f.feats)
	cases := []struct {
		path string
		opts EmbeddingOptions
		want []string
	}{
		{write("nolabels.npz", map[string]*npArray{"features": feats}), EmbeddingOptions{}, []string{"nolabels.npz has no labels array", "it has features"}},
		{write("two.npz", map[string]*npArray{"features": feats, "x": feats, "labels": i64Array(f.labels)}), EmbeddingOptions{}, []string{"several candidate features arrays (features, x)"}},
		{write("count.npz", map[string]*npArray{"features": feats, "labels": i64Array(f.labels[:3])}), EmbeddingOptions{}, []string{`count.npz: "labels" has 3 labels for 4 feature vectors`}},
		{write("named.npz", map[string]*npArray{"features": feats, "labels": i64Array(f.labels)}), EmbeddingOptions{Features: "emb"}, []string{`no array "emb"`}},
		{write("ints.npz", map[string]*npArray{"features": i64Array(f.labels), "labels": i64Array(f.labels)}), EmbeddingOptions{}, []string{`"features" is a <i8 array of shape (4)`, "2-D float32 or float64"}},
		{write("nan.npz", map[string]*npArray{"features": f32Array(4, 3, append([]float32{float32(math.NaN())}, f.feats[1:]...)), "labels": i64Array(f.labels)}), EmbeddingOptions{}, []string{"row 0 column 0 is NaN"}},
		{write("badkey.npz", map[string]*npArray{"features": f32Array(1, 3, f.feats[:3]), "keys": {kind: 'S', size: 12, shape: []int{1}, data: []byte("0-n01-n02_11")}}), EmbeddingOptions{}, []string{`"keys"[0] = "0-n01-n02_11"`, "not of class n01"}},
		{filepath.Join(dir, "x.npy"), EmbeddingOptions{}, []string{"LabelsFile"}},
		{filepath.Join(dir, "x.h5"), EmbeddingOptions{}, []string{`not ".h5"`}},
		{filepath.Join(dir, "missing.npz"), EmbeddingOptions{}, []string{"missing.npz", "no such file"}},
	}
	for _, c := range cases {
		_, err := LoadEmbeddings(c.path, "train", c.opts)
		checkErr(t, err, c.want...)
	}
	if _, err := EmbeddingSplitFile(dir, "val"); err == nil || !errors.Is(err, ErrNoEmbeddings) || !strings.Contains(err.Error(), "val_embeddings.pkl") {
		t.Fatalf("missing split file: %v", err)
	}
	writeFile(t, filepath.Join(dir, "val_embeddings.pkl"), nil)
	if p, err := EmbeddingSplitFile(dir, "val"); err != nil || filepath.Base(p) != "val_embeddings.pkl" {
		t.Fatalf("LEO layout: %s, %v", p, err)
	}
}

func TestDefaultDataDirs(t *testing.T) {
	t.Setenv("MKBENCH_DATA", "/data/sets")
	for name, got := range map[string]string{"miniimagenet": DefaultMiniImageNetDir(), "cifarfs": DefaultCIFARFSDir(), "domainnet": DefaultDomainNetDir(), "embeddings": DefaultEmbeddingsDir()} {
		if got != filepath.Join("/data/sets", name) {
			t.Fatalf("%s: %s", name, got)
		}
	}
}
