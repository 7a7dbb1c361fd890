package tfrecord

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/internal/runfile"
)

// MaxRecordLen is the largest record this package reads or writes. The
// biggest Meta-Dataset image is a few MB and TensorBoard events are smaller
// still; a larger length is far more likely a damaged header than data, and
// refusing it keeps a bad length from becoming a multi-gigabyte allocation.
const MaxRecordLen = 256 << 20

const (
	headerLen = 12 // length + its masked CRC
	footerLen = 4  // masked CRC of the data
	// chunkLen bounds what a record of untrusted length may allocate before
	// its bytes have actually arrived.
	chunkLen = 64 << 10
)

var (
	// ErrCorrupt is matched (errors.Is) by every *Error about bytes that are
	// present but wrong: a checksum mismatch or an impossible length.
	ErrCorrupt = errors.New("tfrecord: corrupt record")
	// ErrTruncated is matched by every *Error about a file that ends inside
	// a record.
	ErrTruncated = errors.New("tfrecord: truncated record")
)

// Error locates a failure in a record file. Err is a damage report that
// matches ErrCorrupt or ErrTruncated, or the underlying I/O error.
type Error struct {
	File   string // name given to NewReader; may be empty
	Record int    // 0-based index of the record being read
	Offset int64  // byte offset where that record starts
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "record %d (offset %d): %v", e.Record, e.Offset, e.Err)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// damage keeps the precise description out of the sentinel's text while
// still letting errors.Is classify it.
type damage struct {
	class error
	msg   string
}

func (d *damage) Error() string { return d.msg }
func (d *damage) Unwrap() error { return d.class }

func corrupt(format string, args ...any) error {
	return &damage{ErrCorrupt, fmt.Sprintf(format, args...)}
}

// castagnoli is read-only after initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TensorFlow's masked CRC-32C. The mask exists because a CRC
// stored next to the data it covers is easy to confuse with that data; we
// only need to reproduce it.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Reader reads records one at a time from a stream.
type Reader struct {
	r    io.Reader
	name string
	// size is how many bytes the input held when the Reader was made, or -1.
	// For in-memory inputs it is exact, and a record longer than what is
	// left is refused before any allocation. A regular file may still be
	// growing (TensorBoard tails event files), so there it only says how much
	// may be allocated at once; past it, a record is read in chunks.
	size  int64
	exact bool
	rec   int   // index of the next record
	off   int64 // offset of the next record
	err   error // sticky: a damaged stream has no trustworthy next record
	hdr   [headerLen]byte
}

// NewReader returns a Reader of r; name (usually the path) prefixes every
// error. In-memory readers (anything with a Len method, such as
// *bytes.Reader) are read directly; others are buffered. Either way r
// belongs to the Reader from now on: nobody else should read from it.
func NewReader(r io.Reader, name string) *Reader {
	rd := &Reader{r: r, name: name, size: -1}
	switch v := r.(type) {
	case interface{ Len() int }:
		rd.size, rd.exact = int64(v.Len()), true
		return rd
	case *os.File:
		if st, err := v.Stat(); err == nil && st.Mode().IsRegular() {
			if pos, err := v.Seek(0, io.SeekCurrent); err == nil {
				rd.size = st.Size() - pos
			}
		}
	case *bufio.Reader:
		return rd
	}
	rd.r = bufio.NewReaderSize(r, chunkLen)
	return rd
}

// Offset is the byte offset at which the next record starts, counted from
// where r stood when the Reader was made. After io.EOF it is the size of the
// input: a tailing reader can reopen there once the file has grown.
func (r *Reader) Offset() int64 { return r.off }

// Next returns the next record's data, in a new slice the caller may keep.
// It returns io.EOF exactly when the input ends cleanly between records;
// every other failure is an *Error, and is returned again by later calls.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.next()
	if err != nil {
		if err != io.EOF {
			err = &Error{File: r.name, Record: r.rec, Offset: r.off, Err: err}
		}
		r.err = err
		return nil, err
	}
	r.rec++
	r.off += headerLen + int64(len(rec)) + footerLen
	return rec, nil
}

