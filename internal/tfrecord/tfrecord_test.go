package tfrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// stream hides the Len method of an in-memory reader, so that tests reach the
// code path used for files and pipes.
type stream struct{ r io.Reader }

func (s stream) Read(p []byte) (int, error) { return s.r.Read(p) }

func readAll(r *Reader) ([][]byte, error) {
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

func frame(recs ...[]byte) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendRecord(b, r)
	}
	return b
}

// header builds a record header claiming length n, with a correct CRC.
func header(n uint64) []byte {
	var h [headerLen]byte
	binary.LittleEndian.PutUint64(h[:8], n)
	binary.LittleEndian.PutUint32(h[8:], maskedCRC(h[:8]))
	return h[:]
}

func TestMaskedCRCKnownValues(t *testing.T) {
	mask := func(c uint32) uint32 { return (c>>15 | c<<17) + 0xa282ead8 }
	// CRC-32C check values: "123456789" (the standard one) and the eight
	// zero bytes that head an empty record.
	for _, c := range []struct {
		in  []byte
		crc uint32
	}{{[]byte("123456789"), 0xe3069283}, {make([]byte, 8), 0x8c28b28a}} {
		if got, want := maskedCRC(c.in), mask(c.crc); got != want {
			t.Errorf("maskedCRC(%q) = %#x, want %#x", c.in, got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (3*chunkLen)/16+7) // crosses chunk and Writer limits
	recs := [][]byte{{}, []byte("a"), []byte("hello, records"), big, {0, 0, 0}}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(buf.Bytes(), frame(recs...)) {
		t.Fatal("Writer and AppendRecord disagree")
	}
	path := filepath.Join(t.TempDir(), "x.tfrecords")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(name string, got [][]byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(recs) {
			t.Fatalf("%s: %d records, want %d", name, len(got), len(recs))
		}
		for i := range recs {
			if !bytes.Equal(got[i], recs[i]) {
				t.Errorf("%s: record %d differs (%d bytes, want %d)", name, i, len(got[i]), len(recs[i]))
			}
		}
	}
	got, err := readAll(NewReader(bytes.NewReader(buf.Bytes()), "mem"))
	check("bytes.Reader", got, err)
	got, err = readAll(NewReader(stream{bytes.NewReader(buf.Bytes())}, "stream"))
	check("stream", got, err)
	got, err = ReadFile(path)
	check("ReadFile", got, err)
	got = nil
	err = Scan(path, func(i int, rec []byte) error {
		if i != len(got) {
			return fmt.Errorf("index %d, want %d", i, len(got))
		}
		got = append(got, rec)
		return nil
	})
	check("Scan", got, err)

	r := NewReader(bytes.NewReader(buf.Bytes()), "mem")
	for range recs {
		r.Next()
	}
	if r.Offset() != int64(buf.Len()) {
		t.Errorf("Offset after all records = %d, want %d", r.Offset(), buf.Len())
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next at the end = %v, want io.EOF", err)
	}
}

func TestEmptyFileIsCleanEOF(t *testing.T) {
	for _, src := range []io.Reader{bytes.NewReader(nil), stream{strings.NewReader("")}} {
		if _, err := NewReader(src, "e").Next(); err != io.EOF {
			t.Errorf("%T: %v, want io.EOF", src, err)
		}
	}
}

func TestDamage(t *testing.T) {
	recs := [][]byte{[]byte("first"), []byte("the second record..."), []byte("third..")}
	good := frame(recs...)
	const off1 = headerLen + 5 + footerLen // where record 1 starts: 21
	set := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] ^= v; return b }
	cases := []struct {
		name  string
		data  []byte
		class error
		msg   string
	}{
		{"length byte flipped", set(off1, 0x01), ErrCorrupt, "length CRC mismatch"},
		{"length CRC flipped", set(off1+9, 0x80), ErrCorrupt, "length CRC mismatch"},
		{"data byte flipped", set(off1+headerLen+3, 0x20), ErrCorrupt, "data CRC mismatch"},
		{"data CRC flipped", set(off1+headerLen+20, 0x01), ErrCorrupt, "data CRC mismatch"},
		{"ends in header", good[:off1+5], ErrTruncated, "ends in the length header (5 of 12 bytes)"},
		{"ends in data", good[:off1+headerLen+8], ErrTruncated, "ends in the data (8 of 20 bytes)"},
		{"ends before data", good[:off1+headerLen], ErrTruncated, "ends in the data (0 of 20 bytes)"},
		{"ends in data CRC", good[:off1+headerLen+20+2], ErrTruncated, "ends in the data CRC (2 of 4 bytes)"},
		{"ends before data CRC", good[:off1+headerLen+20], ErrTruncated, "ends in the data CRC (0 of 4 bytes)"},
		{"length over limit", append(good[:off1:off1], header(MaxRecordLen+1)...), ErrCorrupt, "exceeds the 268435456-byte limit"},
		{"length 2^63", append(good[:off1:off1], header(1<<63)...), ErrCorrupt, "length 9223372036854775808 exceeds"},
		{"length under limit, file short", append(append(good[:off1:off1], header(200<<20)...), "0123456789"...), ErrTruncated, "(10 of 209715200 bytes)"},
		{"absurd length, bad CRC", append(good[:off1:off1], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4), ErrCorrupt, "length CRC mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var msgs []string
			for _, src := range []io.Reader{bytes.NewReader(c.data), stream{bytes.NewReader(c.data)}} {
				r := NewReader(src, "cls.tfrecords")
				got, err := readAll(r)
				if len(got) != 1 || !bytes.Equal(got[0], recs[0]) {
					t.Errorf("%T: records before the damage = %q, want just the first", src, got)
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%T: error %v (%T), want *Error", src, err, err)
				}
				if e.File != "cls.tfrecords" || e.Record != 1 || e.Offset != off1 {
					t.Errorf("%T: located at %q record %d offset %d, want cls.tfrecords, 1, %d", src, e.File, e.Record, e.Offset, off1)
				}
				if !errors.Is(err, c.class) {
					t.Errorf("%T: %v does not match %v", src, err, c.class)
				}
				other := ErrCorrupt
				if c.class == ErrCorrupt {
					other = ErrTruncated
				}
				if errors.Is(err, other) {
					t.Errorf("%T: %v also matches %v", src, err, other)
				}
				if !strings.HasPrefix(err.Error(), "cls.tfrecords: record 1 (offset 21): ") || !strings.Contains(err.Error(), c.msg) {
					t.Errorf("%T: message %q, want the location and %q", src, err, c.msg)
				}
				if _, again := r.Next(); again != err {
					t.Errorf("%T: Next after damage = %v, want the same error", src, again)
				}
				msgs = append(msgs, err.Error())
			}
			if msgs[0] != msgs[1] {
				t.Errorf("in-memory and stream readers disagree:\n%s\n%s", msgs[0], msgs[1])
			}
			path := filepath.Join(t.TempDir(), "cls.tfrecords")
			os.WriteFile(path, c.data, 0o644)
			_, err := ReadFile(path)
			if !errors.Is(err, c.class) || err.Error() != path+": "+strings.TrimPrefix(msgs[0], "cls.tfrecords: ") {
				t.Errorf("ReadFile: %v", err)
			}
			// Scan reads the file as a stream with a size hint: a third path.
			if err2 := Scan(path, func(int, []byte) error { return nil }); err2 == nil || err == nil || err2.Error() != err.Error() {
				t.Errorf("Scan: %v, ReadFile: %v", err2, err)
			}
		})
	}
}

