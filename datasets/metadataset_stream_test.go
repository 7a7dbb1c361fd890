package datasets

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/tfrecord"
)

// A streamed source gives the images of the decoded one, byte for byte,
// in every split of every fixture.
func TestMetaDatasetStreamMatchesDecoded(t *testing.T) {
	for _, n := range []string{"tiny_bilevel", "tiny_hier", "tiny_plain"} {
		whole, err := LoadMetaDatasetSource(mdFixtures, n, 20, ImageOptions{NoCache: true})
		if err != nil {
			t.Fatal(err)
		}
		st, err := OpenMetaDatasetStream(mdFixtures, n, 20)
		if err != nil {
			t.Fatal(err)
		}
		if MDDecodedBytes(st.Spec, 20) != int64(whole.Set().NumImages()*20*20*3) {
			t.Errorf("%s: decoded bytes %d", n, MDDecodedBytes(st.Spec, 20))
		}
		for _, split := range []string{"train", "valid", "test"} {
			if len(st.Spec.Classes(split)) == 0 {
				continue
			}
			a, err := whole.Split(split)
			if err != nil {
				t.Fatal(err)
			}
			b, err := st.Split(split)
			if err != nil {
				t.Fatal(err)
			}
			if a.NumClasses() != b.NumClasses() || a.InDim() != b.InDim() {
				t.Fatalf("%s %s: %d classes of %d, streamed %d of %d", n, split, a.NumClasses(), a.InDim(), b.NumClasses(), b.InDim())
			}
			x, y := make([]float64, a.InDim()), make([]float64, b.InDim())
			for c := 0; c < a.NumClasses(); c++ {
				if a.ImagesIn(c) != b.ImagesIn(c) {
					t.Fatalf("%s %s class %d: %d images, streamed %d", n, split, c, a.ImagesIn(c), b.ImagesIn(c))
				}
				for k := 0; k < a.ImagesIn(c); k++ {
					a.Image(c, k, x)
					b.Image(c, k, y)
					if !slices.Equal(x, y) {
						t.Fatalf("%s %s class %d image %d differs when streamed", n, split, c, k)
					}
				}
			}
		}
	}
}

// Damage found when the source is opened is an error; damage inside a
// record's data is found when the image is drawn, and the panic (which the
// engine turns into the run's error) names the file and the record.
func TestMetaDatasetStreamDamage(t *testing.T) {
	dir := copyFixture(t)
	file := filepath.Join(dir, "tiny_plain", "2.tfrecords")
	good, _ := os.ReadFile(file)
	spans, err := tfrecord.Index(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[spans[3].Offset+12+5] ^= 0x40
	os.WriteFile(file, bad, 0o644)
	st, err := OpenMetaDatasetStream(dir, "tiny_plain", 16)
	if err != nil {
		t.Fatalf("a damaged data byte is found when read, not when opened: %v", err)
	}
	tr, _ := st.Split("train")
	x := make([]float64, tr.InDim())
	msg := func() (m string) {
		defer func() { m = fmt.Sprint(recover()) }()
		tr.Image(2, 3, x)
		return ""
	}()
	if !strings.Contains(msg, "2.tfrecords: record 3") || !strings.Contains(msg, "data CRC mismatch") {
		t.Errorf("reading the damaged record: %q", msg)
	}
	tr.Image(2, 2, x) // the others still read

	os.WriteFile(file, good[:len(good)-7], 0o644)
	if _, err := OpenMetaDatasetStream(dir, "tiny_plain", 16); err == nil || !strings.Contains(err.Error(), "2.tfrecords") || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("a truncated class file: %v", err)
	}
	os.Remove(file)
	if _, err := OpenMetaDatasetStream(dir, "tiny_plain", 16); err == nil || !strings.Contains(err.Error(), "2.tfrecords, which does not exist") {
		t.Errorf("a missing class file: %v", err)
	}
}
