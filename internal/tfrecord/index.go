package tfrecord

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Span locates one record's data in a file: the record starts at Offset
// with its header, and its data is Len bytes.
type Span struct {
	Offset int64
	Len    int64
}

// Index lists the records of the file at path without reading their data:
// each header's length CRC is checked and the data skipped, and the file
// must end exactly after a record. A file of a million records is indexed
// in the time it takes to read a million headers, so a data set too large
// to hold decoded (Meta-Dataset's ILSVRC) is opened quickly and read
// record by record (ReadAt) when a record is needed, its data CRC checked
// then. Errors are *Error, as Reader's.
func Index(path string) ([]Span, error) {
	f, err := runfile.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var spans []Span
	var hdr [headerLen]byte
	for off := int64(0); off < size; {
		fail := func(err error) ([]Span, error) {
			return nil, &Error{File: path, Record: len(spans), Offset: off, Err: err}
		}
		n, err := f.ReadAt(hdr[:], off)
		if err != nil {
			return fail(short(err, "the length header", n, headerLen))
		}
		length := binary.LittleEndian.Uint64(hdr[:8])
		if c, stored := maskedCRC(hdr[:8]), binary.LittleEndian.Uint32(hdr[8:]); c != stored {
			return fail(corrupt("length CRC mismatch (stored 0x%08x, computed 0x%08x)", stored, c))
		}
		if length > MaxRecordLen {
			return fail(corrupt("length %d exceeds the %d-byte limit", length, MaxRecordLen))
		}
		end := off + headerLen + int64(length) + footerLen
		if end > size {
			return fail(truncated("the record", int(size-off), int(end-off)))
		}
		spans = append(spans, Span{Offset: off, Len: int64(length)})
		off = end
	}
	return spans, nil
}

// ReadAt reads the record at span (from Index) of file f, named name in
// errors, and checks its data CRC; record is its index, for messages.
func ReadAt(f io.ReaderAt, name string, record int, span Span) ([]byte, error) {
	buf := make([]byte, span.Len+footerLen)
	if n, err := f.ReadAt(buf, span.Offset+headerLen); err != nil && !(err == io.EOF && n == len(buf)) {
		return nil, &Error{File: name, Record: record, Offset: span.Offset, Err: short(err, "the data", n, len(buf))}
	}
	data := buf[:span.Len]
	stored := binary.LittleEndian.Uint32(buf[span.Len:])
	if c := maskedCRC(data); c != stored {
		return nil, &Error{File: name, Record: record, Offset: span.Offset, Err: corrupt("data CRC mismatch (stored 0x%08x, computed 0x%08x)", stored, c)}
	}
	return data, nil
}

// String formats a span for messages.
func (s Span) String() string { return fmt.Sprintf("offset %d, %d bytes", s.Offset, s.Len) }
