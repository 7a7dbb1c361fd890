package datasets

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// ImageChannels is the number of channels of every ImageSet: the colour
// data sets are used as RGB, interleaved per pixel.
const ImageChannels = 3

// ImageOptions tunes the loaders of the decoded image sets (miniImageNet,
// CIFAR-FS, DomainNet). The zero value caches under DefaultCacheDir,
// decodes on every core and resizes to the data set's standard side.
type ImageOptions struct {
	// CacheDir holds the decoded-image cache; "" means DefaultCacheDir().
	CacheDir string
	// NoCache decodes every time and writes no cache file.
	NoCache bool
	// Workers is the number of decoding goroutines; 0 means GOMAXPROCS.
	// The result does not depend on it, nor does the memory the decodes
	// take, which they share under a bound of their own (see the
	// package's Image memory).
	Workers int
	// Side is the height and width images are resized to; 0 means the
	// paper's (84 for miniImageNet and DomainNet). CIFAR-FS images are
	// always 32×32 as distributed.
	Side int
	// SplitDir, when set, is a folder holding the split files to use
	// instead of the embedded ones (miniImageNet: train.csv, val.csv,
	// test.csv; CIFAR-FS: train.json, val.json, test.json).
	SplitDir string
}

// ImageClass is one class of an ImageSet.
type ImageClass struct {
	Name   string // e.g. "n01532829" (miniImageNet), "apple" (CIFAR-100), "aircraft_carrier" (DomainNet)
	Images int    // number of images
	first  int    // index of its first image in the set
}

// ImageLoadInfo says where a load came from and what it cost, for the
// caller to report; the loaders never print.
type ImageLoadInfo struct {
	Sources   []string // the files or folders read
	CacheFile string   // "" when caching was off, not used, or no cache folder exists
	FromCache bool     // the images came from CacheFile, nothing was decoded
	// CacheErr is why the cache could not be written or located; the load
	// itself succeeded, only the next start will decode again.
	CacheErr error
	Elapsed  time.Duration
}

// ImageSet is a decoded colour image data set: classes of RGB images of
// one size, stored as bytes (0..255) and handed out as float64 in [0, 1],
// channels interleaved (HWC), the layout engine.ConvSpec expects. Splits
// name lists of its classes. It is immutable after loading and safe for
// concurrent use.
type ImageSet struct {
	family  string // task-family name, e.g. "miniimagenet"
	title   string // for messages, e.g. "miniImageNet"
	h, w    int
	classes []ImageClass
	index   map[string]int
	// pix holds image i (classes in order, each class's images in order)
	// at i·h·w·3, HWC; bytes rather than float32 for a quarter of the
	// memory (miniImageNet: 1.27 GB instead of 5.1 GB).
	pix    []uint8
	key    [32]byte
	splits map[string][]int // split name → class indices
	order  []string         // split names in the order Splits lists them
	info   ImageLoadInfo
}

// newImageSet lays out classes (Name and Images set) over pix, or zeros
// when pix is nil.
func newImageSet(family, title string, h, w int, classes []ImageClass, key [32]byte, pix []uint8) (*ImageSet, error) {
	s := &ImageSet{family: family, title: title, h: h, w: w, classes: classes, index: make(map[string]int, len(classes)), key: key}
	n := 0
	for i := range classes {
		c := &classes[i]
		if c.Name == "" || c.Images <= 0 {
			return nil, fmt.Errorf("datasets: %s class %d (%q) has %d images", title, i, c.Name, c.Images)
		}
		if _, dup := s.index[c.Name]; dup {
			return nil, fmt.Errorf("datasets: %s lists class %q twice", title, c.Name)
		}
		s.index[c.Name] = i
		c.first = n
		n += c.Images
	}
	size := n * h * w * ImageChannels
	if pix == nil {
		pix = make([]uint8, size)
	} else if len(pix) != size {
		return nil, fmt.Errorf("datasets: %d bytes of %s images, want %d", len(pix), title, size)
	}
	s.pix = pix
	return s, nil
}

// Family is the task-family name of episodes drawn from the set:
// "miniimagenet", "cifarfs" or "domainnet".
func (s *ImageSet) Family() string { return s.family }

// Title names the set in messages, e.g. "miniImageNet" or "DomainNet
// clipart_train".
func (s *ImageSet) Title() string { return s.title }

// Height and Width are the images' size in pixels.
func (s *ImageSet) Height() int { return s.h }
func (s *ImageSet) Width() int  { return s.w }

// InDim is the length of one image: Height·Width·3.
func (s *ImageSet) InDim() int { return s.h * s.w * ImageChannels }

// NumClasses is the number of classes of the whole set.
func (s *ImageSet) NumClasses() int { return len(s.classes) }

// Class returns class i, in the set's order (see each loader).
func (s *ImageSet) Class(i int) ImageClass { return s.classes[i] }

// NumImages is the number of images of all classes.
func (s *ImageSet) NumImages() int { return len(s.pix) / s.InDim() }

// Info describes how the set was loaded.
func (s *ImageSet) Info() ImageLoadInfo { return s.info }

