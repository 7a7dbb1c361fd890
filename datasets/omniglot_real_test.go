package datasets

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
)

func TestOmniglotRealCounts(t *testing.T) {
	o := realOmniglot(t)
	t.Logf("decoded 32,460 PNGs in %v on %d cores", o.Info().Elapsed.Round(time.Millisecond), runtime.GOMAXPROCS(0))
	var bg, ev int
	alphabets := map[bool]map[string]bool{true: {}, false: {}}
	for i := 0; i < o.NumCharacters(); i++ {
		c := o.Character(i)
		alphabets[c.Background][c.Alphabet] = true
		if c.Background {
			bg++
			if ev > 0 {
				t.Fatalf("background character %s listed after evaluation ones", c.ID())
			}
		} else {
			ev++
		}
	}
	if bg != 964 || ev != 659 || len(alphabets[true]) != 30 || len(alphabets[false]) != 20 {
		t.Fatalf("%d background characters in %d alphabets, %d evaluation in %d; want 964 in 30, 659 in 20",
			bg, len(alphabets[true]), ev, len(alphabets[false]))
	}
	if n := len(o.pix) / OmniglotPixels; n != 32460 {
		t.Fatalf("%d images, want 32,460", n)
	}
	// Strokes are thin: about 8% of a 28×28 image is ink, and every
	// drawing has some.
	var sum float64
	img := make([]float64, OmniglotPixels)
	for c := 0; c < o.NumCharacters(); c++ {
		for k := 0; k < OmniglotDrawings; k++ {
			o.Drawing(c, k, 0, img)
			var s float64
			for _, v := range img {
				s += v
			}
			if s == 0 {
				t.Fatalf("drawing %d of %s is blank", k, o.Character(c).ID())
			}
			sum += s
		}
	}
	mean := sum / float64(len(o.pix))
	t.Logf("mean ink %.4f", mean)
	if mean < 0.05 || mean > 0.3 {
		t.Fatalf("mean ink %.3f: images are not inverted strokes-on-background", mean)
	}
}

