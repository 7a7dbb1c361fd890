//go:build unix

package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/tfrecord"
)

// A data folder handed over can hold a FIFO (or a link to one) where an
// archive or a record file should be: opening it for reading would wait
// for a writer for ever. Each loader that streams a large file refuses it
// at once instead.
func TestDataFilesThatAreFIFOsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		return p
	}
	zips := filepath.Join(dir, "omniglot")
	os.Mkdir(zips, 0o755)
	os.Rename(fifo("bg"), filepath.Join(zips, "images_background.zip"))
	os.Rename(fifo("ev"), filepath.Join(zips, "images_evaluation.zip"))
	records := fifo("0.tfrecords")
	npz := fifo("x.npz")
	for name, read := range map[string]func() error{
		"omniglot zip":   func() error { _, err := LoadOmniglot(zips, OmniglotOptions{NoCache: true}); return err },
		"tfrecord index": func() error { _, err := tfrecord.Index(records); return err },
		"tfrecord scan":  func() error { return tfrecord.Scan(records, func(int, []byte) error { return nil }) },
		"npz":            func() error { _, _, err := readNpzFile(npz); return err },
		"cifar tar":      func() error { _, err := readCIFARTar(npz, true); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- read() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s from a FIFO: %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s from a FIFO blocked", name)
		}
	}
}
