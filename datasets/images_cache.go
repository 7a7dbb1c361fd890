package datasets

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// The image-set cache file, little-endian, in the pattern of Omniglot's:
//
//	magic "MKBIMAGE", version u32, key [32]byte,
//	height u32, width u32, channels u32, classes u32,
//	per class: name (u16 length + bytes), images u32,
//	pixels: images·height·width·channels bytes, HWC,
//	sha256 of everything before it [32]byte.
//
// The trailing checksum makes a truncated or bit-flipped file fail as a
// whole; the key (which the loader derives from the sources, the decoding
// version and the output size) makes a file of other sources fail.
const (
	imageCacheMagic = "MKBIMAGE"
	// imageCacheVersion changes whenever the format or the decoding
	// (colour conversion, filter, rounding) changes, so old files are
	// ignored. Loaders put it into their keys too.
	imageCacheVersion = 1
	imageCacheHead    = len(imageCacheMagic) + 4 + 32 + 16
)

var errBadImageCache = errors.New("datasets: image cache file is damaged")

// imageCacheName keeps one file per data set and source state.
func imageCacheName(family string, key [32]byte) string {
	return family + "-" + hex.EncodeToString(key[:8]) + ".bin"
}

// readImageCache returns the cached set for job if the file is intact and
// matches job's key and output size. The class list comes from the file,
// and must equal job's: a loader lists its classes before decoding, so a
// disagreement means a damaged or foreign file.
func readImageCache(path string, job imageJob) (*ImageSet, error) {
	data, err := os.ReadFile(path)
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

// decodeImageCache parses a cache file's bytes; every failure is
// errBadImageCache because the caller's only remedy is to rebuild.
func decodeImageCache(data []byte, key [32]byte) (*ImageSet, error) {
	if len(data) < imageCacheHead+sha256.Size {
		return nil, errBadImageCache
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errBadImageCache
	}
	le := binary.LittleEndian
	if string(body[:8]) != imageCacheMagic || le.Uint32(body[8:]) != imageCacheVersion || !bytes.Equal(body[12:44], key[:]) {
		return nil, errBadImageCache
	}
	h, w, ch, n := uint64(le.Uint32(body[44:])), uint64(le.Uint32(body[48:])), le.Uint32(body[52:]), uint64(le.Uint32(body[56:]))
	rest := body[imageCacheHead:]
	// Every class takes at least 7 bytes of names and counts plus one
	// image; checking this first bounds the allocations below by the
	// file's size.
	if ch != ImageChannels || h == 0 || w == 0 || h > 1<<14 || w > 1<<14 || n == 0 || n*(7+h*w*3) > uint64(len(rest)) {
		return nil, errBadImageCache
	}
	classes := make([]ImageClass, n)
	var total uint64
	for i := range classes {
		if len(rest) < 2 {
			return nil, errBadImageCache
		}
		l := int(le.Uint16(rest))
		if l == 0 || len(rest) < 2+l+4 {
			return nil, errBadImageCache
		}
		classes[i].Name = string(rest[2 : 2+l])
		k := uint64(le.Uint32(rest[2+l:]))
		classes[i].Images = int(k)
		rest = rest[2+l+4:]
		// k·h·w·3 < 2^62, and the running total stays below the file's
		// size, so nothing here overflows.
		if total += k * h * w * 3; total > uint64(len(rest)) {
			return nil, errBadImageCache
		}
	}
	if total != uint64(len(rest)) {
		return nil, errBadImageCache
	}
	// The pixels stay in the file's buffer: copying them would double the
	// memory a cached load needs.
	s, err := newImageSet("", "cache", int(h), int(w), classes, key, rest)
	if err != nil {
		return nil, errBadImageCache
	}
	return s, nil
}

// writeImageCache writes s's cache file atomically.
func writeImageCache(path string, s *ImageSet) error {
	return writeCacheFile(path, s.family+"-*.tmp", func(w io.Writer) error { return encodeImageCache(w, s) })
}

func encodeImageCache(w io.Writer, s *ImageSet) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	le := binary.LittleEndian
	var u [4]byte
	put32 := func(v uint32) {
		le.PutUint32(u[:], v)
		bw.Write(u[:])
	}
	bw.WriteString(imageCacheMagic)
	put32(imageCacheVersion)
	bw.Write(s.key[:])
	put32(uint32(s.h))
	put32(uint32(s.w))
	put32(ImageChannels)
	put32(uint32(len(s.classes)))
	for _, c := range s.classes {
		if len(c.Name) == 0 || len(c.Name) > 0xffff {
			return fmt.Errorf("class name %q cannot be stored", c.Name)
		}
		le.PutUint16(u[:], uint16(len(c.Name)))
		bw.Write(u[:2])
		bw.WriteString(c.Name)
		put32(uint32(c.Images))
	}
	bw.Write(s.pix)
	// bufio keeps the first write error and returns it from Flush.
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}
