package datasets

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// decodeTo decodes an encoded image to w×h through the production path.
func decodeTo(t *testing.T, data []byte, w, h int) []uint8 {
	t.Helper()
	var s rgbScratch
	dst := make([]uint8, w*h*3)
	if err := decodeRGB("test", data, h, w, dst, &s); err != nil {
		t.Fatal(err)
	}
	return dst
}

// The RGB area filter on hand-computed answers, non-square both ways: a
// 5×2 image whose left two columns are red and the rest blue becomes, at
// 2×1, output column 0 = 2/2.5 red + 0.5/2.5 blue, column 1 all blue.
func TestResizeAreaRGBKnownAnswers(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 5, 2))
	for y := 0; y < 2; y++ {
		for x := 0; x < 5; x++ {
			c := color.NRGBA{0, 0, 250, 255}
			if x < 2 {
				c = color.NRGBA{250, 0, 0, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	got := decodeTo(t, encodePNGImage(img), 2, 1)
	want := []uint8{200, 0, 50, 0, 0, 250}
	if !bytes.Equal(got, want) {
		t.Fatalf("5×2 → 2×1: %v, want %v", got, want)
	}
	// Upscaling 1×1 (a side newAreaFilter cannot pad) and 2×2 → 4×4:
	// every output pixel lies inside one source pixel.
	one := image.NewGray(image.Rect(0, 0, 1, 1))
	one.Pix[0] = 77
	for _, v := range decodeTo(t, encodePNGImage(one), 3, 2) {
		if v != 77 {
			t.Fatalf("1×1 → 3×2: %d", v)
		}
	}
	four := image.NewGray(image.Rect(0, 0, 2, 2))
	copy(four.Pix, []uint8{0, 100, 200, 255})
	got = decodeTo(t, encodePNGImage(four), 4, 4)
	for y := 0; y < 4; y++ {
		for x := 0; x < 4; x++ {
			if want := four.Pix[(y/2)*2+x/2]; got[(y*4+x)*3] != want {
				t.Fatalf("2×2 → 4×4 at (%d, %d): %d, want %d", x, y, got[(y*4+x)*3], want)
			}
		}
	}
	// Same size is the identity.
	src := fixturePhoto(3, 1, 7, 5)
	got = decodeTo(t, encodePNGImage(src), 7, 5)
	for i := 0; i < 35; i++ {
		if !bytes.Equal(got[3*i:3*i+3], src.Pix[4*i:4*i+3]) {
			t.Fatalf("identity resize changed pixel %d", i)
		}
	}
}

// Any image keeps its mean colour through the filter.
func TestResizeAreaRGBConservesMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, sz := range [][4]int{{97, 61, 84, 84}, {84, 84, 32, 32}, {13, 200, 8, 8}} {
		src := make([]float32, sz[0]*sz[1]*3)
		var in [3]float64
		for i := range src {
			src[i] = float32(rng.IntN(256))
			in[i%3] += float64(src[i])
		}
		var s rgbScratch
		dst := make([]uint8, sz[2]*sz[3]*3)
		resizeAreaRGB(func(y int, row []float32) { copy(row, src[y*sz[0]*3:]) }, sz[0], sz[1], dst, sz[2], sz[3], &s)
		var out [3]float64
		for i, v := range dst {
			out[i%3] += float64(v)
		}
		for c := range in {
			a, b := in[c]/float64(sz[0]*sz[1]), out[c]/float64(sz[2]*sz[3])
			if math.Abs(a-b) > 0.5 { // rounding to bytes
				t.Fatalf("%v channel %d: mean %v in, %v out", sz, c, a, b)
			}
		}
	}
}

// Colour conversions: grey PNG replicated, straight alpha dropped, JPEG
// (YCbCr) within JPEG's error, paletted and 16-bit through the generic path.
func TestDecodeRGBColourModels(t *testing.T) {
	gray := image.NewGray(image.Rect(0, 0, 3, 3))
	for i := range gray.Pix {
		gray.Pix[i] = uint8(20 * i)
	}
	got := decodeTo(t, encodePNGImage(gray), 3, 3)
	for i := range gray.Pix {
		if got[3*i] != gray.Pix[i] || got[3*i+1] != gray.Pix[i] || got[3*i+2] != gray.Pix[i] {
			t.Fatalf("grey pixel %d → %v", i, got[3*i:3*i+3])
		}
	}
	nrgba := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	for i := 0; i < 4; i++ {
		nrgba.SetNRGBA(i%2, i/2, color.NRGBA{200, 100, 50, uint8(60 * i)})
	}
	if got := decodeTo(t, encodePNGImage(nrgba), 2, 2); !bytes.Equal(got, bytes.Repeat([]byte{200, 100, 50}, 4)) {
		t.Fatalf("translucent NRGBA → %v", got)
	}
	pal := image.NewPaletted(image.Rect(0, 0, 2, 1), color.Palette{color.RGBA{10, 20, 30, 255}, color.RGBA{40, 50, 60, 255}})
	pal.Pix[1] = 1
	if got := decodeTo(t, encodePNGImage(pal), 2, 1); !bytes.Equal(got, []byte{10, 20, 30, 40, 50, 60}) {
		t.Fatalf("paletted → %v", got)
	}
	g16 := image.NewGray16(image.Rect(0, 0, 1, 1))
	g16.SetGray16(0, 0, color.Gray16{Y: 0x8080})
	if got := decodeTo(t, encodePNGImage(g16), 1, 1); !bytes.Equal(got, []byte{128, 128, 128}) {
		t.Fatalf("gray16 → %v", got)
	}
	flat := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := 0; i < len(flat.Pix); i += 4 {
		copy(flat.Pix[i:], []uint8{180, 60, 90, 255})
	}
	for i, v := range decodeTo(t, encodeJPEG(flat), 16, 16) {
		if want := []int{180, 60, 90}[i%3]; math.Abs(float64(int(v)-want)) > 3 {
			t.Fatalf("JPEG pixel %d channel %d = %d, want %d ± 3", i/3, i%3, v, want)
		}
	}
	var s rgbScratch
	dst := make([]uint8, 3)
	for data, want := range map[string]string{
		"GIF89a\x01\x00\x01\x00\x00\x00\x00;": "not a JPEG or PNG",
		"":                                    "not a JPEG or PNG",
		string(encodePNG1(1<<15, 1<<12, func(x, y int) bool { return false })[:40]): "claims to be 32768×4096",
	} {
		err := decodeRGB("x.jpg", []byte(data), 1, 1, dst, &s)
		checkErr(t, err, "x.jpg", want)
	}
}

// The image cache: reused when intact, rebuilt on any damage, keyed by the
// sources.
func TestImageCache(t *testing.T) {
	f := newFakeMini(t, [3]int{2, 1, 1}, 3)
	cache := t.TempDir()
	load := func(wantCached bool) *ImageSet {
		t.Helper()
		s := f.load(t, ImageOptions{CacheDir: cache, Side: 12})
		if i := s.Info(); i.FromCache != wantCached || i.CacheErr != nil {
			t.Fatalf("FromCache %v (want %v), cache error %v", i.FromCache, wantCached, i.CacheErr)
		}
		return s
	}
	first := load(false)
	path := first.Info().CacheFile
	if filepath.Dir(path) != cache || !strings.HasPrefix(filepath.Base(path), "miniimagenet-") {
		t.Fatalf("cache file %s", path)
	}
	second := load(true)
	if !bytes.Equal(first.pix, second.pix) || second.Family() != "miniimagenet" || len(second.Splits()) != 4 {
		t.Fatal("cached load differs")
	}
	good, _ := os.ReadFile(path)
	for name, damage := range map[string]func([]byte) []byte{
		"bit flip in pixels": func(b []byte) []byte { b[len(b)-100] ^= 1; return b },
		"truncated":          func(b []byte) []byte { return b[:len(b)/2] },
		"extended":           func(b []byte) []byte { return append(b, 0) },
		"other version, valid checksum": func(b []byte) []byte {
			b = b[:len(b)-32]
			b[8]++
			return appendSum(b)
		},
		"class count changed, valid checksum": func(b []byte) []byte {
			b = b[:len(b)-32]
			b[imageCacheHead+2+len(miniWnid(0))]++ // first class's image count
			return appendSum(b)
		},
	} {
		t.Run(name, func(t *testing.T) {
			os.WriteFile(path, damage(bytes.Clone(good)), 0o644)
			if !bytes.Equal(load(false).pix, first.pix) {
				t.Fatal("rebuilt images differ")
			}
			load(true)
		})
	}
	// Another size is another key; a touched image is another key.
	if s := f.load(t, ImageOptions{CacheDir: cache, Side: 10}); s.Info().FromCache || s.Info().CacheFile == path {
		t.Fatal("another side was served from the first cache")
	}
	writeFile(t, f.path(0, 0), encodeJPEG(fixturePhoto(9, 9, 30, 30)))
	if s := f.load(t, ImageOptions{CacheDir: cache, Side: 12}); s.Info().FromCache {
		t.Fatal("a changed image was served from the cache")
	}
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

// ClassEpisodes on an image split: the Omniglot protocol checks (distinct
// classes per label, distinct images, one-hot targets, class-major rows),
// classes of unequal sizes, and seeded reproducibility.
func TestClassEpisodesProtocol(t *testing.T) {
	f := newFakeMini(t, [3]int{6, 1, 1}, 5)
	s := f.load(t, ImageOptions{NoCache: true, Side: 5})
	train, _ := s.Split("train")
	const way, shot, query, tasks = 4, 2, 3, 30
	e, err := NewClassEpisodes(train, way, shot, query)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "miniimagenet" || e.InDim() != 75 || e.OutDim() != way {
		t.Fatalf("Name %q InDim %d", e.Name(), e.InDim())
	}
	type id struct{ class, image int }
	images := map[string]id{}
	img := make([]float64, 75)
	for c := 0; c < train.NumClasses(); c++ {
		for k := 0; k < train.ImagesIn(c); k++ {
			train.Image(c, k, img)
			images[imageKey(img)] = id{c, k}
		}
	}
	b := sampleClassEpisodes(e, tasks, 3)
	for task := 0; task < tasks; task++ {
		classOf := map[int]int{}
		used := map[id]bool{}
		for _, part := range []struct {
			x, y []float64
			per  int
		}{{b.XS[task*way*shot*75:], b.YS[task*way*shot*way:], shot}, {b.XQ[task*way*query*75:], b.YQ[task*way*query*way:], query}} {
			for row := 0; row < way*part.per; row++ {
				got, ok := images[imageKey(part.x[row*75:(row+1)*75])]
				if !ok || used[got] {
					t.Fatalf("task %d row %d: image %v known %v, reused %v", task, row, got, ok, used[got])
				}
				used[got] = true
				label := row / part.per
				if part.y[row*way+label] != 1 {
					t.Fatalf("task %d row %d: target not one-hot at %d", task, row, label)
				}
				if c, seen := classOf[label]; seen && c != got.class {
					t.Fatalf("task %d: label %d has classes %d and %d", task, label, c, got.class)
				}
				classOf[label] = got.class
			}
		}
		seen := map[int]bool{}
		for _, c := range classOf {
			seen[c] = true
		}
		if len(seen) != way {
			t.Fatalf("task %d: %d distinct classes", task, len(seen))
		}
	}
	again := sampleClassEpisodes(e, tasks, 3)
	if !equalFloats(b.XS, again.XS) || !equalFloats(b.YQ, again.YQ) {
		t.Fatal("equal seeds gave different episodes")
	}
	// Too few images or classes, and a mis-sized batch.
	if _, err := NewClassEpisodes(train, 7, 1, 1); err == nil || !strings.Contains(err.Error(), "miniimagenet split \"train\" has 6") {
		t.Fatalf("7-way: %v", err)
	}
	_, err = NewClassEpisodes(train, 2, 3, 3)
	checkErr(t, err, "3 shots + 3 queries = 6 examples per class", "has 5")
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on a mis-sized batch")
		}
	}()
	var bad task.Batch
	bad.Resize(1, way*shot, way*query, 74, way)
	e.Sample(rand.New(rand.NewPCG(1, 1)), &bad)
}

func equalFloats(a, b []float64) bool {
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

// sampleClassEpisodes draws tasks episodes with a seeded rng.
func sampleClassEpisodes(e task.Source, tasks int, seed uint64) *task.Batch {
	var b task.Batch
	type sizes interface {
		Way() int
		Shot() int
		Query() int
	}
	s := e.(sizes)
	b.Resize(tasks, s.Way()*s.Shot(), s.Way()*s.Query(), e.InDim(), e.OutDim())
	e.Sample(rand.New(rand.NewPCG(seed, seed+1)), &b)
	return &b
}

// The area filter's weights sum to one and its windows stay inside the
// source for every size, tiny ones (whose padded width is capped) included.
func TestAreaFilterWeights(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for m := 1; m <= 40; m++ {
			f := newAreaFilter(n, m)
			if w := (n+m-1)/m + 1; w <= n && f.width != w {
				t.Fatalf("%d → %d: width %d, want %d", n, m, f.width, w)
			}
			for o := 0; o < m; o++ {
				var s float64
				for _, w := range f.w[o*f.width : (o+1)*f.width] {
					s += w
				}
				if f.start[o] < 0 || f.start[o]+f.width > n || math.Abs(s-1) > 1e-12 {
					t.Fatalf("%d → %d output %d: start %d width %d, weights sum to %v", n, m, o, f.start[o], f.width, s)
				}
			}
		}
	}
}
