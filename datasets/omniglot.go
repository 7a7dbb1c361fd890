package datasets

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Omniglot geometry. The published drawings are 105×105; every few-shot
// paper since Vinyals et al. trains on 28×28 copies.
const (
	OmniglotSourceSide = 105
	OmniglotSide       = 28
	OmniglotPixels     = OmniglotSide * OmniglotSide
	// OmniglotDrawings is the number of drawings of every character (one
	// per drawer); a copy with a different count is treated as damaged.
	OmniglotDrawings = 20
	// DefaultOmniglotQuery is the paper's query size per class (k+15
	// examples per class, at training and at test time).
	DefaultOmniglotQuery = 15
)

// The two halves of Omniglot as distributed, each a zip or the folder it
// unpacks to. Background characters come first in every listing.
var omniglotSets = [2]string{"images_background", "images_evaluation"}

// ErrNoOmniglot is wrapped by the errors LoadOmniglot returns when the data
// folder or one of its two halves is missing, so that a command line can add
// its own hint (for mkbench: the --data flag).
var ErrNoOmniglot = errors.New("datasets: Omniglot data not found")

// OmniglotOptions tunes LoadOmniglot. The zero value caches under
// DefaultCacheDir and decodes on every core.
type OmniglotOptions struct {
	// CacheDir holds the decoded-image cache; "" means DefaultCacheDir().
	CacheDir string
	// NoCache decodes the PNGs every time and writes no cache file.
	NoCache bool
	// Workers is the number of decoding goroutines; 0 means GOMAXPROCS.
	// The result does not depend on it.
	Workers int
}

// OmniglotCharacter is one character: an alphabet folder and a character
// folder of either half of the data set.
type OmniglotCharacter struct {
	Background bool   // from images_background (else images_evaluation)
	Alphabet   string // e.g. "Angelic"
	Name       string // e.g. "character01"
}

// ID is the character's key in the split files, e.g. "Angelic/character01".
func (c OmniglotCharacter) ID() string { return c.Alphabet + "/" + c.Name }

// OmniglotLoadInfo says where a load came from and what it cost, for the
// caller to report; the loader itself never prints.
type OmniglotLoadInfo struct {
	Sources   [2]string // the zip or folder read for each half
	CacheFile string    // "" when caching was off or no cache folder exists
	FromCache bool      // the images came from CacheFile, no PNG was decoded
	// CacheErr is why the cache could not be written or located; the load
	// itself succeeded, only the next start will decode again.
	CacheErr error
	Elapsed  time.Duration
}

// Omniglot is the decoded data set: every character's 20 drawings as 28×28
// images. It is immutable after loading and safe for concurrent use.
type Omniglot struct {
	chars []OmniglotCharacter
	// pix holds drawing k of character c at (c·20+k)·784, row-major, ink
	// quantized to 0..255: a quarter of the memory of float32 for an error
	// of at most 1/510, far below what the 1-bit source resolves.
	pix   []uint8
	index map[string]int // OmniglotCharacter.ID → position in chars
	key   [32]byte       // cache key of the sources this was loaded from
	info  OmniglotLoadInfo
}

// NumCharacters is 1,623 for the complete data set (964 background + 659
// evaluation).
func (o *Omniglot) NumCharacters() int { return len(o.chars) }

// Character returns character i, background characters first, each half
// sorted by alphabet and character folder name.
func (o *Omniglot) Character(i int) OmniglotCharacter { return o.chars[i] }

// Info describes how the data were loaded.
func (o *Omniglot) Info() OmniglotLoadInfo { return o.info }

// Drawing writes drawing k (0..19, in file-name order) of character c,
// rotated counter-clockwise by rot·90°, into dst[:784] as ink in [0, 1]:
// 1 is a stroke, 0 the background.
func (o *Omniglot) Drawing(c, k, rot int, dst []float64) {
	if k < 0 || k >= OmniglotDrawings {
		panic(fmt.Sprintf("datasets: Omniglot drawing %d out of range [0, %d)", k, OmniglotDrawings))
	}
	src := o.pix[(c*OmniglotDrawings+k)*OmniglotPixels:][:OmniglotPixels]
	perm := &rotations[rot&3]
	dst = dst[:OmniglotPixels]
	for i, j := range perm {
		dst[i] = inkLevels[src[j]]
	}
}

