package datasets

import (
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFolder writes classes × perClass photos (PNG, some JPEG) under
// dir/prefix/<class>/.
func writeFolder(t *testing.T, dir, prefix string, classes, perClass int) {
	t.Helper()
	for c := 0; c < classes; c++ {
		cd := filepath.Join(dir, prefix, "class"+string(rune('a'+c)))
		if err := os.MkdirAll(cd, 0o755); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < perClass; k++ {
			img := fixturePhoto(c, k, 20, 16)
			name, data := filepath.Join(cd, "img"+string(rune('0'+k))+".png"), encodePNGImage(img)
			if k%3 == 2 {
				name, data = filepath.Join(cd, "img"+string(rune('0'+k))+".JPG"), encodeJPEG(img)
			}
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestFolderWithoutSplitFolders(t *testing.T) {
	dir := t.TempDir()
	writeFolder(t, dir, "", 10, 5)
	set, err := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 12, NoCache: true}, SplitSeed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if set.NumClasses() != 10 || set.NumImages() != 50 || set.Height() != 12 {
		t.Fatalf("%d classes, %d images, side %d", set.NumClasses(), set.NumImages(), set.Height())
	}
	sizes := map[string]int{}
	seen := map[string]string{}
	for _, sp := range []string{"train", "val", "test", "all"} {
		c, err := set.Split(sp)
		if err != nil {
			t.Fatal(err)
		}
		sizes[sp] = c.NumClasses()
		if sp == "all" {
			continue
		}
		for i := 0; i < c.NumClasses(); i++ {
			if prev, dup := seen[c.Class(i).Name]; dup {
				t.Errorf("class %s in %s and %s", c.Class(i).Name, prev, sp)
			}
			seen[c.Class(i).Name] = sp
		}
	}
	if sizes["train"] != 6 || sizes["val"] != 2 || sizes["test"] != 2 || sizes["all"] != 10 {
		t.Errorf("split sizes %v, want 6/2/2 of 10", sizes)
	}
	// The split depends on SplitSeed only.
	again, _ := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 12, NoCache: true}, SplitSeed: 7})
	a, _ := set.Split("test")
	b, _ := again.Split("test")
	if a.Class(0).Name != b.Class(0).Name || a.Class(1).Name != b.Class(1).Name {
		t.Error("the same seed split the classes differently")
	}
	// Episodes draw from a split; too few classes for the way is one error.
	test, _ := set.Split("test")
	if _, err := NewClassEpisodes(test, 5, 1, 2); err == nil || !strings.Contains(err.Error(), `5-way episodes need 5 classes, folder split "test" has 2`) {
		t.Errorf("too few classes: %v", err)
	}
	all, _ := set.Split("all")
	if _, err := NewClassEpisodes(all, 5, 1, 4); err != nil {
		t.Error(err)
	}
}

func TestFolderWithSplitFolders(t *testing.T) {
	dir := t.TempDir()
	writeFolder(t, dir, "train", 5, 4)
	writeFolder(t, dir, "valid", 2, 4)
	writeFolder(t, dir, "test", 3, 4)
	set, err := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 8, NoCache: true}})
	if err != nil {
		t.Fatal(err)
	}
	for sp, want := range map[string]int{"train": 5, "val": 2, "test": 3, "all": 10} {
		c, err := set.Split(sp)
		if err != nil || c.NumClasses() != want {
			t.Errorf("%s: %v classes (want %d), %v", sp, c, want, err)
		}
	}
	if c, _ := set.Split("val"); c.Class(0).Name != "valid/classa" {
		t.Errorf("val's first class is %q", c.Class(0).Name)
	}
}

func TestFolderErrors(t *testing.T) {
	empty := t.TempDir()
	writeFolder(t, empty, "", 3, 2)
	if err := os.Mkdir(filepath.Join(empty, "nothing"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	writeFolder(t, bad, "", 3, 2)
	if err := os.WriteFile(filepath.Join(bad, "classb", "broken.png"), []byte("not a png"), 0o644); err != nil {
		t.Fatal(err)
	}
	mixed := t.TempDir()
	writeFolder(t, mixed, "train", 2, 2)
	writeFolder(t, mixed, "", 1, 2)
	cases := []struct {
		dir, want string
	}{
		{filepath.Join(t.TempDir(), "missing"), "is not a folder"},
		{t.TempDir(), "has no class folders"},
		{empty, "class folder " + filepath.Join(empty, "nothing") + " has no images"},
		{bad, filepath.Join(bad, "classb", "broken.png") + ": not a JPEG or PNG image"},
		{mixed, "mixes split folders (train) with class folders"},
	}
	for _, c := range cases {
		_, err := LoadFolder(c.dir, FolderOptions{ImageOptions: ImageOptions{Side: 8, NoCache: true}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.dir, err, c.want)
		}
	}
	if _, err := LoadFolder(t.TempDir(), FolderOptions{}); err == nil || !strings.Contains(err.Error(), "image size 0") {
		t.Errorf("side 0: %v", err)
	}
	if _, err := LoadFolder(filepath.Join(t.TempDir(), "x"), FolderOptions{ImageOptions: ImageOptions{Side: 8}}); !errors.Is(err, ErrNoFolder) {
		t.Errorf("missing folder: %v does not match ErrNoFolder", err)
	}
}

// TestConvertModes: the pixel conventions a model may want of the same
// stored RGB image.
func TestConvertModes(t *testing.T) {
	dir := t.TempDir()
	cd := filepath.Join(dir, "grey")
	if err := os.MkdirAll(cd, 0o755); err != nil {
		t.Fatal(err)
	}
	img := image.NewGray(image.Rect(0, 0, 4, 4))
	for i := range img.Pix {
		img.Pix[i] = 255 // white background
	}
	img.SetGray(1, 1, color.Gray{Y: 0}) // one black stroke pixel
	if err := os.WriteFile(filepath.Join(cd, "a.png"), encodePNGImage(img), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := FolderChannels(dir); err != nil || n != 1 {
		t.Fatalf("channels %d, %v; want 1 for a grey PNG", n, err)
	}
	set, err := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 4, NoCache: true}, Fractions: [3]float64{1, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := set.Split("all")
	ink, err := Convert(all, PixelMode{Channels: 1, Ink: true}, "omniglot")
	if err != nil {
		t.Fatal(err)
	}
	if ink.Family() != "omniglot" || ink.InDim() != 16 {
		t.Fatalf("family %q, in dim %d", ink.Family(), ink.InDim())
	}
	x := make([]float64, 16)
	ink.Image(0, 0, x)
	if x[5] != 1 || x[0] != 0 {
		t.Errorf("ink: stroke %g, background %g; want 1 and 0", x[5], x[0])
	}
	signed, _ := Convert(all, PixelMode{Channels: 3, Signed: true}, "")
	y := make([]float64, signed.InDim())
	signed.Image(0, 0, y)
	if y[0] != 1 || y[5*3] != -1 || signed.Family() != "folder" {
		t.Errorf("signed: background %g, stroke %g (want 1, −1), family %q", y[0], y[15], signed.Family())
	}
	if _, err := Convert(all, PixelMode{Channels: 3, Ink: true}, ""); err == nil {
		t.Error("ink with three channels accepted")
	}
}
