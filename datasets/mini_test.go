package datasets

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// fakeMini is a miniImageNet in the distributed layout: dir/images/<file>
// and split CSVs "filename,label" in dir/splits, classes[split] classes of
// per images each, named like the real ones (n0153282900000005.jpg).
type fakeMini struct {
	dir, splits string
	classes     [3]int
	per         int
}

func miniWnid(c int) string             { return fmt.Sprintf("n%08d", 1000000+c) }
func miniFile(c, k int) string          { return fmt.Sprintf("%s%08d.jpg", miniWnid(c), 5+3*k) }
func (f fakeMini) numClasses() int      { return f.classes[0] + f.classes[1] + f.classes[2] }
func (f fakeMini) path(c, k int) string { return filepath.Join(f.dir, "images", miniFile(c, k)) }

func newFakeMini(t testing.TB, classes [3]int, per int) fakeMini {
	t.Helper()
	return newFakeMiniWith(t, classes, per, fixturePhoto)
}

// newFakeMiniWith draws the images with photo.
func newFakeMiniWith(t testing.TB, classes [3]int, per int, photo func(c, k, w, h int) *image.RGBA) fakeMini {
	t.Helper()
	f := fakeMini{dir: t.TempDir(), classes: classes, per: per}
	f.splits = filepath.Join(f.dir, "splits")
	c := 0
	for s, name := range miniSplitFiles {
		var csv bytes.Buffer
		csv.WriteString("filename,label\n")
		for i := 0; i < classes[s]; i++ {
			for k := 0; k < per; k++ {
				fmt.Fprintf(&csv, "%s,%s\n", miniFile(c, k), miniWnid(c))
				w, h := photoSize(c, k)
				writeFile(t, f.path(c, k), encodeJPEG(photo(c, k, w, h)))
			}
			c++
		}
		writeFile(t, filepath.Join(f.splits, name+".csv"), csv.Bytes())
	}
	return f
}

func (f fakeMini) load(t testing.TB, opts ImageOptions) *ImageSet {
	t.Helper()
	opts.SplitDir = f.splits
	if opts.CacheDir == "" && !opts.NoCache {
		opts.CacheDir = t.TempDir()
	}
	s, err := LoadMiniImageNet(f.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMiniImageNetLoads(t *testing.T) {
	f := newFakeMini(t, [3]int{4, 2, 3}, 6)
	s := f.load(t, ImageOptions{NoCache: true})
	if s.Height() != 84 || s.Width() != 84 || s.InDim() != 84*84*3 || s.NumClasses() != 9 || s.NumImages() != 54 {
		t.Fatalf("%d×%d, InDim %d, %d classes, %d images", s.Height(), s.Width(), s.InDim(), s.NumClasses(), s.NumImages())
	}
	want := map[string]int{"train": 4, "val": 2, "test": 3, "trainval": 6}
	for name, n := range want {
		sp, err := s.Split(name)
		if err != nil {
			t.Fatal(err)
		}
		if sp.NumClasses() != n || sp.Family() != "miniimagenet" {
			t.Fatalf("split %s: %d classes, family %q", name, sp.NumClasses(), sp.Family())
		}
	}
	test, _ := s.Split("test")
	if got := test.Class(0).Name; got != miniWnid(6) {
		t.Fatalf("first test class %s, want %s", got, miniWnid(6))
	}
	// Every image keeps its class colour through JPEG and resizing.
	img := make([]float64, s.InDim())
	for c := 0; c < s.NumClasses(); c++ {
		for k := 0; k < f.per; k++ {
			s.Image(c, k, img)
			m, want := meanColour(img), classColour(c)
			for ch := range m {
				if d := m[ch] - want[ch]; d > 0.03 || d < -0.03 {
					t.Fatalf("class %d image %d: mean colour %.3f, want %.3f", c, k, m, want)
				}
			}
		}
	}
	if _, err := s.Split("training"); err == nil || !strings.Contains(err.Error(), "train, val, test, trainval") {
		t.Fatalf("unknown split: %v", err)
	}
}

func TestMiniImageNetEmbeddedSplit(t *testing.T) {
	l, err := readMiniSplits("")
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]bool{}
	for i, want := range [3]int{64, 16, 20} {
		got := map[string]bool{}
		for _, r := range l.rows[i] {
			got[r.label] = true
			classes[r.label] = true
		}
		if len(got) != want || len(l.rows[i]) != 600*want {
			t.Fatalf("%s: %d classes, %d images, want %d, %d", miniSplitFiles[i], len(got), len(l.rows[i]), want, 600*want)
		}
	}
	if len(classes) != 100 {
		t.Fatalf("%d classes in all", len(classes))
	}
	if !strings.Contains(MiniImageNetSplitLicense(), "MIT License") {
		t.Fatal("license text missing")
	}
	// The embedded copies are the developers' shared files, byte for byte.
	dir := filepath.Join(testutil.Data(t, "miniimagenet"), "splits", "ravi")
	for _, name := range miniSplitFiles {
		shared := testutil.ReadFile(t, filepath.Join(dir, name+".csv"))
		embedded, err := gunzipEmbedded(raviSplits, "splits/ravi/"+name+".csv.gz")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shared, embedded) {
			t.Fatalf("embedded %s.csv differs from %s", name, dir)
		}
	}
}