func TestOmniglotRealSplits(t *testing.T) {
	o := realOmniglot(t)
	want := map[string]int{"train": 4112, "val": 688, "test": 1692, "trainval": 4800}
	chars := map[string]map[int]bool{}
	for _, name := range OmniglotSplitNames() {
		s, err := o.Split(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.NumClasses() != want[name] || s.ImagesPerClass() != 20 {
			t.Fatalf("split %s: %d classes × %d images, want %d × 20", name, s.NumClasses(), s.ImagesPerClass(), want[name])
		}
		chars[name] = map[int]bool{}
		halves := map[bool]bool{}
		for i := 0; i < s.NumClasses(); i++ {
			c := s.Class(i).Character
			chars[name][c] = true
			halves[o.Character(c).Background] = true
		}
		// Vinyals et al. train on all 964 background characters plus part
		// of the evaluation half; val and test are evaluation characters.
		if name == "train" && len(halves) != 2 {
			t.Errorf("split train draws on one half of the data only")
		}
	}
	for _, pair := range [][2]string{{"train", "val"}, {"train", "test"}, {"val", "test"}} {
		for c := range chars[pair[0]] {
			if chars[pair[1]][c] {
				t.Fatalf("character %s is in both %s and %s", o.Character(c).ID(), pair[0], pair[1])
			}
		}
	}
	// trainval is built from the embedded train and val; it must equal the
	// published trainval.txt line for line.
	published, err := os.ReadFile(filepath.Join(testutil.Data(t, "omniglot", "splits/vinyals/trainval.txt"), "splits", "vinyals", "trainval.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := o.Split("trainval")
	lines := strings.Split(strings.TrimSpace(string(published)), "\n")
	if len(lines) != s.NumClasses() {
		t.Fatalf("trainval.txt has %d lines, Split(trainval) %d classes", len(lines), s.NumClasses())
	}
	for i, line := range lines {
		c := s.Class(i)
		if got := fmt.Sprintf("%s/rot%03d", o.Character(c.Character).ID(), c.Rotation); got != line {
			t.Fatalf("trainval class %d is %s, trainval.txt says %s", i, got, line)
		}
	}
}

// batchHash fingerprints every number of a batch.
func batchHash(b *task.Batch) string {
	h := sha256.New()
	var u [8]byte
	for _, s := range [][]float64{b.XS, b.YS, b.XQ, b.YQ} {
		for _, v := range s {
			binary.LittleEndian.PutUint64(u[:], math.Float64bits(v))
			h.Write(u[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sampleEpisodes(t testing.TB, e *Episodes, tasks int, seed uint64) *task.Batch {
	var b task.Batch
	b.Resize(tasks, e.Way()*e.Shot(), e.Way()*e.Query(), e.InDim(), e.OutDim())
	e.Sample(rand.New(rand.NewPCG(seed, seed+1)), &b)
	return &b
}

// The recorded hash pins the whole pipeline (file order, inversion, filter,
// quantization, rotations, split order, sampler and its use of the rng): a
// change to any of them must be deliberate and update the constant.
const realEpisodeHash = "f4f9313f72a699a4e9944bc043cc8f88042c7f726cc61c88e41d987b05fac235"

func TestOmniglotRealEpisodesAreDeterministic(t *testing.T) {
	o := realOmniglot(t)
	train, err := o.Split("train")
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEpisodes(train, 5, 1, DefaultOmniglotQuery)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := sampleEpisodes(t, e, 6, 1), sampleEpisodes(t, e, 6, 1), sampleEpisodes(t, e, 6, 2)
	ha, hb, hc := batchHash(a), batchHash(b), batchHash(c)
	if ha != hb {
		t.Fatal("two samplers with one seed drew different episodes")
	}
	if ha == hc {
		t.Fatal("seeds 1 and 2 drew the same episodes")
	}
	if ha != realEpisodeHash {
		t.Fatalf("episode hash %s, recorded %s", ha, realEpisodeHash)
	}
}

func TestOmniglotRealCacheRoundTrip(t *testing.T) {
	o := realOmniglot(t)
	dir := t.TempDir()
	start := time.Now()
	if err := writeOmniglotCache(filepath.Join(dir, cacheName("omniglot", o.key)), o); err != nil {
		t.Fatal(err)
	}
	t.Logf("cache written in %v", time.Since(start).Round(time.Millisecond))
	c, err := LoadOmniglot(testutil.Data(t, "omniglot"), OmniglotOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Info().FromCache {
		t.Fatal("second load decoded the PNGs again instead of reading the cache")
	}
	t.Logf("cached load in %v (decode took %v)", c.Info().Elapsed.Round(time.Millisecond), o.Info().Elapsed.Round(time.Millisecond))
	sameOmniglot(t, o, c)
}

func sameOmniglot(t *testing.T, a, b *Omniglot) {
	t.Helper()
	if a.NumCharacters() != b.NumCharacters() {
		t.Fatalf("%d characters, then %d", a.NumCharacters(), b.NumCharacters())
	}
	for i := 0; i < a.NumCharacters(); i++ {
		if a.Character(i) != b.Character(i) {
			t.Fatalf("character %d is %+v, then %+v", i, a.Character(i), b.Character(i))
		}
	}
	if string(a.pix) != string(b.pix) {
		t.Fatal("the images differ")
	}
}

func BenchmarkEpisodeSample(b *testing.B) {
	o := realOmniglot(b)
	train, err := o.Split("train")
	if err != nil {
		b.Fatal(err)
	}
	e, err := NewEpisodes(train, 5, 1, DefaultOmniglotQuery)
	if err != nil {
		b.Fatal(err)
	}
	var batch task.Batch
	batch.Resize(6, 5, 75, OmniglotPixels, 5)
	rng := rand.New(rand.NewPCG(1, 1))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e.Sample(rng, &batch)
	}
}