// A length just under the limit in a short input must cost what the input
// holds, not what the header claims.
func TestClaimedLengthDoesNotAllocate(t *testing.T) {
	data := append(header(MaxRecordLen), make([]byte, 1000)...)
	path := filepath.Join(t.TempDir(), "short.tfrecords")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mk := range []func() io.Reader{
		func() io.Reader { return bytes.NewReader(data) },
		func() io.Reader { return stream{bytes.NewReader(data)} },
		func() io.Reader {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := NewReader(mk(), "short").Next()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("%v, want truncation", err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%T: allocated %d bytes for a 1 KB input", mk(), n)
		}
	}
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestIOErrorIsKept(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := NewReader(failingReader{boom}, "f").Next()
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) {
		t.Errorf("got %v", err)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "f: record 0 (offset 0): disk on fire") {
		t.Errorf("message %q", err)
	}
}

func TestScanStopsOnCallbackError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.tfrecords")
	os.WriteFile(path, frame([]byte("a"), []byte("b"), []byte("c")), 0o644)
	stop := errors.New("stop")
	calls := 0
	err := Scan(path, func(i int, _ []byte) error {
		calls++
		if i == 1 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("Scan = %v after %d calls, want stop after 2", err, calls)
	}
	if err := Scan(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Scan of a missing file: %v", err)
	}
}

type limitedWriter struct {
	n   int
	buf bytes.Buffer
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		return 0, errors.New("full")
	}
	return w.buf.Write(p)
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter(&limitedWriter{n: 30})
	if err := w.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	err := w.Write(make([]byte, 100))
	if err == nil {
		t.Fatal("write past the limit succeeded")
	}
	if again := w.Write([]byte("x")); again != err {
		t.Errorf("after a failed write: %v, want the same error", again)
	}
	if err := NewWriter(io.Discard).Write(make([]byte, MaxRecordLen+1)); err == nil {
		t.Error("a record over MaxRecordLen was written")
	}
}

// BenchmarkReader reads a file (from the page cache) of 8 MiB of
// Meta-Dataset-like records, an Example with an image and a label, with and
// without decoding the Example.
func BenchmarkReader(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 128 << 10} {
		img := make([]byte, size)
		for i := range img {
			img[i] = byte(i * 7)
		}
		rec := EncodeExample(Example{Bytes: map[string][][]byte{"image": {img}}, Int64: map[string][]int64{"label": {42}}})
		n := (8 << 20) / size
		var data []byte
		for range n {
			data = AppendRecord(data, rec)
		}
		path := filepath.Join(b.TempDir(), "bench.tfrecords")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		for _, decode := range []bool{false, true} {
			name := fmt.Sprintf("image=%dKiB/frames", size>>10)
			if decode {
				name = fmt.Sprintf("image=%dKiB/examples", size>>10)
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					f, err := os.Open(path)
					if err != nil {
						b.Fatal(err)
					}
					if err := readRecords(NewReader(f, path), n, decode); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

func readRecords(r *Reader, n int, decode bool) error {
	for range n {
		rec, err := r.Next()
		if err != nil {
			return err
		}
		if !decode {
			continue
		}
		e, err := DecodeExample(rec)
		if err != nil {
			return err
		}
		if _, err := e.OneBytes("image"); err != nil {
			return err
		}
		if _, err := e.OneInt64("label"); err != nil {
			return err
		}
	}
	return nil
}
