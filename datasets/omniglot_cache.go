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
	"path/filepath"
)

// The cache file, little-endian:
//
//	magic "MKBOMNIG", version u32, key [32]byte,
//	side u32, drawings u32, characters u32,
//	per character: background u8, alphabet (u16 length + bytes), name (ditto),
//	pixels: characters·drawings·side² bytes,
//	sha256 of everything before it [32]byte.
//
// The trailing checksum makes a truncated or bit-flipped file fail as a
// whole, so no field is trusted before it has been verified.
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

// omniglotCacheName keeps one file per source state, so switching between
// two copies of the data (say, zips and an unpacked folder) does not
// rebuild each time.
func omniglotCacheName(key [32]byte) string {
	return "omniglot-" + hex.EncodeToString(key[:8]) + ".bin"
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
	const head = len(omniglotCacheMagic) + 4 + 32 + 12
	if len(data) < head+sha256.Size {
		return nil, errBadCache
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errBadCache
	}
	if string(body[:8]) != omniglotCacheMagic {
		return nil, errBadCache
	}
	le := binary.LittleEndian
	if le.Uint32(body[8:]) != omniglotCacheVersion || !bytes.Equal(body[12:44], key[:]) {
		return nil, errBadCache
	}
	side, drawings, n := le.Uint32(body[44:]), le.Uint32(body[48:]), uint64(le.Uint32(body[52:]))
	if side != OmniglotSide || drawings != OmniglotDrawings {
		return nil, errBadCache
	}
	rest := body[head:]
	// Each character takes at least 5 name bytes plus its pixels; checking
	// this first bounds the allocations below by the file's size.
	if n == 0 || n*(5+OmniglotDrawings*OmniglotPixels) > uint64(len(rest)) {
		return nil, errBadCache
	}
	str := func() (string, bool) {
		if len(rest) < 2 {
			return "", false
		}
		l := int(le.Uint16(rest))
		if len(rest) < 2+l || l == 0 {
			return "", false
		}
		s := string(rest[2 : 2+l])
		rest = rest[2+l:]
		return s, true
	}
	chars := make([]OmniglotCharacter, n)
	for i := range chars {
		if len(rest) < 1 || rest[0] > 1 {
			return nil, errBadCache
		}
		chars[i].Background = rest[0] == 1
		rest = rest[1:]
		var ok1, ok2 bool
		chars[i].Alphabet, ok1 = str()
		chars[i].Name, ok2 = str()
		if !ok1 || !ok2 {
			return nil, errBadCache
		}
	}
	// The images stay in the file's buffer: copying them would double the
	// memory a cached load needs.
	o, err := newOmniglot(chars, key, rest)
	if err != nil {
		return nil, errBadCache
	}
	return o, nil
}

// writeOmniglotCache writes the cache file atomically (see writeCacheFile).
func writeOmniglotCache(path string, o *Omniglot) error {
	return writeCacheFile(path, "omniglot-*.tmp", func(w io.Writer) error { return encodeOmniglotCache(w, o) })
}

// writeCacheFile writes what encode produces to a temporary file (named by
// pattern, see os.CreateTemp) in path's folder, syncs it and renames it
// into place, so a crash or a concurrent reader never sees half a file.
// Every data set's cache is written this way.
func writeCacheFile(path, pattern string, encode func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("datasets: cache: %w", err)
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fmt.Errorf("datasets: cache: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("datasets: writing cache %s: %w", path, err)
		}
	}()
	if err = encode(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func encodeOmniglotCache(w io.Writer, o *Omniglot) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	le := binary.LittleEndian
	var u [4]byte
	put32 := func(v uint32) {
		le.PutUint32(u[:], v)
		bw.Write(u[:])
	}
	putStr := func(s string) error {
		if len(s) == 0 || len(s) > 0xffff {
			return fmt.Errorf("character name %q cannot be stored", s)
		}
		le.PutUint16(u[:], uint16(len(s)))
		bw.Write(u[:2])
		bw.WriteString(s)
		return nil
	}
	bw.WriteString(omniglotCacheMagic)
	put32(omniglotCacheVersion)
	bw.Write(o.key[:])
	put32(OmniglotSide)
	put32(OmniglotDrawings)
	put32(uint32(len(o.chars)))
	for _, c := range o.chars {
		var bg byte
		if c.Background {
			bg = 1
		}
		bw.WriteByte(bg)
		if err := putStr(c.Alphabet); err != nil {
			return err
		}
		if err := putStr(c.Name); err != nil {
			return err
		}
	}
	bw.Write(o.pix)
	// bufio keeps the first write error and returns it from Flush.
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}
