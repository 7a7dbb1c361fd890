package datasets

import (
	"crypto/sha256"
	"errors"
	"io"

	"github.com/mkbench/mkbench/internal/runfile"
)

// The image-set cache file, in the frame of cache.go:
//
//	magic "MKBIMAGE", version u32, key [32]byte,
//	height u32, width u32, channels u32, classes u32,
//	per class: name (u16 length + bytes), images u32,
//	pixels: images·height·width·channels bytes, HWC,
//	sha256 [32]byte.
//
// The key is derived from the sources, the decoding version and the output
// size.
const (
	imageCacheMagic = "MKBIMAGE"
	// imageCacheVersion changes whenever the format or the decoding
	// (colour conversion, filter, rounding) changes, so old files are
	// ignored. Loaders put it into their keys too.
	imageCacheVersion = 1
	imageCacheHead    = cacheHead + 16
)

var errBadImageCache = errors.New("datasets: image cache file is damaged")

// readImageCache returns the cached set for job if the file is intact and
// matches job's key and output size. The class list comes from the file,
// and must equal job's: a loader lists its classes before decoding, so a
// disagreement means a damaged or foreign file.
func readImageCache(path string, job imageJob) (*ImageSet, error) {
	// The file job's set makes has a known size: anything larger, or not
	// a regular file, is refused before it is read.
	data, err := runfile.ReadBounded(path, imageCacheSize(job))
	if err != nil {
		return nil, err
	}
	s, err := decodeImageCache(data, job.key)
	if err != nil {
		return nil, err
	}
	if s.h != job.side || s.w != job.side || len(s.classes) != len(job.classes) {
		return nil, errBadImageCache
	}
	for i, c := range job.classes {
		if s.classes[i].Name != c.Name || s.classes[i].Images != c.Images {
			return nil, errBadImageCache
		}
	}
	s.family, s.title = job.family, job.title
	return s, nil
}

// imageCacheSize is the length of the cache file of job's set.
func imageCacheSize(job imageJob) int64 {
	n := int64(imageCacheHead + sha256.Size)
	for _, c := range job.classes {
		n += 6 + int64(len(c.Name)) + int64(c.Images)*int64(job.side)*int64(job.side)*ImageChannels
	}
	return n
}

// decodeImageCache parses a cache file's bytes; every failure is
// errBadImageCache because the caller's only remedy is to rebuild.
func decodeImageCache(data []byte, key [32]byte) (*ImageSet, error) {
	rest, ok := openCache(data, imageCacheMagic, imageCacheVersion, key, imageCacheHead-cacheHead)
	if !ok {
		return nil, errBadImageCache
	}
	r := cacheReader{rest}
	h32, _ := r.u32()
	w32, _ := r.u32()
	ch, _ := r.u32()
	n32, _ := r.u32()
	h, w, n := uint64(h32), uint64(w32), uint64(n32)
	// Every class takes at least 7 bytes of names and counts plus one
	// image; checking this first bounds the allocations below by the
	// file's size.
	if ch != ImageChannels || h == 0 || w == 0 || h > 1<<14 || w > 1<<14 || n == 0 || n*(7+h*w*3) > uint64(len(r.rest)) {
		return nil, errBadImageCache
	}
	classes := make([]ImageClass, n)
	var total uint64
	for i := range classes {
		name, ok1 := r.str()
		k, ok2 := r.u32()
		if !ok1 || !ok2 {
			return nil, errBadImageCache
		}
		classes[i] = ImageClass{Name: name, Images: int(k)}
		// k·h·w·3 < 2^62, and the running total stays below the file's
		// size, so nothing here overflows.
		if total += uint64(k) * h * w * 3; total > uint64(len(r.rest)) {
			return nil, errBadImageCache
		}
	}
	if total != uint64(len(r.rest)) {
		return nil, errBadImageCache
	}
	// The pixels stay in the file's buffer: copying them would double the
	// memory a cached load needs.
	s, err := newImageSet("", "cache", int(h), int(w), classes, key, r.rest)
	if err != nil {
		return nil, errBadImageCache
	}
	return s, nil
}

// writeImageCache writes s's cache file atomically.
func writeImageCache(path string, s *ImageSet) error {
	return writeCacheFile(path, func(w io.Writer) error { return encodeImageCache(w, s) })
}

func encodeImageCache(w io.Writer, s *ImageSet) error {
	c := newCacheWriter(w, imageCacheMagic, imageCacheVersion, s.key)
	c.u32(uint32(s.h))
	c.u32(uint32(s.w))
	c.u32(ImageChannels)
	c.u32(uint32(len(s.classes)))
	for _, cl := range s.classes {
		if err := c.str(cl.Name, "class"); err != nil {
			return err
		}
		c.u32(uint32(cl.Images))
	}
	c.bytes(s.pix)
	return c.finish()
}
