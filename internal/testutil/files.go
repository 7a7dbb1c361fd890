package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// ReadFile is the content of the file at path; a failure to read it ends
// the test.
func ReadFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// CopyDir copies the plain files directly in src (not its subfolders)
// into dst, creating dst; any failure ends the test.
func CopyDir(tb testing.TB, src, dst string) {
	tb.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		tb.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), ReadFile(tb, filepath.Join(src, e.Name())), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
