package datasets

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
)

// The Omniglot cache file, in the frame of cache.go:
//
//	magic "MKBOMNIG", version u32, key [32]byte,
//	side u32, drawings u32, characters u32,
//	per character: background u8, alphabet (u16 length + bytes), name (ditto),
//	pixels: characters·drawings·side² bytes,
//	sha256 [32]byte.
const (
	omniglotCacheMagic = "MKBOMNIG"
	// omniglotCacheVersion changes whenever the format or the decoding
	// (inversion, filter, quantization) changes, so old files are ignored.
	omniglotCacheVersion = 1
)

var errBadCache = errors.New("datasets: Omniglot cache file is damaged")

// omniglotCacheKey identifies the decoded result of the two sources.
func omniglotCacheKey(srcs [2]*omniglotSource) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "mkbench omniglot v%d %d %d %d\n", omniglotCacheVersion, OmniglotSourceSide, OmniglotSide, OmniglotDrawings)
	for _, s := range srcs {
		kind := "folder"
		if s.zr != nil {
			kind = "zip"
		}
		fmt.Fprintf(h, "%s %s %x\n", s.set, kind, s.fp)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func readOmniglotCache(path string, key [32]byte) (*Omniglot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeOmniglotCache(data, key)
}

// decodeOmniglotCache parses a cache file's bytes; every failure is
// errBadCache because the caller's only remedy is to rebuild.
func decodeOmniglotCache(data []byte, key [32]byte) (*Omniglot, error) {
	rest, ok := openCache(data, omniglotCacheMagic, omniglotCacheVersion, key, 12)
	if !ok {
		return nil, errBadCache
	}
	r := cacheReader{rest}
	side, _ := r.u32()
	drawings, _ := r.u32()
	n32, _ := r.u32()
	n := uint64(n32)
	if side != OmniglotSide || drawings != OmniglotDrawings {
		return nil, errBadCache
	}
	// Each character takes at least 5 name bytes plus its pixels; checking
	// this first bounds the allocations below by the file's size.
	if n == 0 || n*(5+OmniglotDrawings*OmniglotPixels) > uint64(len(r.rest)) {
		return nil, errBadCache
	}
	chars := make([]OmniglotCharacter, n)
	for i := range chars {
		bg, ok := r.u8()
		if !ok || bg > 1 {
			return nil, errBadCache
		}
		chars[i].Background = bg == 1
		var ok1, ok2 bool
		chars[i].Alphabet, ok1 = r.str()
		chars[i].Name, ok2 = r.str()
		if !ok1 || !ok2 {
			return nil, errBadCache
		}
	}
	// The images stay in the file's buffer: copying them would double the
	// memory a cached load needs.
	o, err := newOmniglot(chars, key, r.rest)
	if err != nil {
		return nil, errBadCache
	}
	return o, nil
}

// writeOmniglotCache writes the cache file atomically.
func writeOmniglotCache(path string, o *Omniglot) error {
	return writeCacheFile(path, func(w io.Writer) error { return encodeOmniglotCache(w, o) })
}

func encodeOmniglotCache(w io.Writer, o *Omniglot) error {
	c := newCacheWriter(w, omniglotCacheMagic, omniglotCacheVersion, o.key)
	c.u32(OmniglotSide)
	c.u32(OmniglotDrawings)
	c.u32(uint32(len(o.chars)))
	for _, ch := range o.chars {
		var bg byte
		if ch.Background {
			bg = 1
		}
		c.u8(bg)
		if err := c.str(ch.Alphabet, "character"); err != nil {
			return err
		}
		if err := c.str(ch.Name, "character"); err != nil {
			return err
		}
	}
	c.bytes(o.pix)
	return c.finish()
}