// Pixels returns image k of class c as stored: InDim bytes, HWC, 0..255.
// The slice aliases the set; do not modify it.
func (s *ImageSet) Pixels(c, k int) []uint8 {
	cl := s.classes[c]
	if k < 0 || k >= cl.Images {
		panic(fmt.Sprintf("datasets: %s class %q image %d out of range [0, %d)", s.title, cl.Name, k, cl.Images))
	}
	n := s.InDim()
	return s.pix[(cl.first+k)*n:][:n]
}

// Image writes image k of class c into dst[:InDim()] as values in [0, 1],
// HWC.
func (s *ImageSet) Image(c, k int, dst []float64) {
	src := s.Pixels(c, k)
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = inkLevels[v]
	}
}

// Splits lists the names Split accepts.
func (s *ImageSet) Splits() []string { return append([]string(nil), s.order...) }

// Split returns the classes of a named split ("train", "val", "test",
// "trainval" for miniImageNet and CIFAR-FS).
func (s *ImageSet) Split(name string) (*ImageClasses, error) {
	cl, ok := s.splits[name]
	if !ok {
		return nil, fmt.Errorf("datasets: unknown %s split %q (want %s)", s.title, name, strings.Join(s.order, ", "))
	}
	return &ImageClasses{name: name, set: s, classes: cl}, nil
}

// All returns every class of the set as one split, called name.
func (s *ImageSet) All(name string) *ImageClasses {
	cl := make([]int, len(s.classes))
	for i := range cl {
		cl[i] = i
	}
	return &ImageClasses{name: name, set: s, classes: cl}
}

func (s *ImageSet) lookup(file string, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("datasets: %s lists no classes", file)
	}
	cl := make([]int, len(names))
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		c, ok := s.index[n]
		if !ok {
			return nil, fmt.Errorf("datasets: %s: class %q is not in %s", file, n, s.title)
		}
		if seen[n] {
			return nil, fmt.Errorf("datasets: %s lists class %q twice", file, n)
		}
		seen[n] = true
		cl[i] = c
	}
	return cl, nil
}

// addSplit registers a split; names must be classes of the set.
func (s *ImageSet) addSplit(split, file string, names []string) error {
	cl, err := s.lookup(file, names)
	if err != nil {
		return err
	}
	if s.splits == nil {
		s.splits = map[string][]int{}
	}
	s.splits[split] = cl
	s.order = append(s.order, split)
	return nil
}

// addUnion registers split as the concatenation of registered splits.
func (s *ImageSet) addUnion(split string, parts ...string) {
	var cl []int
	for _, p := range parts {
		cl = append(cl, s.splits[p]...)
	}
	s.splits[split] = cl
	s.order = append(s.order, split)
}

// ImageClasses is a split of an ImageSet: a list of its classes, which
// episodes are drawn from (see NewClassEpisodes). It implements
// ClassSource and is safe for concurrent use.
type ImageClasses struct {
	name    string
	set     *ImageSet
	classes []int
}

func (c *ImageClasses) Family() string         { return c.set.family }
func (c *ImageClasses) Name() string           { return c.name }
func (c *ImageClasses) NumClasses() int        { return len(c.classes) }
func (c *ImageClasses) InDim() int             { return c.set.InDim() }
func (c *ImageClasses) Data() *ImageSet        { return c.set }
func (c *ImageClasses) Class(i int) ImageClass { return c.set.classes[c.classes[i]] }
func (c *ImageClasses) ImagesIn(i int) int     { return c.set.classes[c.classes[i]].Images }

// Image writes image k of class i of the split into dst[:InDim()].
func (c *ImageClasses) Image(i, k int, dst []float64) { c.set.Image(c.classes[i], k, dst) }

// imageJob is everything a loader hands loadImages: the classes, their
// files in order, and the cache key that names the result.
type imageJob struct {
	family, title string
	side          int
	classes       []ImageClass // Name and Images
	files         []drawingFile
	key           [32]byte
	sources       []string
	filter        resizeFilter
}

// loadImages returns the decoded images of job from the cache when a valid
// cache file exists, else decodes them (and writes the cache).
func loadImages(job imageJob, opts ImageOptions, start time.Time) (*ImageSet, error) {
	info := ImageLoadInfo{Sources: job.sources}
	info.CacheFile, info.CacheErr = cacheFile(opts.NoCache, opts.CacheDir, cacheName(job.family, job.key))
	if info.CacheFile != "" {
		if s, err := readImageCache(info.CacheFile, job); err == nil {
			info.FromCache = true
			info.Elapsed = time.Since(start)
			s.info = info
			return s, nil
		}
	}
	s, err := newImageSet(job.family, job.title, job.side, job.side, job.classes, job.key, nil)
	if err != nil {
		return nil, err
	}
	if err := decodeImageFiles(job.files, s.pix, job.side, job.side, decodeWorkers(opts.Workers), job.filter); err != nil {
		return nil, err
	}
	if info.CacheFile != "" {
		info.CacheErr = writeImageCache(info.CacheFile, s)
	}
	info.Elapsed = time.Since(start)
	s.info = info
	return s, nil
}

// sortedNames returns the keys of m in increasing order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
