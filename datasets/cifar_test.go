package datasets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixture pickler writes CIFAR-100's layout byte for byte as Python
// 2.7's cPickle does (testdata/pickle/py2_train.pkl, see testdata/gen).
func TestPy2PicklerMatchesCPickle(t *testing.T) {
	data := make([]byte, 2*3072)
	for i := range data {
		data[i] = byte((i/3072*7 + i%3072) % 256)
	}
	var p py2Pickler
	got := p.dict([]string{"batch_label", "data", "fine_labels", "coarse_labels", "filenames"}, func(k string) {
		switch k {
		case "batch_label":
			p.str("training batch 1 of 1")
		case "data":
			p.uint8Array(2, 3072, data)
		case "fine_labels", "coarse_labels":
			p.list(2, func(i int) { p.int(1 - i) })
		case "filenames":
			p.list(2, func(i int) { p.str([]string{"bridge_s_000123.png", "apple_s_000001.png"}[i]) })
		}
	})
	if want := readTestdata(t, "pickle", "py2_train.pkl"); !bytes.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("pickles differ from byte %d: %q vs cPickle's %q", i, got[i:min(i+20, len(got))], want[i:min(i+20, len(want))])
			}
		}
		t.Fatalf("pickle of %d bytes, cPickle's %d", len(got), len(want))
	}
}

// Every distributed form reads to the same data: classes in label order,
// train images then test images, planar pixels interleaved.
func TestCIFARFormatsAgree(t *testing.T) {
	f := newFakeCIFAR(6, 4, 2)
	splits := t.TempDir()
	f.writeSplits(t, splits, []int{0, 1, 2}, []int{3}, []int{4, 5})
	forms := map[string]func(dir string){
		"python folder": func(dir string) { writeFiles(t, filepath.Join(dir, "cifar-100-python"), f.pythonFiles()) },
		"binary folder": func(dir string) { writeFiles(t, filepath.Join(dir, "cifar-100-binary"), f.binaryFiles()) },
		"python tar.gz": func(dir string) {
			writeFile(t, filepath.Join(dir, "cifar-100-python.tar.gz"), targz("cifar-100-python", f.pythonFiles()))
		},
		"binary tar.gz": func(dir string) {
			writeFile(t, filepath.Join(dir, "cifar-100-binary.tar.gz"), targz("cifar-100-binary", f.binaryFiles()))
		},
		"inner python folder": func(dir string) { writeFiles(t, dir, f.pythonFiles()) },
		"inner binary folder": func(dir string) { writeFiles(t, dir, f.binaryFiles()) },
	}
	var first *ImageSet
	for name, write := range forms {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir)
			s, err := LoadCIFARFS(dir, ImageOptions{SplitDir: splits})
			if err != nil {
				t.Fatal(err)
			}
			if s.NumClasses() != 6 || s.NumImages() != 36 || s.InDim() != 3072 || s.Family() != "cifarfs" {
				t.Fatalf("%d classes, %d images, InDim %d", s.NumClasses(), s.NumImages(), s.InDim())
			}
			for c := 0; c < 6; c++ {
				if s.Class(c).Name != f.fine[c] || s.Class(c).Images != 6 {
					t.Fatalf("class %d: %+v", c, s.Class(c))
				}
				// Image 4 of each class is its first test image.
				for k, src := range map[int][]byte{0: cifarPhoto(c, 0), 3: cifarPhoto(c, 3), 4: cifarPhoto(c, 1000)} {
					got := s.Pixels(c, k)
					for i := 0; i < 1024; i++ {
						for ch := 0; ch < 3; ch++ {
							if got[3*i+ch] != src[ch*1024+i] {
								t.Fatalf("class %d image %d pixel %d channel %d = %d, want %d", c, k, i, ch, got[3*i+ch], src[ch*1024+i])
							}
						}
					}
				}
			}
			for sp, n := range map[string]int{"train": 3, "val": 1, "test": 2, "trainval": 4} {
				cl, err := s.Split(sp)
				if err != nil || cl.NumClasses() != n {
					t.Fatalf("split %s: %v, %v", sp, cl, err)
				}
			}
			if first == nil {
				first = s
			} else if !bytes.Equal(first.pix, s.pix) {
				t.Fatal("pixels differ between forms")
			}
		})
	}
}

func TestCIFARFSEmbeddedSplit(t *testing.T) {
	total := map[string]bool{}
	for name, want := range map[string]int{"train": 64, "val": 16, "test": 20} {
		file := "splits/cifarfs/" + name + ".json"
		data, err := cifarfsSplits.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pairs, err := parseCIFARFSSplit(file, data)
		if err != nil || len(pairs) != want {
			t.Fatalf("%s: %d classes, %v", name, len(pairs), err)
		}
		for _, p := range pairs {
			total[p[1]] = true
		}
		shared, err := os.ReadFile(filepath.Join("..", "..", "shared", "data", "cifarfs", "splits", name+".json"))
		if err == nil && !bytes.Equal(shared, data) {
			t.Fatalf("embedded %s differs from the shared copy", file)
		}
	}
	if len(total) != 100 {
		t.Fatalf("%d distinct classes", len(total))
	}
	if !strings.Contains(CIFARFSSplitLicense(), "MIT License") {
		t.Fatal("license missing")
	}
	// The fake data lack the real classes: the embedded list is named.
	dir := t.TempDir()
	writeFiles(t, filepath.Join(dir, "cifar-100-binary"), newFakeCIFAR(4, 1, 1).binaryFiles())
	_, err := LoadCIFARFS(dir, ImageOptions{})
	checkErr(t, err, "splits/cifarfs/train.json", "not in CIFAR-100")
}

