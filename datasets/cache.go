package datasets

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/mkbench/mkbench/internal/runfile"
)

// What the decode caches share (Omniglot's, omniglot_cache.go, and the
// image sets', images_cache.go): where the files go, how they are written,
// and their frame. Every cache file is, little-endian,
//
//	magic [8]byte, version u32, key [32]byte,
//	the family's fields and pixels,
//	sha256 of everything before it [32]byte.
//
// The trailing checksum makes a truncated or bit-flipped file fail as a
// whole, so no field is trusted before it has been verified; the key,
// derived from the sources, makes a file of other sources fail.

// cacheHead is the length of the magic, version and key.
const cacheHead = 8 + 4 + 32

// DefaultCacheDir is where decoded data sets are cached: $MKBENCH_CACHE when
// set, else the mkbench folder in the user's cache directory
// (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches
// on macOS, %LocalAppData% on Windows).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("MKBENCH_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("datasets: no cache folder (set MKBENCH_CACHE): %w", err)
	}
	return filepath.Join(d, "mkbench"), nil
}

// cacheName names the cache file of a family's decoded data by its key:
// one file per source state, so switching between two copies of the data
// (say, zips and an unpacked folder) does not rebuild each time.
func cacheName(family string, key [32]byte) string {
	return family + "-" + hex.EncodeToString(key[:8]) + ".bin"
}

// cacheFile is the path of the cache file called name in dir, or in
// DefaultCacheDir when dir is "": "" when noCache is set or no cache folder
// can be found, the error saying why in the latter case.
func cacheFile(noCache bool, dir, name string) (string, error) {
	if noCache {
		return "", nil
	}
	if dir == "" {
		var err error
		if dir, err = DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, name), nil
}

// writeCacheFile writes what encode produces to path atomically (a synced
// temporary file in the same folder, renamed into place), creating the
// folder, so that a crash or a concurrent reader never sees half a file.
func writeCacheFile(path string, encode func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("datasets: cache: %w", err)
	}
	if err := runfile.WriteAtomicFunc(path, runfile.Private, encode); err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	return nil
}

// openCache checks the frame of a cache file (length, checksum, magic,
// version, key) and returns what lies between the key and the checksum,
// which must hold at least fields bytes.
func openCache(data []byte, magic string, version uint32, key [32]byte, fields int) ([]byte, bool) {
	if len(data) < cacheHead+fields+sha256.Size {
		return nil, false
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, false
	}
	le := binary.LittleEndian
	if string(body[:8]) != magic || le.Uint32(body[8:]) != version || !bytes.Equal(body[12:cacheHead], key[:]) {
		return nil, false
	}
	return body[cacheHead:], true
}

// cacheReader reads the fields of a verified cache file.
type cacheReader struct{ rest []byte }

func (r *cacheReader) u8() (byte, bool) {
	if len(r.rest) < 1 {
		return 0, false
	}
	v := r.rest[0]
	r.rest = r.rest[1:]
	return v, true
}

func (r *cacheReader) u32() (uint32, bool) {
	if len(r.rest) < 4 {
		return 0, false
	}
	v := binary.LittleEndian.Uint32(r.rest)
	r.rest = r.rest[4:]
	return v, true
}

// str reads a name: a u16 length, not 0, and its bytes.
func (r *cacheReader) str() (string, bool) {
	if len(r.rest) < 2 {
		return "", false
	}
	l := int(binary.LittleEndian.Uint16(r.rest))
	if l == 0 || len(r.rest) < 2+l {
		return "", false
	}
	s := string(r.rest[2 : 2+l])
	r.rest = r.rest[2+l:]
	return s, true
}

// cacheWriter writes a cache file: newCacheWriter writes the magic, version
// and key, the methods the fields, and finish the checksum. Write errors
// are kept by the buffer and returned by finish.
type cacheWriter struct {
	w  io.Writer
	h  hash.Hash
	bw *bufio.Writer
	u  [4]byte
}

func newCacheWriter(w io.Writer, magic string, version uint32, key [32]byte) *cacheWriter {
	c := &cacheWriter{w: w, h: sha256.New()}
	c.bw = bufio.NewWriterSize(io.MultiWriter(w, c.h), 1<<16)
	c.bw.WriteString(magic)
	c.u32(version)
	c.bw.Write(key[:])
	return c
}

func (c *cacheWriter) u8(v byte) { c.bw.WriteByte(v) }

func (c *cacheWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(c.u[:], v)
	c.bw.Write(c.u[:])
}

// str writes a name of what (for the error) as cacheReader.str reads it.
func (c *cacheWriter) str(s, what string) error {
	if len(s) == 0 || len(s) > 0xffff {
		return fmt.Errorf("%s name %q cannot be stored", what, s)
	}
	binary.LittleEndian.PutUint16(c.u[:], uint16(len(s)))
	c.bw.Write(c.u[:2])
	c.bw.WriteString(s)
	return nil
}

func (c *cacheWriter) bytes(b []byte) { c.bw.Write(b) }

// finish flushes the file and appends its checksum.
func (c *cacheWriter) finish() error {
	if err := c.bw.Flush(); err != nil {
		return err
	}
	_, err := c.w.Write(c.h.Sum(nil))
	return err
}
