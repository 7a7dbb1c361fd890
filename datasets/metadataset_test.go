package datasets

import (
	"bytes"
	"errors"

	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/tfrecord"
)

// mdFixtures is the tiny Meta-Dataset tree written by an independent
// implementation (npm's TFRecord writer and PNG/JPEG encoders; see
// testdata/metadataset/gen.mjs).
const mdFixtures = "testdata/metadataset"

func TestMetaDatasetFixturesLoad(t *testing.T) {
	names, err := MetaDatasetSources(mdFixtures)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "tiny_bilevel,tiny_hier,tiny_plain" {
		t.Fatalf("sources %v", names)
	}
	for _, n := range names {
		src, err := LoadMetaDatasetSource(mdFixtures, n, 16, ImageOptions{NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		set := src.Set()
		total := 0
		for id := 0; id < src.Spec.NumClasses(); id++ {
			total += src.Spec.Images(id)
		}
		if set.NumImages() != total || set.Height() != 16 {
			t.Errorf("%s: %d images at %d, spec says %d", n, set.NumImages(), set.Height(), total)
		}
		test, err := src.Split("test")
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, test.InDim())
		test.Image(0, 0, x)
		lo, hi := 2.0, -2.0
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo < -1 || hi > 1 || hi-lo < 0.5 {
			t.Errorf("%s: pixels in [%g, %g], want a spread within [−1, 1]", n, lo, hi)
		}
	}
}

func TestMetaDatasetEpisodes(t *testing.T) {
	var srcs []*MDSource
	for _, n := range []string{"tiny_plain", "tiny_hier"} {
		s, err := LoadMetaDatasetSource(mdFixtures, n, 8, ImageOptions{NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	ep, err := NewMDEpisodes(srcs, "train", 5, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	var b, c task.Batch
	b.Resize(6, 5, 10, ep.InDim(), ep.OutDim())
	c.Resize(6, 5, 10, ep.InDim(), ep.OutDim())
	ep.Sample(rand.New(rand.NewPCG(1, 2)), &b)
	ep.Sample(rand.New(rand.NewPCG(1, 2)), &c)
	if !slicesEqual(b.XS, c.XS) || !slicesEqual(b.YQ, c.YQ) {
		t.Error("the same seed drew other episodes")
	}
	if _, err := NewMDEpisodes(srcs, "test", 20, 1, 2); err == nil || !strings.Contains(err.Error(), "tiny_plain: 20-way episodes need 20 classes") {
		t.Errorf("way above the split's classes: %v", err)
	}
}

func slicesEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// copyFixture copies the plain fixture source into a temporary folder, to
// damage it.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(mdFixtures, "tiny_plain")
	dst := filepath.Join(dir, "tiny_plain")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMetaDatasetBadInput: each damage is one error naming the file (and
// the record), and nothing panics.
func TestMetaDatasetBadInput(t *testing.T) {
	load := func(dir string) error {
		_, err := LoadMetaDatasetSource(dir, "tiny_plain", 8, ImageOptions{NoCache: true})
		return err
	}
	cls := func(dir string) string { return filepath.Join(dir, "tiny_plain", "3.tfrecords") }
	edit := func(t *testing.T, f func(data []byte) []byte) string {
		dir := copyFixture(t)
		data, err := os.ReadFile(cls(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cls(dir), f(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("data CRC", func(t *testing.T) {
		dir := edit(t, func(d []byte) []byte { d[20] ^= 0xff; return d })
		if err := load(dir); err == nil || !strings.Contains(err.Error(), cls(dir)+": record 0") || !errors.Is(err, tfrecord.ErrCorrupt) {
			t.Errorf("%v", err)
		}
	})
	t.Run("length CRC", func(t *testing.T) {
		dir := edit(t, func(d []byte) []byte { d[9] ^= 0xff; return d })
		if err := load(dir); err == nil || !strings.Contains(err.Error(), "length") || !strings.Contains(err.Error(), cls(dir)) {
			t.Errorf("%v", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		dir := edit(t, func(d []byte) []byte { return d[:len(d)-7] })
		if err := load(dir); err == nil || !errors.Is(err, tfrecord.ErrTruncated) || !strings.Contains(err.Error(), cls(dir)) {
			t.Errorf("%v", err)
		}
	})
	t.Run("missing class file", func(t *testing.T) {
		dir := copyFixture(t)
		os.Remove(cls(dir))
		if err := load(dir); err == nil || !strings.Contains(err.Error(), "3.tfrecords, which does not exist") {
			t.Errorf("%v", err)
		}
	})
	t.Run("undecodable image", func(t *testing.T) {
		dir := copyFixture(t)
		var buf bytes.Buffer
		w := tfrecord.NewWriter(&buf)
		for range 8 {
			w.Write(tfrecord.EncodeExample(tfrecord.Example{Bytes: map[string][][]byte{"image": {[]byte("not an image")}}, Int64: map[string][]int64{"label": {3}}}))
		}
		os.WriteFile(cls(dir), buf.Bytes(), 0o644)
		if err := load(dir); err == nil || !strings.Contains(err.Error(), cls(dir)+" record 0: not a JPEG or PNG image") {
			t.Errorf("%v", err)
		}
	})
	t.Run("wrong label", func(t *testing.T) {
		dir := copyFixture(t)
		var buf bytes.Buffer
		w := tfrecord.NewWriter(&buf)
		w.Write(tfrecord.EncodeExample(tfrecord.Example{Bytes: map[string][][]byte{"image": {{1}}}, Int64: map[string][]int64{"label": {4}}}))
		os.WriteFile(cls(dir), buf.Bytes(), 0o644)
		if err := load(dir); err == nil || !strings.Contains(err.Error(), "record 0 has label 4, but the file holds class 3") {
			t.Errorf("%v", err)
		}
	})
	t.Run("no source", func(t *testing.T) {
		if _, err := MetaDatasetSources(t.TempDir()); !errors.Is(err, ErrNoMetaDataset) {
			t.Errorf("%v", err)
		}
		if err := load(t.TempDir()); !errors.Is(err, ErrNoMetaDataset) {
			t.Errorf("%v", err)
		}
	})
}

// BenchmarkMetaDatasetDecode reads a source of 93 records holding 256×256
// JPEGs (the tiny_plain spec, its records rewritten with photo-like
// images) and decodes them to 84×84, with no cache: records read, CRCs
// checked, Examples decoded, JPEGs decoded and resized.
//
//	go test ./datasets -run XXX -bench MetaDatasetDecode
func BenchmarkMetaDatasetDecode(b *testing.B) {
	dir, n := photoSource(b)
	b.ResetTimer()
	for range b.N {
		if _, err := LoadMetaDatasetSource(dir, "tiny_plain", MetaDatasetSide, ImageOptions{NoCache: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "images/s")
}

// BenchmarkMetaDatasetStream is the streamed source's cost per image
// drawn (one core: read, CRC, decode, resize), on the same photographs.
func BenchmarkMetaDatasetStream(b *testing.B) {
	dir, _ := photoSource(b)
	st, err := OpenMetaDatasetStream(dir, "tiny_plain", MetaDatasetSide)
	if err != nil {
		b.Fatal(err)
	}
	tr, _ := st.Split("train")
	x := make([]float64, tr.InDim())
	b.ResetTimer()
	for i := range b.N {
		c := i % tr.NumClasses()
		tr.Image(c, (i/tr.NumClasses())%tr.ImagesIn(c), x)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
}

// photoSource writes tiny_plain's spec with 256×256 JPEG photographs in
// its records, and returns the folder and the number of images.
func photoSource(b *testing.B) (string, int) {
	dir := b.TempDir()
	src := filepath.Join(dir, "tiny_plain")
	os.MkdirAll(src, 0o755)
	spec, err := os.ReadFile(filepath.Join(mdFixtures, "tiny_plain", MDSpecFile))
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, MDSpecFile), spec, 0o644)
	s, err := LoadMetaDatasetSpec(filepath.Join(mdFixtures, "tiny_plain"))
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for id := 0; id < s.NumClasses(); id++ {
		var buf bytes.Buffer
		w := tfrecord.NewWriter(&buf)
		for k := 0; k < s.Images(id); k++ {
			img := encodeJPEG(fixturePhoto(id, k, 256, 256))
			w.Write(tfrecord.EncodeExample(tfrecord.Example{Bytes: map[string][][]byte{"image": {img}}, Int64: map[string][]int64{"label": {int64(id)}}}))
			n++
		}
		os.WriteFile(filepath.Join(src, filepath.Base(s.ClassFiles(id)[0])), buf.Bytes(), 0o644)
	}
	return dir, n
}