func TestMiniImageNetErrors(t *testing.T) {
	_, err := LoadMiniImageNet(filepath.Join(t.TempDir(), "nowhere"), ImageOptions{})
	checkErr(t, err, "nowhere does not exist")
	if !errors.Is(err, ErrNoMiniImageNet) {
		t.Fatal("a missing folder is not ErrNoMiniImageNet")
	}
	// An empty folder against the embedded lists: nothing found.
	_, err = LoadMiniImageNet(t.TempDir(), ImageOptions{NoCache: true})
	checkErr(t, err, "holds none of the 60000 images", "n0153282900000005.jpg")
	if !errors.Is(err, ErrNoMiniImageNet) {
		t.Fatal("an empty folder is not ErrNoMiniImageNet")
	}
	cases := []struct {
		name string
		edit func(f fakeMini)
		want []string
	}{
		{"missing image", func(f fakeMini) { os.Remove(f.path(1, 2)) }, []string{"1 of the 18 images", miniFile(1, 2), "train.csv:7"}},
		{"damaged JPEG", func(f fakeMini) { os.WriteFile(f.path(2, 0), []byte("\xff\xd8\xff\xe0 broken"), 0o644) }, []string{filepath.Join("images", miniFile(2, 0)) + ": not a JPEG or PNG image"}},
		{"truncated JPEG", func(f fakeMini) {
			b, _ := os.ReadFile(f.path(0, 1))
			os.WriteFile(f.path(0, 1), b[:len(b)/2], 0o644)
		}, []string{miniFile(0, 1), "damaged jpeg image"}},
		{"duplicate file name", func(f fakeMini) {
			b, _ := os.ReadFile(f.path(0, 0))
			writeFile(t, filepath.Join(f.dir, "copy", miniFile(0, 0)), b)
		}, []string{"have the same name"}},
		{"class in two splits", func(f fakeMini) {
			appendLine(t, filepath.Join(f.splits, "test.csv"), "extra.jpg,"+miniWnid(0))
		}, []string{"test.csv:", "class " + miniWnid(0) + " is also in", "train.csv"}},
		{"image listed twice", func(f fakeMini) {
			appendLine(t, filepath.Join(f.splits, "val.csv"), miniFile(4, 0)+","+miniWnid(4))
		}, []string{"test.csv:2: image " + miniFile(4, 0) + " already listed at", "val.csv:8"}},
		{"bad header", func(f fakeMini) {
			os.WriteFile(filepath.Join(f.splits, "val.csv"), []byte("file,label\n"), 0o644)
		}, []string{"val.csv:1", "header"}},
		{"missing split file", func(f fakeMini) { os.Remove(filepath.Join(f.splits, "test.csv")) }, []string{"test.csv"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeMini(t, [3]int{2, 2, 2}, 3)
			c.edit(f)
			_, err := LoadMiniImageNet(f.dir, ImageOptions{NoCache: true, SplitDir: f.splits})
			checkErr(t, err, c.want...)
			t.Log(err)
		})
	}
}

func appendLine(t testing.TB, path, line string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, []byte(line+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
}
