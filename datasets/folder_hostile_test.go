package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// countDecodes sets decodeHook for the test to count the images decoded.
func countDecodes(t *testing.T) *int {
	n := new(int)
	var mu sync.Mutex
	decodeHook = func(_ string, _ int64, enter bool) {
		if enter {
			mu.Lock()
			*n++
			mu.Unlock()
		}
	}
	t.Cleanup(func() { decodeHook = nil })
	return n
}

// loadWithin runs LoadFolder, failing the test if it has not returned
// within a minute (a FIFO read would block it for ever).
func loadWithin(t *testing.T, dir string, opts FolderOptions) (*ImageSet, error) {
	t.Helper()
	type result struct {
		s   *ImageSet
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := LoadFolder(dir, opts)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(time.Minute):
		t.Fatalf("LoadFolder(%s) still running after a minute", dir)
		return nil, nil
	}
}

// A folder with too few classes, or too few images in a class, for the
// episodes asked of it is refused from its listing, before any image is
// decoded: the images here include a 16-bit 8192×8192 PNG and a broken
// file, either of which would otherwise be what the error names.
func TestFolderNeedsCheckedBeforeDecoding(t *testing.T) {
	dir := t.TempDir()
	writeFolder(t, dir, "", 4, 5)
	writePNGFile(t, filepath.Join(dir, "classa", "giant.png"), pngSpec{w: 8192, h: 8192, depth: 16, ctype: 6}, func(int, []byte) {})
	writeFile(t, filepath.Join(dir, "classb", "broken.png"), []byte("not a png"))
	decodes := countDecodes(t)
	base := FolderOptions{ImageOptions: ImageOptions{Side: 8, NoCache: true}, SplitSeed: 1}
	cases := []struct {
		need []FolderNeed
		want string
	}{
		{[]FolderNeed{{Split: "train", Way: 5, Examples: 2}}, "5-way episodes need 5 classes, its train split has 2; add class folders or lower way"},
		{[]FolderNeed{{Split: "all", Way: 5, Examples: 2}}, "5-way episodes need 5 classes, its all split has 4"},
		{[]FolderNeed{{Split: "all", Way: 3, Examples: 7}}, "episodes need 7 images a class (shots and queries), class class"},
		{[]FolderNeed{{Split: "trainval", Way: 9}, {Split: "test", Way: 1, Examples: 6}}, "episodes need 6 images a class (shots and queries), class class"},
	}
	for _, c := range cases {
		opts := base
		opts.Need = c.need
		_, err := loadWithin(t, dir, opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("need %v: error %v, want %q", c.need, err, c.want)
		}
	}
	if *decodes != 0 {
		t.Fatalf("%d images decoded before the folder was refused", *decodes)
	}
	// A split without a folder has no classes.
	split := t.TempDir()
	writeFolder(t, split, "train", 3, 2)
	opts := base
	opts.Need = []FolderNeed{{Split: "test", Way: 2, Examples: 2}}
	if _, err := loadWithin(t, split, opts); err == nil || !strings.Contains(err.Error(), "its test split has 0") {
		t.Errorf("no test folder: error %v", err)
	}
	if *decodes != 0 {
		t.Fatalf("%d images decoded before the folder was refused", *decodes)
	}
	// Needs that the folder meets leave the load to find the giant.
	opts = base
	opts.Need = []FolderNeed{{Split: "all", Way: 4, Examples: 5}}
	_, err := loadWithin(t, dir, opts)
	if err == nil || !strings.Contains(err.Error(), "giant.png: a 8192×8192 PNG would take 513.3 MB to decode, more than the 192.0 MB") {
		t.Fatalf("error %v, want the giant refused", err)
	}
}

// What a hostile folder may hold in place of an image: a FIFO (which
// blocks whoever opens it), a link to /dev/zero (which never ends), a
// link to a folder named like an image, a file over the size of any image. Each is
// refused at once, by name, before anything is decoded.
func TestFolderRefusesFilesThatAreNotImages(t *testing.T) {
	cases := map[string]func(p string) error{
		"a named pipe": func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"a device":     func(p string) error { return os.Symlink("/dev/zero", p) },
		"a folder":     func(p string) error { return os.Symlink(filepath.Dir(p), p) },
		"more than the 64.0 MB an image file may be": func(p string) error {
			f, err := os.Create(p)
			if err == nil {
				err = f.Truncate(maxImageBytes + 1) // sparse
				f.Close()
			}
			return err
		},
	}
	for want, make := range cases {
		dir := t.TempDir()
		writeFolder(t, dir, "", 2, 3)
		p := filepath.Join(dir, "classa", "zz.png")
		if err := make(p); err != nil {
			t.Skipf("%s: %v", want, err)
		}
		decodes := countDecodes(t)
		_, err := loadWithin(t, dir, FolderOptions{ImageOptions: ImageOptions{Side: 8, NoCache: true}})
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v", want, err)
		}
		if *decodes != 0 {
			t.Errorf("%s: %d images decoded first", want, *decodes)
		}
		if _, err := FolderChannels(dir); err != nil && !strings.Contains(err.Error(), "zz.png") {
			t.Errorf("%s: FolderChannels: %v", want, err)
		}
	}
}

