//go:build unix

package runfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A directory handed over can hold links named like mkbench's files,
// pointing at the user's: taking its lock, appending to its logs or asking
// whether it is held changes nothing they point at, and a FIFO in their
// place never blocks.
func TestOwnFilesNeverFollowLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "authorized_keys")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	run := filepath.Join(dir, "run")
	os.Mkdir(run, 0o755)
	os.Symlink(victim, filepath.Join(run, FileLock))
	if _, err := Lock(run); !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), "remove the link") {
		t.Errorf("Lock through a linked .lock: %v", err)
	}
	if _, _, err := LockToRead(run); !errors.Is(err, ErrSymlink) {
		t.Errorf("LockToRead through a linked .lock: %v", err)
	}
	if _, _, err := Held(run); !errors.Is(err, ErrSymlink) {
		t.Errorf("Held through a linked .lock: %v", err)
	}
	log := filepath.Join(run, "metrics.jsonl")
	os.Symlink(victim, log)
	if err := Append(log, map[string]int{"iter": 1}, Private); !errors.Is(err, ErrSymlink) {
		t.Errorf("Append through a linked log: %v", err)
	}
	dangling := filepath.Join(run, "val.jsonl")
	os.Symlink(filepath.Join(t.TempDir(), "new-file"), dangling)
	if err := Append(dangling, map[string]int{"iter": 1}, Private); !errors.Is(err, ErrSymlink) {
		t.Errorf("Append through a dangling link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("the linked file changed: %q", b)
	}

	fifo := filepath.Join(dir, "fifo")
	os.Mkdir(fifo, 0o755)
	if err := syscall.Mkfifo(filepath.Join(fifo, FileLock), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 2)
	go func() { _, err := Lock(fifo); done <- err }()
	go func() { _, _, err := Held(fifo); done <- err }()
	for range 2 {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("a FIFO for a lock: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a FIFO in place of the lock blocked")
		}
	}
}