func TestCIFARErrors(t *testing.T) {
	_, err := LoadCIFARFS(filepath.Join(t.TempDir(), "nowhere"), ImageOptions{})
	checkErr(t, err, "nowhere does not exist")
	if !errors.Is(err, ErrNoCIFAR) {
		t.Fatal("a missing folder is not ErrNoCIFAR")
	}
	_, err = LoadCIFARFS(t.TempDir(), ImageOptions{})
	checkErr(t, err, "holds neither cifar-100-python/ nor cifar-100-binary/")
	if !errors.Is(err, ErrNoCIFAR) {
		t.Fatal("an empty folder is not ErrNoCIFAR")
	}
	f := newFakeCIFAR(4, 2, 1)
	cases := []struct {
		name  string
		files func() (string, map[string][]byte)
		want  []string
	}{
		{"missing meta", func() (string, map[string][]byte) {
			m := f.pythonFiles()
			delete(m, "meta")
			m["train"] = m["test"] // the folder is recognised by train and test
			return "cifar-100-python", m
		}, []string{"cifar-100-python/meta is missing"}},
		{"truncated pickle", func() (string, map[string][]byte) {
			m := f.pythonFiles()
			m["train"] = m["train"][:len(m["train"])-100]
			return "cifar-100-python", m
		}, []string{"cifar-100-python/train: pickle byte", "wants"}},
		{"wrong pixel count", func() (string, map[string][]byte) {
			m := f.pythonFiles()
			m["test"] = bytes.Replace(m["test"], []byte("M\x00\x0c\x86"), []byte("M\x00\x06\x86"), 1)
			return "cifar-100-python", m
		}, []string{"cifar-100-python/test", "shape [4 1536]"}},
		{"label out of range", func() (string, map[string][]byte) {
			m := f.binaryFiles()
			m["test.bin"][1] = 9
			return "cifar-100-binary", m
		}, []string{"test.bin: image 0 has labels fine 9"}},
		{"partial record", func() (string, map[string][]byte) {
			m := f.binaryFiles()
			m["train.bin"] = m["train.bin"][:3074*3+10]
			return "cifar-100-binary", m
		}, []string{"train.bin is 9232 bytes, not a whole number of 3074-byte records"}},
		{"name with a space", func() (string, map[string][]byte) {
			m := f.binaryFiles()
			m["fine_label_names.txt"] = []byte("fine_00\nfine 01\n")
			return "cifar-100-binary", m
		}, []string{"fine_label_names.txt:2", `"fine 01"`}},
		{"fine class in two coarse classes", func() (string, map[string][]byte) {
			m := f.binaryFiles()
			m["test.bin"][0] = 1 // image 0 is fine_00, coarse 0
			return "cifar-100-binary", m
		}, []string{"fine class fine_00 has images in coarse classes coarse_0 and coarse_1"}},
	}
	splits := t.TempDir()
	f.writeSplits(t, splits, []int{0, 1}, []int{2}, []int{3})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			folder, files := c.files()
			writeFiles(t, filepath.Join(dir, folder), files)
			_, err := LoadCIFARFS(dir, ImageOptions{SplitDir: splits})
			checkErr(t, err, c.want...)
			t.Log(err)
		})
	}
	// Split files: malformed, wrong coarse class, unknown class.
	dir := t.TempDir()
	writeFiles(t, filepath.Join(dir, "cifar-100-binary"), f.binaryFiles())
	for name, c := range map[string]struct {
		json string
		want []string
	}{
		"not a list":   {`{"a": 1}`, []string{"train.json is not a JSON list"}},
		"three names":  {`[["coarse_0", "fine_00", "x"]]`, []string{"train.json: entry 0"}},
		"wrong coarse": {`[["coarse_1", "fine_00"]]`, []string{`entry 0 ["coarse_1", "fine_00"]`, "coarse class coarse_0"}},
		"unknown":      {`[["coarse_0", "nothing"]]`, []string{`class "nothing" is not in CIFAR-100`}},
		"twice":        {`[["coarse_0", "fine_00"], ["coarse_0", "fine_00"]]`, []string{`lists class "fine_00" twice`}},
	} {
		writeFile(t, filepath.Join(splits, "train.json"), []byte(c.json))
		_, err := LoadCIFARFS(dir, ImageOptions{SplitDir: splits})
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		checkErr(t, err, c.want...)
	}
}