// A file name may hold any bytes but / and NUL: messages escape those
// that are not printable UTF-8, so a name cannot send control sequences to
// the terminal.
func TestFolderQuotesUnprintableNames(t *testing.T) {
	dir := t.TempDir()
	writeFolder(t, dir, "", 2, 3)
	name := "\xff\x1b[2J\x1b]0;owned\x07.png"
	writeFile(t, filepath.Join(dir, "classa", name), []byte("not a png"))
	_, err := loadWithin(t, dir, FolderOptions{ImageOptions: ImageOptions{Side: 8, NoCache: true}})
	if err == nil {
		t.Fatal("loaded")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\x07") || !strings.Contains(msg, `\xff\x1b[2J\x1b]0;owned\x07.png`) {
		t.Fatalf("error %q", msg)
	}
}

// However many workers decode, the images being decoded at once hold no
// more than the gate's capacity: each holds what it really costs (its
// file, and 8 bytes a pixel for a 16-bit RGBA PNG), counted through
// decodeHook. The result is the same bytes as one worker's.
func TestDecodeMemoryBoundedNotByCores(t *testing.T) {
	dir := t.TempDir()
	const side = 512 // 2 MB as RGBA64
	for c := 0; c < 3; c++ {
		for k := 0; k < 6; k++ {
			p := filepath.Join(dir, "class"+string(rune('a'+c)), "img"+string(rune('0'+k))+".png")
			os.MkdirAll(filepath.Dir(p), 0o755)
			writePNGFile(t, p, pngSpec{w: side, h: side, depth: 16, ctype: 6}, func(y int, b []byte) { patternRow(y+c*7+k, b) })
		}
	}
	const capacity = 7 << 20 // room for two of them (3 MB each), not three
	old := decodeGate
	decodeGate = newMemGate(capacity)
	t.Cleanup(func() { decodeGate = old })
	var mu sync.Mutex
	var inFlight, peak, images, peakImages int64
	decodeHook = func(label string, held int64, enter bool) {
		fi, err := os.Stat(label)
		if err != nil {
			t.Error(err)
			return
		}
		if real := fi.Size() + 8*side*side; held < real {
			t.Errorf("%s holds %d bytes at the gate, costs %d", label, held, real)
		}
		mu.Lock()
		defer mu.Unlock()
		if enter {
			inFlight += held
			images++
		} else {
			inFlight -= held
			images--
		}
		peak, peakImages = max(peak, inFlight), max(peakImages, images)
	}
	t.Cleanup(func() { decodeHook = nil })
	var sums []string
	for _, workers := range []int{6, 1} {
		s, err := LoadFolder(dir, FolderOptions{ImageOptions: ImageOptions{Side: 16, NoCache: true, Workers: workers}})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(s.pix)
		sums = append(sums, hex.EncodeToString(sum[:]))
	}
	t.Logf("peak %d bytes, %d images in flight (capacity %d)", peak, peakImages, capacity)
	if peak > capacity {
		t.Errorf("%d bytes decoding at once, capacity %d", peak, capacity)
	}
	if peakImages < 2 {
		t.Errorf("at most %d image decoded at once: the gate serialised what fits", peakImages)
	}
	if sums[0] != sums[1] {
		t.Errorf("6 workers and 1 give different images")
	}
}

// A file that has grown since its size was taken is refused by name rather
// than read past what it holds at the gate.
func TestImageFileThatGrows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.png")
	writeFile(t, p, encodePNGImage(fixturePhoto(1, 1, 9, 9)))
	fi, _ := os.Stat(p)
	_, err := readImageFile(imageFile(p), fi.Size()-1)
	if err == nil || !strings.Contains(err.Error(), p+" changed while it was read") {
		t.Fatalf("error %v", err)
	}
	data, err := readImageFile(imageFile(p), fi.Size())
	if err != nil || int64(len(data)) != fi.Size() {
		t.Fatalf("%d bytes, %v", len(data), err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatal("not the file")
	}
}

// A cache file of the right name but swollen (here sparse, 2 GB) is
// refused by its size, not read whole, and written again.
func TestImageCacheSwollenNotRead(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	writeFolder(t, dir, "", 3, 3)
	opts := FolderOptions{ImageOptions: ImageOptions{Side: 8, CacheDir: cache}}
	s, err := LoadFolder(dir, opts)
	if err != nil || s.Info().CacheFile == "" || s.Info().CacheErr != nil {
		t.Fatalf("%v %+v", err, s.Info())
	}
	want := s.pix
	if err := os.Truncate(s.Info().CacheFile, 2<<30); err != nil {
		t.Skip(err)
	}
	var again *ImageSet
	got := allocated(func() { again, err = LoadFolder(dir, opts) })
	if err != nil || again.Info().FromCache || !bytes.Equal(again.pix, want) {
		t.Fatalf("error %v, from cache %v", err, again.Info().FromCache)
	}
	if got > 64<<20 {
		t.Fatalf("loading allocated %d bytes", got)
	}
	if fi, err := os.Stat(s.Info().CacheFile); err != nil || fi.Size() >= 1<<20 {
		t.Fatalf("cache file not rewritten: %v", err)
	}
}
