package datasets

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// resize runs the Omniglot filter on a 105×105 ink image.
func resize(ink []float64) []float64 {
	var s drawingScratch
	copy(s.ink[:], ink)
	resizeArea(s.ink[:], OmniglotSourceSide, s.out[:], OmniglotSide, s.tmp[:])
	return s.out[:]
}

// inkColumns is a 105×105 image with ink in the source columns [lo, hi).
func inkColumns(lo, hi int) []float64 {
	ink := make([]float64, OmniglotSourceSide*OmniglotSourceSide)
	for y := 0; y < OmniglotSourceSide; y++ {
		for x := lo; x < hi; x++ {
			ink[y*OmniglotSourceSide+x] = 1
		}
	}
	return ink
}

// The area filter against hand-computed answers: an output pixel covers
// 3.75 source pixels, so ink in columns [0, 2) is 2/3.75 of output column
// 0, and ink in [3, 5) is 0.75/3.75 of column 0 and 1.25/3.75 of column 1.
func TestAreaResizeKnownAnswers(t *testing.T) {
	cases := []struct {
		name   string
		lo, hi int
		want   map[int]float64 // output column → value; others 0
	}{
		{"full", 0, 105, func() map[int]float64 {
			m := map[int]float64{}
			for x := 0; x < 28; x++ {
				m[x] = 1
			}
			return m
		}()},
		{"left 30 columns = 8 outputs", 0, 30, map[int]float64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1}},
		{"columns 0-1", 0, 2, map[int]float64{0: 2 / 3.75}},
		{"columns 3-4", 3, 5, map[int]float64{0: 0.75 / 3.75, 1: 1.25 / 3.75}},
		{"last column", 104, 105, map[int]float64{27: 1 / 3.75}},
	}
	for _, c := range cases {
		out := resize(inkColumns(c.lo, c.hi))
		for y := 0; y < OmniglotSide; y++ {
			for x := 0; x < OmniglotSide; x++ {
				if got := out[y*OmniglotSide+x]; math.Abs(got-c.want[x]) > 1e-12 {
					t.Fatalf("%s: output (%d, %d) = %v, want %v", c.name, y, x, got, c.want[x])
				}
			}
		}
	}
}

// Any image keeps its total ink: the filter is a mean over exact areas.
func TestAreaResizeConservesInk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	ink := make([]float64, OmniglotSourceSide*OmniglotSourceSide)
	var in float64
	for i := range ink {
		ink[i] = rng.Float64()
		in += ink[i]
	}
	var out float64
	for _, v := range resize(ink) {
		out += v
	}
	if math.Abs(out*3.75*3.75-in) > 1e-9*in {
		t.Fatalf("ink %v in, %v·3.75² out", in, out)
	}
}

// Through the PNG path: black on white decodes to ink 1, so a full-black
// drawing is all ones and a blank one all zeros.
func TestDecodeDrawingInverts(t *testing.T) {
	var s drawingScratch
	dst := make([]uint8, OmniglotPixels)
	for _, c := range []struct {
		ink  bool
		want uint8
	}{{true, 255}, {false, 0}} {
		data := encodePNG1(105, 105, func(x, y int) bool { return c.ink })
		if err := decodeDrawing("test.png", data, dst, &s); err != nil {
			t.Fatal(err)
		}
		for i, v := range dst {
			if v != c.want {
				t.Fatalf("ink %v: pixel %d = %d, want %d", c.ink, i, v, c.want)
			}
		}
	}
	// Left 30 columns black: output columns 0-7 are strokes.
	data := encodePNG1(105, 105, func(x, y int) bool { return x < 30 })
	if err := decodeDrawing("test.png", data, dst, &s); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		if want := map[bool]uint8{true: 255, false: 0}[i%OmniglotSide < 8]; v != want {
			t.Fatalf("half image: pixel %d = %d, want %d", i, v, want)
		}
	}
}

// oneImage is a data set of one character whose drawings are img.
func oneImage(img []uint8) *Omniglot {
	o, _ := newOmniglot([]OmniglotCharacter{{true, "A", "character01"}}, [32]byte{}, nil)
	for k := 0; k < OmniglotDrawings; k++ {
		copy(o.pix[k*OmniglotPixels:], img)
	}
	return o
}

