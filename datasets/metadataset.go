package datasets

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/tfrecord"
)

// ErrNoMetaDataset is wrapped by the errors for a missing Meta-Dataset
// folder or source.
var ErrNoMetaDataset = errors.New("datasets: Meta-Dataset records not found")

// MetaDatasetSide is the image side of the paper's Meta-Dataset setting.
const MetaDatasetSide = 84

// DefaultMetaDatasetDir is where mkbench looks for the converted records
// when no folder is named (see defaultDataDir).
func DefaultMetaDatasetDir() string { return defaultDataDir("metadataset") }

// MDSource is one Meta-Dataset source read from its records: its spec and
// its images, decoded to RGB at one side, classes in class-id order.
type MDSource struct {
	Spec *MDSpec
	set  *ImageSet
}

// Set is the source's decoded images.
func (s *MDSource) Set() *ImageSet { return s.set }

// Split is the source's classes of split ("train", "val"/"valid",
// "test") as a model reads Meta-Dataset images: RGB in [−1, 1], the
// reference's 2·(x/255 − 0.5).
func (s *MDSource) Split(split string) (*Converted, error) {
	ids := s.Spec.Classes(split)
	if len(ids) == 0 {
		return nil, fmt.Errorf("datasets: Meta-Dataset source %s has no %s classes", s.Spec.Name, split)
	}
	cs := &ImageClasses{name: s.Spec.Name + "/" + split, set: s.set, classes: slices.Clone(ids)}
	return Convert(cs, PixelMode{Channels: 3, Signed: true}, "metadataset")
}

// MetaDatasetSources lists the sources under dir: its folders holding a
// dataset_spec.json, sorted.
func MetaDatasetSources(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (want DIR/<source>/dataset_spec.json and DIR/<source>/<class id>.tfrecords)", ErrNoMetaDataset, err)
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), MDSpecFile)); err == nil {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s has no source folders with a %s", ErrNoMetaDataset, dir, MDSpecFile)
	}
	return out, nil
}

// LoadMetaDatasetSource reads source name under dir: its spec, and every
// record of every class, each image decoded and area-resized to side. A
// class file the spec names and the folder lacks, a record whose CRC or
// framing is damaged, a record whose label is not its class, and an image
// that cannot be decoded are each one error naming the file and the
// record. The decoded images are cached like the other colour sets.
//
// The encoded records of the source are read into memory before
// decoding, and the decoded set is held whole: fine for every source but
// ILSVRC (27 GB decoded at 84×84), which OpenMetaDatasetStream reads
// image by image instead (see MDStreamAbove).
func LoadMetaDatasetSource(dir, name string, side int, opts ImageOptions) (*MDSource, error) {
	start := time.Now()
	spec, err := loadMDSpecChecked(dir, name, side)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "mkbench metadataset v%d bilinear %d %s\n", imageCacheVersion, side, name)
	var classes []ImageClass
	var files []drawingFile
	for id := 0; id < spec.NumClasses(); id++ {
		var n int
		for _, f := range spec.ClassFiles(id) {
			recs, err := readClassRecords(f, id)
			if err != nil {
				return nil, err
			}
			fi, err := os.Stat(f)
			if err != nil {
				return nil, err
			}
			h.Write([]byte(filepath.Base(f)))
			hashFileState(h, fi.Size(), fi.ModTime().UnixNano())
			for i, img := range recs {
				files = append(files, drawingFile{label: fmt.Sprintf("%s record %d", f, i), read: func() ([]byte, error) { return img, nil }})
			}
			n += len(recs)
		}
		if want := spec.Images(id); n != want {
			return nil, fmt.Errorf("datasets: %s: class %d has %d records, the spec says %d", filepath.Join(dir, name), id, n, want)
		}
		classes = append(classes, ImageClass{Name: fmt.Sprintf("%d", id), Images: n})
	}
	var key [32]byte
	h.Sum(key[:0])
	job := imageJob{family: "metadataset", title: "Meta-Dataset " + name, side: side, classes: classes, files: files, key: key,
		sources: []string{filepath.Join(dir, name)}, filter: filterBilinearAligned}
	set, err := loadImages(job, opts, start)
	if err != nil {
		return nil, err
	}
	return &MDSource{Spec: spec, set: set}, nil
}

