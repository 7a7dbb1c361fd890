package tfrecord

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Index and ReadAt give the records Reader gives, on the fixture written by
// another implementation, and report damage as Reader does.
func TestIndexAndReadAt(t *testing.T) {
	path := filepath.Join("testdata", "three.tfrecords")
	want, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := Index(path)
	if err != nil || len(spans) != len(want) {
		t.Fatalf("index: %v, %d spans for %d records", err, len(spans), len(want))
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := len(spans) - 1; i >= 0; i-- { // any order
		got, err := ReadAt(f, path, i, spans[i])
		if err != nil || !bytes.Equal(got, want[i]) {
			t.Fatalf("record %d: %v, %q, want %q", i, err, got, want[i])
		}
	}

	data, _ := os.ReadFile(path)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A cut file and a damaged length are found by Index.
	if _, err := Index(write("cut", data[:len(data)-3])); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated file: %v", err)
	}
	bad := bytes.Clone(data)
	bad[spans[1].Offset+2] ^= 1
	var e *Error
	if _, err := Index(write("len", bad)); !errors.Is(err, ErrCorrupt) || !errors.As(err, &e) || e.Record != 1 {
		t.Errorf("damaged length: %v", err)
	}
	// A damaged byte of data is found when the record is read.
	bad = bytes.Clone(data)
	bad[spans[2].Offset+headerLen] ^= 1
	p := write("data", bad)
	sp, err := Index(p)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := os.Open(p)
	defer g.Close()
	if _, err := ReadAt(g, p, 2, sp[2]); !errors.Is(err, ErrCorrupt) || !errors.As(err, &e) || e.Record != 2 {
		t.Errorf("damaged data: %v", err)
	}
	if _, err := ReadAt(g, p, 0, sp[0]); err != nil {
		t.Errorf("an intact record of the damaged file: %v", err)
	}
}
