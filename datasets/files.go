package datasets

import (
	"bytes"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mkbench/mkbench/internal/runfile"
)

// What the loaders share to find, read and decode the files of a data set,
// and to read the line-based lists that come with them.

// defaultDataDir is where mkbench looks for the data set called name when
// the user names no folder: $MKBENCH_DATA/name, else ./data/name if it
// exists, else ../shared/data/name if that exists (the developers' checkout
// layout), else ./data/name, so that a "not found" error names the
// conventional place. Relative paths are relative to the working
// directory.
func defaultDataDir(name string) string {
	dirs := DataDirs(name)
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return dirs[0]
}

// DataDirs lists the folders defaultDataDir chooses among for the data set
// called name, in its order: $MKBENCH_DATA/name alone when MKBENCH_DATA is
// set, else ./data/name and ../shared/data/name. `mkbench data` prints
// them, so they are kept in one place.
func DataDirs(name string) []string {
	if d := os.Getenv("MKBENCH_DATA"); d != "" {
		return []string{filepath.Join(d, name)}
	}
	return []string{filepath.Join("data", name), filepath.Join("..", "shared", "data", name)}
}

// embeddedText returns an embedded file, such as the license of a split.
func embeddedText(fsys embed.FS, name string) string {
	b, _ := fsys.ReadFile(name)
	return string(b)
}

// ignoredEntry says whether a file or folder is operating-system litter that
// archivers and file managers add (macOS resource forks, .DS_Store,
// Thumbs.db) rather than part of the data set.
func ignoredEntry(base string) bool {
	return strings.HasPrefix(base, ".") || base == "__MACOSX" || base == "Thumbs.db"
}

// zipLitter is ignoredEntry for any component of a zip entry's path.
func zipLitter(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if ignoredEntry(part) {
			return true
		}
	}
	return false
}

// walkFiles calls visit for every file under root in lexical order,
// skipping operating-system litter below root (and all that is in a
// littered folder).
func walkFiles(root string, visit func(p string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && ignoredEntry(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		return visit(p, d)
	})
}

// hashFileState adds a file's size and modification time to a cache key,
// 8 little-endian bytes each: the key of a folder of images covers their
// names and these, since hashing their contents would cost most of what
// the cache saves.
func hashFileState(h io.Writer, size, mtime int64) {
	var num [16]byte
	binary.LittleEndian.PutUint64(num[:8], uint64(size))
	binary.LittleEndian.PutUint64(num[8:], uint64(mtime))
	h.Write(num[:])
}

// validPart accepts one component of a slash-separated path in a list or
// archive.
func validPart(p string) bool { return p != "" && p != "." && p != ".." && !strings.Contains(p, "\\") }

// readFileAtMost reads the regular file p unless it holds more than limit
// bytes (runfile.ReadBounded: a FIFO or device is refused unopened, a file
// that grows while read is caught); errors name the file.
func readFileAtMost(p string, limit int64) ([]byte, error) {
	data, err := runfile.ReadBounded(p, limit)
	if errors.Is(err, runfile.ErrTooLarge) {
		return nil, fmt.Errorf("datasets: %s is larger than %d MB, more than any file of the data set", p, limit>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	return data, nil
}

var errTooLarge = errors.New("larger than any Omniglot drawing")

// readAtMost reads r to the end unless it holds more than limit bytes: a
// zip entry's declared size can lie, so the bound is enforced on the bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// drawingFile is one image file to decode; label names it in errors (a
// path, or an entry of a zip). An image set's file on disk has its path
// (see imageFile) and is read by decodeImageFiles; any other is read by
// read.
type drawingFile struct {
	label string
	path  string
	read  func() ([]byte, error)
}

// decodeWorkers is the number of decoding goroutines for an option of n:
// GOMAXPROCS unless n is positive.
func decodeWorkers(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// decodeFiles reads files[i] and hands its bytes to decode(i, data, s) on
// workers goroutines, each with its own scratch s (see forEachFile).
func decodeFiles[S any](files []drawingFile, workers int, decode func(i int, data []byte, s *S) error) error {
	return forEachFile(len(files), workers, func(i int, s *S) error {
		data, err := files[i].read()
		if err != nil {
			return err
		}
		return decode(i, data, s)
	})
}

// forEachFile calls do(i, s) for i < n on workers goroutines, each with
// its own scratch s. Results land by index, so nothing depends on
// scheduling, and the error returned is the one of the first failing index:
// indices are handed out in increasing order, so every one before a
// failure has been done when the workers stop.
func forEachFile[S any](n, workers int, do func(i int, s *S) error) error {
	workers = min(workers, n)
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch S
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := do(i, &scratch); err != nil {
					errs[i] = err
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// forEachLine calls fn with the number (from 1) and the text of each line
// of a list that is not blank, surrounding white space (a Windows line
// end) trimmed, and stops at the first error fn returns.
func forEachLine(data []byte, fn func(n int, line string) error) error {
	for n, raw := range bytes.Split(data, []byte("\n")) {
		line := strings.TrimSpace(string(raw))
		if line == "" {
			continue
		}
		if err := fn(n+1, line); err != nil {
			return err
		}
	}
	return nil
}

// listed is what a list parser returns: its error, or the rows it
// collected, or an error naming file when the list held none of what.
func listed[T any](out []T, err error, file, what string) ([]T, error) {
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("datasets: %s lists no %s", file, what)
	}
	return out, nil
}

// malformedLine is the error for line n of a list, shown up to limit
// bytes: "datasets: file:n: malformed <kind> line "...": why".
func malformedLine(file string, n int, kind, line string, limit int, why string) error {
	return fmt.Errorf("datasets: %s:%d: malformed %s line %q: %s", file, n, kind, clip(line, limit), why)
}

// clip cuts s to limit bytes and an ellipsis for a message.
func clip(s string, limit int) string {
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
