package tfrecord

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fixtureFiles are the seed inputs: the Node-written files, one class of each
// Meta-Dataset source.
func fixtureFiles(f *testing.F) [][]byte {
	paths := []string{"testdata/three.tfrecords"}
	for _, s := range []string{"tiny_plain/9", "tiny_bilevel/0", "tiny_hier/2"} {
		paths = append(paths, filepath.Join(metaDatasetDir, s+".tfrecords"))
	}
	var files [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, b)
	}
	return files
}

// allocated reports the bytes fn allocates. The fuzzing machinery allocates
// a little alongside, hence the slack in the bounds below.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func FuzzReader(f *testing.F) {
	for _, b := range fixtureFiles(f) {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add(frame(nil, []byte("x")))
	f.Add(append(header(MaxRecordLen), 1, 2, 3))
	f.Add(append(header(1<<40), 1, 2, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs [][]byte
		var err error
		if n := allocated(func() { recs, err = readAll(NewReader(bytes.NewReader(data), "fuzz")) }); n > 8*uint64(len(data))+64<<10 {
			t.Fatalf("allocated %d bytes reading %d", n, len(data))
		}
		var end int64
		for _, r := range recs {
			end += int64(headerLen + len(r) + footerLen)
		}
		if !bytes.Equal(frame(recs...), data[:end]) {
			t.Fatal("the records read do not re-frame to the bytes they came from")
		}
		if err == nil && end != int64(len(data)) {
			t.Fatalf("clean end at %d of %d bytes", end, len(data))
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != "fuzz" || e.Record != len(recs) || e.Offset != end {
				t.Fatalf("error %v (%#v) after %d records ending at %d", err, err, len(recs), end)
			}
			if errors.Is(err, ErrCorrupt) == errors.Is(err, ErrTruncated) {
				t.Fatalf("error %v is not exactly one of corrupt or truncated", err)
			}
		}
		// Streams take another path through readData; the outcome must not
		// depend on it.
		recs2, err2 := readAll(NewReader(stream{bytes.NewReader(data)}, "fuzz"))
		if len(recs2) != len(recs) || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("stream read %d records, %v; in-memory %d, %v", len(recs2), err2, len(recs), err)
		}
	})
}

func FuzzDecodeExample(f *testing.F) {
	for _, file := range fixtureFiles(f) {
		r := NewReader(bytes.NewReader(file), "seed")
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Fatal(err)
			}
			f.Add(rec)
		}
	}
	f.Add(EncodeExample(Example{Int64: map[string][]int64{"a": {-1, 2}}, Float: map[string][]float32{"b": {}}}))
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Example
		var err error
		if n := allocated(func() { e, err = DecodeExample(data) }); n > 64*uint64(len(data))+64<<10 {
			t.Fatalf("allocated %d bytes decoding %d", n, len(data))
		}
		if err != nil {
			return
		}
		again, err := DecodeExample(EncodeExample(e))
		if err != nil {
			t.Fatalf("decoding our own encoding: %v", err)
		}
		if !sameExample(e, again) {
			t.Fatalf("re-encoding changed the example:\n%v\n%v", e, again)
		}
	})
}

// sameExample compares floats by bits, so that NaNs compare equal to
// themselves.
func sameExample(a, b Example) bool {
	if len(a.Bytes) != len(b.Bytes) || len(a.Int64) != len(b.Int64) || len(a.Float) != len(b.Float) {
		return false
	}
	for k, v := range a.Bytes {
		w, ok := b.Bytes[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if !bytes.Equal(v[i], w[i]) {
				return false
			}
		}
	}
	for k, v := range a.Int64 {
		w, ok := b.Int64[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if v[i] != w[i] {
				return false
			}
		}
	}
	for k, v := range a.Float {
		w, ok := b.Float[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if math.Float32bits(v[i]) != math.Float32bits(w[i]) {
				return false
			}
		}
	}
	return true
}