func (r *Reader) next() ([]byte, error) {
	n, err := io.ReadFull(r.r, r.hdr[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, short(err, "the length header", n, headerLen)
	}
	length := binary.LittleEndian.Uint64(r.hdr[:8])
	stored := binary.LittleEndian.Uint32(r.hdr[8:])
	if c := maskedCRC(r.hdr[:8]); c != stored {
		return nil, corrupt("length CRC mismatch (stored 0x%08x, computed 0x%08x)", stored, c)
	}
	if length > MaxRecordLen {
		return nil, corrupt("length %d exceeds the %d-byte limit", length, MaxRecordLen)
	}
	data, err := r.readData(int(length))
	if err != nil {
		return nil, err
	}
	n, err = io.ReadFull(r.r, r.hdr[:footerLen])
	if err != nil {
		return nil, short(err, "the data CRC", n, footerLen)
	}
	stored = binary.LittleEndian.Uint32(r.hdr[:footerLen])
	if c := maskedCRC(data); c != stored {
		return nil, corrupt("data CRC mismatch (stored 0x%08x, computed 0x%08x)", stored, c)
	}
	return data, nil
}

// readData reads n bytes without letting n alone decide the allocation: a
// record must fit in what the input is known to hold, or else its buffer
// grows only as bytes actually arrive.
func (r *Reader) readData(n int) ([]byte, error) {
	if left := r.size - r.off - headerLen; r.size >= 0 && int64(n) <= left {
		buf := make([]byte, n)
		got, err := io.ReadFull(r.r, buf)
		if err != nil {
			return nil, short(err, "the data", got, n)
		}
		return buf, nil
	} else if r.exact {
		return nil, truncated("the data", int(max(left, 0)), n)
	}
	buf := make([]byte, min(n, chunkLen))
	got, err := io.ReadFull(r.r, buf)
	for err == nil && got < n {
		step := min(n-got, max(got, chunkLen)) // doubling: linear total copying
		buf = slices.Grow(buf, step)[:got+step]
		var m int
		m, err = io.ReadFull(r.r, buf[got:])
		got += m
	}
	if err != nil {
		return nil, short(err, "the data", got, n)
	}
	return buf, nil
}

func truncated(where string, got, want int) error {
	return &damage{ErrTruncated, fmt.Sprintf("truncated: the file ends in %s (%d of %d bytes)", where, got, want)}
}

// short turns a failed io.ReadFull into a truncation report when the input
// simply ended, and keeps any other I/O error as it is.
func short(err error, where string, got, want int) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return truncated(where, got, want)
	}
	return err
}

// ReadFile returns every record of the file at path.
func ReadFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := NewReader(bytes.NewReader(data), path)
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
}

// Scan calls fn with the index and data of each record of the file at path,
// streaming it so that a large file is never held whole. rec belongs to fn.
// Scan stops at the first error, from the file or from fn, and returns it
// unchanged; records before a damaged one have already been passed to fn.
func Scan(path string, fn func(i int, rec []byte) error) error {
	f, err := runfile.OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := NewReader(f, path)
	for i := 0; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(i, rec); err != nil {
			return err
		}
	}
}

// AppendRecord appends rec, framed as one TFRecord, to dst.
func AppendRecord(dst, rec []byte) []byte {
	var hdr [headerLen]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(rec)))
	binary.LittleEndian.PutUint32(hdr[8:], maskedCRC(hdr[:8]))
	dst = append(dst, hdr[:]...)
	dst = append(dst, rec...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(rec))
}

// Writer writes records to an underlying writer. It does no buffering of its
// own beyond one record: a small record goes out in a single Write call, so
// a reader tailing the file (TensorBoard does) rarely sees half a record.
type Writer struct {
	w   io.Writer
	buf []byte
	err error // sticky: after a failed write the file ends mid-record
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write frames rec and writes it. Records above MaxRecordLen are refused, so
// that this package never writes what it would not read back. After a write
// error every later call returns that error.
func (w *Writer) Write(rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(rec) > MaxRecordLen {
		return fmt.Errorf("tfrecord: record of %d bytes exceeds the %d-byte limit", len(rec), MaxRecordLen)
	}
	if len(rec) <= chunkLen {
		w.buf = AppendRecord(w.buf[:0], rec)
		_, w.err = w.w.Write(w.buf)
		return w.err
	}
	// A large record is written from the caller's slice rather than copied.
	var hdr [headerLen]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(rec)))
	binary.LittleEndian.PutUint32(hdr[8:], maskedCRC(hdr[:8]))
	foot := binary.LittleEndian.AppendUint32(nil, maskedCRC(rec))
	for _, p := range [][]byte{hdr[:], rec, foot} {
		if _, w.err = w.w.Write(p); w.err != nil {
			return w.err
		}
	}
	return nil
}