// inkLevels maps a stored byte back to [0, 1] without a division per pixel.
var inkLevels = func() (t [256]float64) {
	for i := range t {
		t[i] = float64(i) / 255
	}
	return t
}()

// DefaultOmniglotDir is where mkbench looks for Omniglot when the user names
// no folder: $MKBENCH_DATA/omniglot when MKBENCH_DATA is set; otherwise
// ./data/omniglot if that folder exists; otherwise ../shared/data/omniglot
// if that exists (the developers' checkout layout); otherwise
// ./data/omniglot, so that the "not found" error names the conventional
// place. Relative paths are relative to the working directory.
func DefaultOmniglotDir() string { return defaultDataDir("omniglot") }

// LoadOmniglot reads both halves of Omniglot from dir, which holds
// images_background.zip and images_evaluation.zip as distributed, or the
// folders they unpack to (images_background/<Alphabet>/characterNN/<ID>_<NN>.png);
// a zip is preferred when both are present. Every drawing is inverted
// (strokes 1, background 0) and area-filtered from 105×105 to 28×28.
//
// The decoded images are cached in a file named by the sources' checksums
// (sha256 of each zip, or of each folder's file names, sizes and
// modification times), so a second start reads one file instead of 32,460
// PNGs. A cache that is unreadable, truncated, corrupt or from other sources
// is ignored and rewritten; failing to write it is reported in Info, not as
// an error.
func LoadOmniglot(dir string, opts OmniglotOptions) (*Omniglot, error) {
	start := time.Now()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: folder %s does not exist (it should hold images_background.zip and images_evaluation.zip)", ErrNoOmniglot, dir)
	}
	var srcs [2]*omniglotSource
	defer func() {
		for _, s := range srcs {
			if s != nil {
				s.close()
			}
		}
	}()
	for i, set := range omniglotSets {
		s, err := openOmniglotSource(dir, set)
		if err != nil {
			return nil, err
		}
		srcs[i] = s
	}
	key := omniglotCacheKey(srcs)
	info := OmniglotLoadInfo{Sources: [2]string{srcs[0].path, srcs[1].path}}

	info.CacheFile, info.CacheErr = cacheFile(opts.NoCache, opts.CacheDir, cacheName("omniglot", key))
	if info.CacheFile != "" {
		if o, err := readOmniglotCache(info.CacheFile, key); err == nil {
			info.FromCache = true
			info.Elapsed = time.Since(start)
			o.info = info
			return o, nil
		}
	}

	var chars []OmniglotCharacter
	var files []drawingFile
	for i, s := range srcs {
		c, f, err := s.list(i == 0)
		if err != nil {
			return nil, err
		}
		chars = append(chars, c...)
		files = append(files, f...)
	}
	o, err := newOmniglot(chars, key, nil)
	if err != nil {
		return nil, err
	}
	if err := decodeDrawings(files, o.pix, decodeWorkers(opts.Workers)); err != nil {
		return nil, err
	}
	if info.CacheFile != "" {
		info.CacheErr = writeOmniglotCache(info.CacheFile, o)
	}
	info.Elapsed = time.Since(start)
	o.info = info
	return o, nil
}

// newOmniglot indexes the IDs of chars, whose images are pix, or zeros when
// pix is nil; two characters with one ID would make split lines ambiguous.
func newOmniglot(chars []OmniglotCharacter, key [32]byte, pix []uint8) (*Omniglot, error) {
	n := len(chars) * OmniglotDrawings * OmniglotPixels
	if pix == nil {
		pix = make([]uint8, n)
	} else if len(pix) != n {
		return nil, fmt.Errorf("datasets: %d bytes of images for %d characters, want %d", len(pix), len(chars), n)
	}
	o := &Omniglot{
		chars: chars,
		pix:   pix,
		index: make(map[string]int, len(chars)),
		key:   key,
	}
	for i, c := range chars {
		if _, dup := o.index[c.ID()]; dup {
			return nil, fmt.Errorf("datasets: Omniglot character %s appears in both images_background and images_evaluation", c.ID())
		}
		o.index[c.ID()] = i
	}
	return o, nil
}