// readClassRecords reads the images of a class file's records, checking
// that each is an Example with one image and the class's label.
func readClassRecords(path string, class int) ([][]byte, error) {
	var out [][]byte
	err := tfrecord.Scan(path, func(i int, rec []byte) error {
		ex, err := tfrecord.DecodeExample(rec)
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		img, err := ex.OneBytes("image")
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		label, err := ex.OneInt64("label")
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		if label != int64(class) {
			return fmt.Errorf("%s: record %d has label %d, but the file holds class %d", path, i, label, class)
		}
		out = append(out, img)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	return out, nil
}

// MDEpisodes draws fixed way-way shot-shot episodes from one or several
// sources' split: each episode from one source chosen uniformly (the
// reference's multi-source pipeline), its classes drawn uniformly from
// that source's split (the notes' fixed-way rule). The sources are
// Meta-Dataset's images, or their pre-computed features.
type MDEpisodes struct {
	family           string
	names            []string
	srcs             []ClassSource
	way, shot, query int
}

// NewMDEpisodes is NewMultiEpisodes over Meta-Dataset sources' images.
func NewMDEpisodes(srcs []*MDSource, split string, way, shot, query int) (*MDEpisodes, error) {
	var names []string
	var cs []ClassSource
	for _, s := range srcs {
		c, err := s.Split(split)
		if err != nil {
			return nil, err
		}
		names, cs = append(names, s.Spec.Name), append(cs, c)
	}
	return NewMultiEpisodes("metadataset", names, cs, way, shot, query)
}

// NewMultiEpisodes checks that every source can give the episodes; family
// names the task family (the model's input kind).
func NewMultiEpisodes(family string, names []string, srcs []ClassSource, way, shot, query int) (*MDEpisodes, error) {
	if len(srcs) == 0 || len(names) != len(srcs) {
		return nil, errors.New("datasets: episodes need one or more named sources")
	}
	if err := checkShape(way, shot, query); err != nil {
		return nil, err
	}
	for i, c := range srcs {
		// The same checks as any class episodes, naming the source.
		if _, err := NewClassEpisodes(c, way, shot, query); err != nil {
			return nil, fmt.Errorf("datasets: %s: %s", names[i], strings.TrimPrefix(err.Error(), "datasets: "))
		}
		if c.InDim() != srcs[0].InDim() {
			return nil, fmt.Errorf("datasets: %s has %d-wide examples, %s %d", names[i], c.InDim(), names[0], srcs[0].InDim())
		}
	}
	return &MDEpisodes{family: family, names: slices.Clone(names), srcs: slices.Clone(srcs), way: way, shot: shot, query: query}, nil
}

func (e *MDEpisodes) Name() string { return e.family }
func (e *MDEpisodes) InDim() int   { return e.srcs[0].InDim() }
func (e *MDEpisodes) OutDim() int  { return e.way }

// Sources names the sources episodes are drawn from.
func (e *MDEpisodes) Sources() []string { return slices.Clone(e.names) }

// Sample fills b with b.T episodes, each from a source drawn first.
func (e *MDEpisodes) Sample(rng *rand.Rand, b *task.Batch) {
	checkBatch("MDEpisodes", b, e.way, e.shot, e.query, e.InDim())
	var s episodeScratch
	for t := 0; t < b.T; t++ {
		src := e.srcs[0]
		if len(e.srcs) > 1 {
			src = e.srcs[rng.IntN(len(e.srcs))]
		}
		s.draw(rng, b, t, &episodePool{support: src}, e.way, e.shot, e.query)
	}
}