// Rotations turn counter-clockwise (PIL's Image.rotate, numpy's rot90): a
// dot in the top-right corner goes to the top-left at 90°, the bottom-left
// at 180° and the bottom-right at 270°.
func TestRotationIsCounterClockwise(t *testing.T) {
	img := make([]uint8, OmniglotPixels)
	img[0*28+27] = 255 // top right
	img[0*28+26] = 128 // its left neighbour, so mirror images differ too
	o := oneImage(img)
	type px struct{ y, x int }
	want := []map[px]float64{
		{{0, 27}: 1, {0, 26}: 128.0 / 255},
		{{0, 0}: 1, {1, 0}: 128.0 / 255},
		{{27, 0}: 1, {27, 1}: 128.0 / 255},
		{{27, 27}: 1, {26, 27}: 128.0 / 255},
	}
	dst := make([]float64, OmniglotPixels)
	for k, w := range want {
		o.Drawing(0, 0, k, dst)
		for y := 0; y < 28; y++ {
			for x := 0; x < 28; x++ {
				if got := dst[y*28+x]; got != w[px{y, x}] {
					t.Fatalf("rotation %d°: pixel (%d, %d) = %v, want %v", 90*k, y, x, got, w[px{y, x}])
				}
			}
		}
	}
}

func loadFake(t *testing.T, f fakeOmniglot, zipped bool, opts OmniglotOptions) (*Omniglot, string) {
	t.Helper()
	dir := t.TempDir()
	f.write(t, dir, zipped)
	if opts.CacheDir == "" && !opts.NoCache {
		opts.CacheDir = t.TempDir()
	}
	o, err := LoadOmniglot(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return o, dir
}

// Zips and unpacked folders give the same data, in the same order, for any
// number of decoding goroutines.
func TestOmniglotZipAndFolderAgree(t *testing.T) {
	f := newFakeOmniglot(2, 3)
	z, _ := loadFake(t, f, true, OmniglotOptions{NoCache: true, Workers: 3})
	d, _ := loadFake(t, f, false, OmniglotOptions{NoCache: true, Workers: 1})
	sameOmniglot(t, z, d)
	if z.NumCharacters() != 12 || !z.Character(5).Background || z.Character(6).Background {
		t.Fatalf("%d characters, background flags %v %v", z.NumCharacters(), z.Character(5).Background, z.Character(6).Background)
	}
	if z.key == d.key {
		t.Fatal("zip and folder sources share a cache key")
	}
	// Drawing k of character c was drawn from c·20+k+1: check one.
	want := make([]uint8, OmniglotPixels)
	var s drawingScratch
	if err := decodeDrawing("x", fakeDrawing(7, 13), want, &s); err != nil {
		t.Fatal(err)
	}
	if got := z.pix[(7*20+13)*OmniglotPixels:][:OmniglotPixels]; !bytes.Equal(got, want) {
		t.Fatal("drawing 13 of character 7 is not where it belongs")
	}
}

// Ignored: directory entries and the litter archivers add.
func TestOmniglotIgnoresArchiverLitter(t *testing.T) {
	f := newFakeOmniglot(1, 2)
	f[0]["images_background/.DS_Store"] = []byte("junk")
	f[0]["__MACOSX/images_background/._x.png"] = []byte("junk")
	f[1]["images_evaluation/Alphabet_1_0/character01/._0001_01.png"] = []byte("junk")
	clean, _ := loadFake(t, newFakeOmniglot(1, 2), true, OmniglotOptions{NoCache: true})
	for _, zipped := range []bool{true, false} {
		o, _ := loadFake(t, f, zipped, OmniglotOptions{NoCache: true})
		sameOmniglot(t, clean, o)
	}
}

func TestOmniglotCache(t *testing.T) {
	f := newFakeOmniglot(1, 2)
	cache := t.TempDir()
	dir := t.TempDir()
	f.write(t, dir, true)
	load := func(wantCached bool) *Omniglot {
		t.Helper()
		o, err := LoadOmniglot(dir, OmniglotOptions{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		if i := o.Info(); i.FromCache != wantCached || i.CacheErr != nil {
			t.Fatalf("FromCache %v (want %v), cache error %v", i.FromCache, wantCached, i.CacheErr)
		}
		return o
	}
	first := load(false)
	path := first.Info().CacheFile
	if filepath.Dir(path) != cache {
		t.Fatalf("cache file %s is not in %s", path, cache)
	}
	sameOmniglot(t, first, load(true))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Each damage is detected, the data are decoded again and the file
	// rewritten, so the next load reads it.
	damages := map[string]func([]byte) []byte{
		"bit flip in pixels": func(b []byte) []byte { b[len(b)-100] ^= 1; return b },
		"bit flip in header": func(b []byte) []byte { b[9] ^= 1; return b },
		"truncated":          func(b []byte) []byte { return b[:len(b)/2] },
		"empty":              func(b []byte) []byte { return nil },
		"extended":           func(b []byte) []byte { return append(b, 0) },
		"other version, valid checksum": func(b []byte) []byte {
			b = b[:len(b)-32]
			b[8]++
			return appendSum(b)
		},
		"other key, valid checksum": func(b []byte) []byte {
			b = b[:len(b)-32]
			b[20]++
			return appendSum(b)
		},
	}
	for name, damage := range damages {
		if err := os.WriteFile(path, damage(bytes.Clone(good)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			sameOmniglot(t, first, load(false))
			sameOmniglot(t, first, load(true))
		})
	}
	// Changing a source file changes the key: the old cache is not used.
	f[1]["images_evaluation/Alphabet_1_0/character01/0003_01.png"] = fakeDrawing(0, 0)
	f.write(t, dir, true)
	changed := load(false)
	if changed.Info().CacheFile == path || bytes.Equal(changed.pix, first.pix) {
		t.Fatal("a changed zip was served from the old cache")
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

func appendSum(b []byte) []byte {
	s := sha256.Sum256(b)
	return append(b, s[:]...)
}

// A cache folder that cannot be created does not fail the load.
func TestOmniglotCacheUnwritable(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o644)
	o, _ := loadFake(t, newFakeOmniglot(1, 1), true, OmniglotOptions{CacheDir: filepath.Join(blocker, "cache")})
	if o.Info().CacheErr == nil || o.Info().FromCache {
		t.Fatalf("info %+v: want a cache error", o.Info())
	}
}

// Every bad input is an error that names the culprit.
func TestOmniglotBadInput(t *testing.T) {
	pngOf := func(w, h int) []byte { return encodePNG1(w, h, func(x, y int) bool { return x == y }) }
	const char = "images_background/Alphabet_0_0/character01/"
	cases := []struct {
		name   string
		zipped bool
		// edit changes f before it is written, or, for names starting
		// with "-", the files after.
		edit    func(dir string, f fakeOmniglot)
		missing bool     // errors.Is(err, ErrNoOmniglot)
		want    []string // substrings of the message
	}{
		{"-missing evaluation half", true, func(dir string, f fakeOmniglot) {
			os.Remove(filepath.Join(dir, "images_evaluation.zip"))
		}, true, []string{"neither images_evaluation.zip nor"}},
		{"-corrupt zip", true, func(dir string, f fakeOmniglot) {
			os.WriteFile(filepath.Join(dir, "images_background.zip"), []byte("PK\x03\x04 not really"), 0o644)
		}, false, []string{"images_background.zip is not a valid zip archive"}},
		{"-truncated zip", true, func(dir string, f fakeOmniglot) {
			b := zipBytes(f[0])
			os.WriteFile(filepath.Join(dir, "images_background.zip"), b[:len(b)/2], 0o644)
		}, false, []string{"images_background.zip is not a valid zip archive"}},
		{"non-PNG entry", true, func(dir string, f fakeOmniglot) {
			f[0][char+"notes.txt"] = []byte("hello")
		}, false, []string{`images_background.zip: entry "` + char + `notes.txt" is not a PNG file`}},
		{"undecodable PNG", true, func(dir string, f fakeOmniglot) {
			f[0][char+"0001_05.png"] = []byte("\x89PNG\r\n\x1a\nbroken")
		}, false, []string{`images_background.zip: entry "` + char + `0001_05.png": not a PNG image`}},
		{"truncated PNG", false, func(dir string, f fakeOmniglot) {
			b := f[0][char+"0001_05.png"]
			f[0][char+"0001_05.png"] = b[:len(b)-20]
		}, false, []string{"/001/" + char + "0001_05.png: damaged PNG"}},
		{"wrong size", true, func(dir string, f fakeOmniglot) {
			f[0][char+"0001_05.png"] = pngOf(104, 105)
		}, false, []string{char + "0001_05.png", "104×105, want 105×105"}},
		{"missing drawing", true, func(dir string, f fakeOmniglot) {
			delete(f[0], char+"0001_20.png")
		}, false, []string{"images_background.zip: images_background/Alphabet_0_0/character01 has 19 drawings, want 20"}},
		{"extra folder level", false, func(dir string, f fakeOmniglot) {
			f[0][char+"x/0001_21.png"] = pngOf(105, 105)
		}, false, []string{"/001/" + char + "x/0001_21.png is not in the layout images_background/<alphabet>/<character>/<drawing>.png"}},
		{"wrong top folder", true, func(dir string, f fakeOmniglot) {
			f[0]["images_evaluation/A/character01/x.png"] = pngOf(105, 105)
		}, false, []string{`"images_evaluation/A/character01/x.png" is not in the layout images_background/`}},
		{"same character in both halves", true, func(dir string, f fakeOmniglot) {
			for k := 1; k <= 20; k++ {
				f[1][fmt.Sprintf("images_evaluation/Alphabet_0_0/character01/%02d.png", k)] = pngOf(105, 105)
			}
		}, false, []string{"Alphabet_0_0/character01 appears in both"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newFakeOmniglot(1, 1)
			if strings.HasPrefix(c.name, "-") {
				f.write(t, dir, c.zipped)
				c.edit(dir, f)
			} else {
				c.edit(dir, f)
				f.write(t, dir, c.zipped)
			}
			_, err := LoadOmniglot(dir, OmniglotOptions{NoCache: true})
			checkErr(t, err, c.want...)
			t.Log(err)
			if errors.Is(err, ErrNoOmniglot) != c.missing {
				t.Fatalf("errors.Is(err, ErrNoOmniglot) = %v", !c.missing)
			}
		})
	}
	_, err := LoadOmniglot(filepath.Join(t.TempDir(), "nowhere"), OmniglotOptions{})
	checkErr(t, err, "nowhere does not exist")
	if !errors.Is(err, ErrNoOmniglot) {
		t.Fatal("a missing folder is not ErrNoOmniglot")
	}
}

func checkErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", want)
	}
	if !strings.HasPrefix(err.Error(), "datasets: ") {
		t.Fatalf("error %q lacks the package prefix", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

func fakeSplit(t *testing.T, o *Omniglot, lines string) *ClassSet {
	t.Helper()
	s, err := o.SplitFrom("fake", "fake.txt", strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// allRotations lists every character of o in every rotation.
func allRotations(o *Omniglot) string {
	var b strings.Builder
	for c := 0; c < o.NumCharacters(); c++ {
		for _, r := range []string{"000", "090", "180", "270"} {
			fmt.Fprintf(&b, "%s/rot%s\n", o.Character(c).ID(), r)
		}
	}
	return b.String()
}

// Every sampled row is checked against the images it may come from: the
// way labels name distinct classes, each label's support and query rows
// are distinct images of one class, and the targets are one-hot.
func TestEpisodesFollowTheProtocol(t *testing.T) {
	o, _ := loadFake(t, newFakeOmniglot(1, 2), true, OmniglotOptions{NoCache: true})
	set := fakeSplit(t, o, allRotations(o)) // 16 classes
	type id struct{ class, image int }
	images := map[string]id{}
	img := make([]float64, OmniglotPixels)
	for c := 0; c < set.NumClasses(); c++ {
		for k := 0; k < OmniglotDrawings; k++ {
			set.Image(c, k, img)
			key := imageKey(img)
			if prev, dup := images[key]; dup {
				t.Fatalf("fixture: class %d image %d equals class %d image %d", c, k, prev.class, prev.image)
			}
			images[key] = id{c, k}
		}
	}
	const way, shot, query, tasks = 5, 3, 4, 20
	e, err := NewEpisodes(set, way, shot, query)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "omniglot" || e.InDim() != 784 || e.OutDim() != way {
		t.Fatalf("Name %q, InDim %d, OutDim %d", e.Name(), e.InDim(), e.OutDim())
	}
	b := sampleEpisodes(t, e, tasks, 7)
	for task := 0; task < tasks; task++ {
		classOf := map[int]int{} // label → class
		labelOf := map[int]int{}
		used := map[id]bool{}
		check := func(x, y []float64, n, per int, what string) {
			for row := 0; row < n; row++ {
				got, ok := images[imageKey(x[row*784:(row+1)*784])]
				if !ok {
					t.Fatalf("task %d %s row %d is no image of the set", task, what, row)
				}
				label := row / per // class-major rows
				for j, v := range y[row*way : (row+1)*way] {
					if v != map[bool]float64{true: 1, false: 0}[j == label] {
						t.Fatalf("task %d %s row %d: target %v is not one-hot at %d", task, what, row, y[row*way:(row+1)*way], label)
					}
				}
				if c, seen := classOf[label]; seen && c != got.class {
					t.Fatalf("task %d: label %d holds classes %d and %d", task, label, c, got.class)
				}
				if l, seen := labelOf[got.class]; seen && l != label {
					t.Fatalf("task %d: class %d has labels %d and %d", task, got.class, l, label)
				}
				classOf[label], labelOf[got.class] = got.class, label
				if used[got] {
					t.Fatalf("task %d: image %d of class %d drawn twice", task, got.image, got.class)
				}
				used[got] = true
			}
		}
		check(b.XS[task*way*shot*784:], b.YS[task*way*shot*way:], way*shot, shot, "support")
		check(b.XQ[task*way*query*784:], b.YQ[task*way*query*way:], way*query, query, "query")
		if len(classOf) != way {
			t.Fatalf("task %d has %d classes", task, len(classOf))
		}
	}
}

// Classes, and the labels they get, are uniform: with way equal to the
// number of classes every label of a class is equally likely.
func TestEpisodesLabelsAreUniform(t *testing.T) {
	o, _ := loadFake(t, newFakeOmniglot(1, 1), true, OmniglotOptions{NoCache: true})
	set := fakeSplit(t, o, "Alphabet_0_0/character01/rot000\nAlphabet_0_0/character01/rot090\nAlphabet_0_0/character01/rot180\nAlphabet_1_0/character01/rot000\nAlphabet_1_0/character01/rot270\n")
	e, err := NewEpisodes(set, 5, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	classOf := map[string]int{}
	img := make([]float64, OmniglotPixels)
	for c := 0; c < set.NumClasses(); c++ {
		for k := 0; k < OmniglotDrawings; k++ {
			set.Image(c, k, img)
			classOf[imageKey(img)] = c
		}
	}
	const n = 5000
	b := sampleEpisodes(t, e, n, 11)
	var counts [5]int
	for task := 0; task < n; task++ {
		for j := 0; j < 5; j++ {
			if classOf[imageKey(b.XS[(task*5+j)*784:][:784])] == 0 {
				counts[j]++
			}
		}
	}
	for j, c := range counts {
		// Binomial(5000, 1/5): sd 28; 5 sd either side.
		if c < 1000-140 || c > 1000+140 {
			t.Fatalf("class 0 got label %d in %d of %d episodes, want about 1000 (counts %v)", j, c, n, counts)
		}
	}
}

// imageKey identifies an image exactly: its pixels are multiples of 1/255.
func imageKey(img []float64) string {
	b := make([]byte, len(img))
	for i, v := range img {
		b[i] = byte(math.Round(v * 255))
	}
	return string(b)
}

func TestNewEpisodesValidates(t *testing.T) {
	o, _ := loadFake(t, newFakeOmniglot(1, 1), true, OmniglotOptions{NoCache: true})
	set := fakeSplit(t, o, allRotations(o)) // 8 classes
	cases := []struct {
		way, shot, query int
		want             []string
	}{
		{9, 1, 1, []string{"9-way", "8"}},
		{5, 6, 15, []string{"6 shots + 15 queries = 21", "20"}},
		{0, 1, 15, []string{"0-way", "positive"}},
		{5, -1, 15, []string{"-1-shot", "positive"}},
		{5, 1, 0, []string{"0 queries", "positive"}},
	}
	for _, c := range cases {
		_, err := NewEpisodes(set, c.way, c.shot, c.query)
		checkErr(t, err, c.want...)
	}
	if _, err := NewEpisodes(set, 8, 5, 15); err != nil {
		t.Fatalf("8-way 5-shot 15-query on 8 classes: %v", err)
	}
}

// A batch sized for another source is a programmer error.
func TestEpisodesPanicOnMisSizedBatch(t *testing.T) {
	o, _ := loadFake(t, newFakeOmniglot(1, 1), true, OmniglotOptions{NoCache: true})
	e, _ := NewEpisodes(fakeSplit(t, o, allRotations(o)), 5, 1, 2)
	var b task.Batch
	b.Resize(1, 5, 5, 784, 5)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	e.Sample(rand.New(rand.NewPCG(1, 1)), &b)
}

func TestOmniglotSplitErrors(t *testing.T) {
	o, _ := loadFake(t, newFakeOmniglot(1, 1), true, OmniglotOptions{NoCache: true})
	cases := []struct {
		text string
		want []string
	}{
		{"Alphabet_0_0/character01/rot000\nNope/character01/rot090\n", []string{"fake.txt:2", `"Nope/character01/rot090"`, "Nope/character01", "neither"}},
		{"Alphabet_0_0/character01/rot045\n", []string{"fake.txt:1", "rot045", "malformed"}},
		{"\n\nAlphabet_0_0/character01\n", []string{"fake.txt:3", "2 fields"}},
		{"Alphabet_0_0/character01/rot000/x\n", []string{"fake.txt:1", "4 fields"}},
		{"/character01/rot000\n", []string{"fake.txt:1", "empty"}},
		{"Alphabet_0_0/character01/rot000\r\nAlphabet_0_0/character01/rot000\r\n", []string{"fake.txt:2", "already listed at fake.txt:1"}},
		{"\n \n", []string{"fake.txt lists no classes"}},
	}
	for _, c := range cases {
		_, err := o.SplitFrom("fake", "fake.txt", strings.NewReader(c.text))
		checkErr(t, err, c.want...)
	}
	_, err := o.Split("training")
	checkErr(t, err, `"training"`, "train, val, test, trainval")
	// The fake data lack the real characters: the embedded list's first
	// line is named.
	_, err = o.Split("val")
	checkErr(t, err, "splits/vinyals/val.txt:1", "Hebrew/character01/rot000")
}

func TestDefaultOmniglotDir(t *testing.T) {
	t.Setenv("MKBENCH_DATA", "/data/sets")
	if got := DefaultOmniglotDir(); got != filepath.Join("/data/sets", "omniglot") {
		t.Fatalf("with MKBENCH_DATA: %s", got)
	}
	t.Setenv("MKBENCH_DATA", "")
	root := t.TempDir()
	repo := filepath.Join(root, "main")
	os.MkdirAll(repo, 0o755)
	t.Chdir(repo)
	if got := DefaultOmniglotDir(); got != filepath.Join("data", "omniglot") {
		t.Fatalf("with nothing there: %s", got)
	}
	os.MkdirAll(filepath.Join(root, "shared", "data", "omniglot"), 0o755)
	if got := DefaultOmniglotDir(); got != filepath.Join("..", "shared", "data", "omniglot") {
		t.Fatalf("in a developer checkout: %s", got)
	}
	os.MkdirAll(filepath.Join(repo, "data", "omniglot"), 0o755)
	if got := DefaultOmniglotDir(); got != filepath.Join("data", "omniglot") {
		t.Fatalf("with ./data/omniglot: %s", got)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("MKBENCH_CACHE", "/tmp/somewhere")
	if d, err := DefaultCacheDir(); err != nil || d != "/tmp/somewhere" {
		t.Fatalf("%s, %v", d, err)
	}
	t.Setenv("MKBENCH_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg")
	if d, err := DefaultCacheDir(); runtime.GOOS == "linux" && (err != nil || d != "/tmp/xdg/mkbench") {
		t.Fatalf("%s, %v", d, err)
	}
}
