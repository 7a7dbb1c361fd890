package runfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A write that fails part-way must leave the file it replaces as it was,
// and no temporary file behind.
func TestWriteAtomicKeepsOldFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteAtomic(path, []byte("old"), Private); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := WriteAtomicFunc(path, Private, func(w io.Writer) error {
		io.WriteString(w, "new, half written")
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
		t.Fatalf("want the write's error naming %s, got %v", path, err)
	}
	if got := read(t, path); got != "old" {
		t.Fatalf("old file changed to %q", got)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
	// A rename that fails (onto a non-empty directory) is reported too.
	bad := filepath.Join(dir, "d")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "x"), nil, 0o644)
	if err := WriteAtomic(bad, []byte("new"), Private); err == nil {
		t.Fatal("want an error renaming onto a non-empty directory")
	}
}

// Run files stay private; files written for sharing get the mode asked for.
func TestWriteAtomicSetsMode(t *testing.T) {
	dir := t.TempDir()
	for _, want := range []os.FileMode{Private, Shared} {
		path := filepath.Join(dir, fmt.Sprint(want))
		if err := WriteJSON(path, map[string]int{"a": 1}, want); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("mode %v, want %v", st.Mode().Perm(), want)
		}
		if got := read(t, path); got != "{\n  \"a\": 1\n}\n" {
			t.Errorf("content %q", got)
		}
	}
}

type row struct {
	Iter int     `json:"iter"`
	Loss float64 `json:"loss"`
}

// Resuming cuts the log back to the checkpoint's rows and drops a row cut
// by a kill; appends then continue it.
func TestLogResumeTruncates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	os.WriteFile(path, []byte(`{"iter":10,"loss":1}
{"iter":20,"loss":2}
{"iter":30,"loss":3}
{"iter":40,"lo`), 0o644)
	l, err := OpenLog(path, 20, Shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(row{30, 3.5}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want := "{\"iter\":10,\"loss\":1}\n{\"iter\":20,\"loss\":2}\n{\"iter\":30,\"loss\":3.5}\n"
	if got := read(t, path); got != want {
		t.Fatalf("log:\n%s\nwant:\n%s", got, want)
	}
	rows, err := Read[row](path)
	if err != nil || len(rows) != 3 || rows[2] != (row{30, 3.5}) {
		t.Fatalf("Read: %v %v", rows, err)
	}
	// keepThrough < 0 keeps everything; Append opens, writes and closes.
	if err := Append(path, row{40, 4}, Shared); err != nil {
		t.Fatal(err)
	}
	if rows, _ := Read[row](path); len(rows) != 4 {
		t.Fatalf("after Append: %v", rows)
	}
	// A missing log stays missing when truncated and has no rows.
	missing := filepath.Join(t.TempDir(), "none.jsonl")
	if err := Truncate(missing, 0, Shared); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Truncate created %s", missing)
	}
	if rows, err := Read[row](missing); rows != nil || err != nil {
		t.Fatalf("Read of a missing log: %v %v", rows, err)
	}
}

// A row appended after a kill cut the last one is not lost with it.
func TestAppendAfterCutRow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evals.jsonl")
	os.WriteFile(path, []byte("{\"iter\":1,\"loss\":1}\n{\"iter\":2,\"lo"), 0o644)
	if err := Append(path, row{3, 3}, Shared); err != nil {
		t.Fatal(err)
	}
	rows, err := Read[row](path)
	if err != nil || len(rows) != 2 || rows[1] != (row{3, 3}) {
		t.Fatalf("rows %v %v", rows, err)
	}
}
