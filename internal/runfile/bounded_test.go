//go:build unix

package runfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

// A file within its ceiling reads as os.ReadFile reads it; one past it is
// refused by its size, a sparse file claiming gigabytes included, without
// reading it.
func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.json")
	if err := os.WriteFile(small, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBounded(small, 7); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("ReadBounded at its ceiling = %q, %v", b, err)
	}
	_, err := ReadBounded(small, 6)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLarge) || tl.Size != 7 || !strings.Contains(err.Error(), small) {
		t.Fatalf("one byte over: want a TooLargeError naming %s, got %v", small, err)
	}
	sparse := filepath.Join(dir, "sparse.mkbm")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 30); err != nil {
		t.Skip("no sparse files here:", err)
	}
	f.Close()
	if _, err := ReadBounded(sparse, MaxSmallJSON); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "3.0 GB") {
		t.Fatalf("3 GB sparse file: want a refusal saying 3.0 GB, got %v", err)
	}
	if _, err := ReadBounded(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: want fs.ErrNotExist, got %v", err)
	}
	if _, err := ReadBounded(dir, 10); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("a directory: want a refusal saying so, got %v", err)
	}
	fifo := filepath.Join(dir, "summary.json")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		// No writer: opening it would block for ever.
		if _, err := ReadBounded(fifo, 10); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO: want a refusal, got %v", err)
		}
	}
	fsys := fstest.MapFS{"m/model.json": {Data: []byte("0123456789")}}
	if _, err := ReadFSBounded(fsys, "m/model.json", 9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFSBounded over: %v", err)
	}
	if b, err := ReadFSBounded(fsys, "m/model.json", 10); err != nil || len(b) != 10 {
		t.Fatalf("ReadFSBounded = %q, %v", b, err)
	}
}
