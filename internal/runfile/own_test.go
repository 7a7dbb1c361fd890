package runfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TempOf recognises exactly writeAtomic's temporary names, and
// RemoveTemps removes exactly those of the names it is told are its own.
func TestRemoveTempsOnlyOwn(t *testing.T) {
	dir := t.TempDir()
	// Named as writeAtomic names its temporary file: what a kill leaves.
	f, err := os.CreateTemp(dir, "a.json"+tmpMark+"*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	leftover := filepath.Base(f.Name())
	names := []string{"a.json.tmp-", "a.json.tmp-1x", "b.json.tmp-5", ".tmp-5", "a.json.tmp-5.bak"}
	for _, n := range names {
		os.WriteFile(filepath.Join(dir, n), nil, 0o600)
	}
	os.Mkdir(filepath.Join(dir, "a.json.tmp-9"), 0o755)
	removed, err := RemoveTemps(dir, func(n string) bool { return n == "a.json" })
	if err != nil || !slices.Equal(removed, []string{leftover}) {
		t.Fatalf("removed %v, %v", removed, err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != len(names)+1 { // the other five, and the folder
		t.Fatalf("left %v", left)
	}
}

// WriteNewFunc writes a whole file where none is, and refuses (changing
// nothing, leaving no temporary file) where one is.
func TestWriteNewFunc(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := WriteNewFunc(path, Shared, write("first")); err != nil {
		t.Fatal(err)
	}
	if err := WriteNewFunc(path, Shared, write("second")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("want ErrExist, got %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Fatalf("the file is %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left %v", ents)
	}
}

// LockToRead locks a writable directory, refuses a held one, and reads a
// directory it cannot write without a lock (checked where the process
// cannot write it: not as root, whose writes permissions do not stop).
func TestLockToRead(t *testing.T) {
	dir := t.TempDir()
	l, ro, err := LockToRead(dir)
	if err != nil || ro || l == nil {
		t.Fatalf("writable: %v %v %v", l, ro, err)
	}
	if _, _, err := LockToRead(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("held: %v", err)
	}
	l.Release()
	if _, _, err := LockToRead(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	if os.Geteuid() == 0 {
		return // engine's TestLockRunToReadOnReadOnlyMedia uses a read-only mount
	}
	ro2 := filepath.Join(dir, "ro")
	os.Mkdir(ro2, 0o555)
	if l, ro, err := LockToRead(ro2); err != nil || !ro || l != nil {
		t.Fatalf("not writable: %v %v %v", l, ro, err)
	}
}

// Removing a lock file while holding it never lets two processes hold
// the directory: a Lock that opened the removed file takes the new one.
func TestLockRemoveThenLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileLock)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lock file is still there: %v", err)
	}
	a, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if _, err := Lock(dir); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second lock after a remove: %v", err)
	}
}
