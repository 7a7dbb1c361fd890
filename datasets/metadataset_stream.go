package datasets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/mkbench/mkbench/internal/tfrecord"
)

// MDStreamAbove is the decoded size (bytes) above which a Meta-Dataset
// source is streamed (OpenMetaDatasetStream) rather than decoded whole
// (LoadMetaDatasetSource): ILSVRC's 1.28 M images are 27 GB at 84×84,
// more than most machines hold; every other source is below it at 84×84.
const MDStreamAbove = 4 << 30

// MDDecodedBytes is what source spec takes decoded at side×side RGB.
func MDDecodedBytes(spec *MDSpec, side int) int64 {
	var n int64
	for id := 0; id < spec.NumClasses(); id++ {
		n += int64(spec.Images(id))
	}
	return n * int64(side) * int64(side) * ImageChannels
}

// MDStream is a Meta-Dataset source read from its records as its images
// are drawn: opening indexes every class file (each record's place, its
// length CRC checked; tfrecord.Index), and each image an episode draws is
// read, its data CRC and label checked, decoded and resized then. Memory
// holds only the index, so a source of any size trains; the cost is the
// decoding of each drawn image (~2 ms at 84×84 on one core, done while the
// previous step trains). Images equal LoadMetaDatasetSource's, byte for
// byte.
type MDStream struct {
	Spec *MDSpec
	side int
	recs [][]mdRecord // by class id
}

// mdRecord is where one image's record is.
type mdRecord struct {
	file  string
	index int // the record's index in its file, for messages
	span  tfrecord.Span
}

// OpenMetaDatasetStream indexes source name under dir for images of
// side×side. Errors are LoadMetaDatasetSource's: a missing source or class
// file, a damaged header or a truncated file (naming the file and the
// record), or a class with another number of records than its spec says.
func OpenMetaDatasetStream(dir, name string, side int) (*MDStream, error) {
	spec, err := loadMDSpecChecked(dir, name, side)
	if err != nil {
		return nil, err
	}
	s := &MDStream{Spec: spec, side: side, recs: make([][]mdRecord, spec.NumClasses())}
	for id := range s.recs {
		for _, f := range spec.ClassFiles(id) {
			spans, err := tfrecord.Index(f)
			if err != nil {
				return nil, fmt.Errorf("datasets: %w", err)
			}
			for i, sp := range spans {
				s.recs[id] = append(s.recs[id], mdRecord{file: f, index: i, span: sp})
			}
		}
		if n, want := len(s.recs[id]), spec.Images(id); n != want {
			return nil, fmt.Errorf("datasets: %s: class %d has %d records, the spec says %d", filepath.Join(dir, name), id, n, want)
		}
	}
	return s, nil
}

// loadMDSpecChecked reads source name's spec and checks that its class
// files exist and the image size is sane.
func loadMDSpecChecked(dir, name string, side int) (*MDSpec, error) {
	if side < 1 || side > 1024 {
		return nil, fmt.Errorf("datasets: image size %d, want 1 to 1024", side)
	}
	spec, err := LoadMetaDatasetSpec(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no source %s (%v)", ErrNoMetaDataset, dir, name, err)
	}
	if err != nil {
		return nil, err
	}
	if missing := spec.MissingFiles(); len(missing) > 0 {
		return nil, fmt.Errorf("datasets: %s: the spec names %s, which does not exist (%d class files missing)", filepath.Join(dir, name, MDSpecFile), missing[0], len(missing))
	}
	return spec, nil
}

// Split is the source's classes of split, read as MDSource.Split reads
// them: RGB in [−1, 1].
func (s *MDStream) Split(split string) (*MDStreamClasses, error) {
	ids := s.Spec.Classes(split)
	if len(ids) == 0 {
		return nil, fmt.Errorf("datasets: Meta-Dataset source %s has no %s classes", s.Spec.Name, split)
	}
	return &MDStreamClasses{s: s, name: s.Spec.Name + "/" + split, ids: ids}, nil
}

// MDStreamClasses is a split of an MDStream, a ClassSource. Image reads
// from disk; a record found damaged then (its data CRC, its example, its
// label, its image) panics with the file and the record named: the
// engine draws episodes on a goroutine that turns the panic into the
// run's error, saving the last checkpoint.
type MDStreamClasses struct {
	s    *MDStream
	name string
	ids  []int
}

func (c *MDStreamClasses) Family() string     { return "metadataset" }
func (c *MDStreamClasses) Name() string       { return c.name }
func (c *MDStreamClasses) NumClasses() int    { return len(c.ids) }
func (c *MDStreamClasses) ImagesIn(i int) int { return len(c.s.recs[c.ids[i]]) }
func (c *MDStreamClasses) InDim() int         { return c.s.side * c.s.side * ImageChannels }

// rgbScratches lends decoding buffers to concurrent Image calls.
var rgbScratches = sync.Pool{New: func() any { return new(rgbScratch) }}

// Image writes example k of class i into dst[:InDim()].
func (c *MDStreamClasses) Image(i, k int, dst []float64) {
	id := c.ids[i]
	pix, err := c.s.read(id, k)
	if err != nil {
		panic(err.Error())
	}
	for j, v := range pix {
		dst[j] = 2*inkLevels[v] - 1
	}
}

// read decodes image k of class id to side×side RGB bytes.
func (s *MDStream) read(id, k int) ([]uint8, error) {
	r := s.recs[id][k]
	f, err := os.Open(r.file)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	rec, err := tfrecord.ReadAt(f, r.file, r.index, r.span)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	where := fmt.Sprintf("%s record %d", r.file, r.index)
	ex, err := tfrecord.DecodeExample(rec)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", where, err)
	}
	img, err := ex.OneBytes("image")
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", where, err)
	}
	if label, err := ex.OneInt64("label"); err != nil {
		return nil, fmt.Errorf("datasets: %s: %w", where, err)
	} else if label != int64(id) {
		return nil, fmt.Errorf("datasets: %s has label %d, but the file holds class %d", where, label, id)
	}
	pix := make([]uint8, s.side*s.side*ImageChannels)
	sc := rgbScratches.Get().(*rgbScratch)
	defer rgbScratches.Put(sc)
	if err := decodeRGBWith(where, img, s.side, s.side, pix, sc, filterBilinearAligned); err != nil {
		return nil, err
	}
	return pix, nil
}
