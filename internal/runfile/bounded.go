package runfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// Ceilings of the files mkbench reads back, each far above what mkbench
// itself writes and far below what would strain a machine: a file past its
// ceiling is damaged or is not what its name says, and is refused by its
// size before a byte of it is read.
const (
	// MaxSmallJSON bounds a one-object JSON file: config.json,
	// summary.json, failed.json, a model's model.json, a sweep's manifest.
	MaxSmallJSON = 16 << 20
	// MaxLog bounds a JSON-lines log (metrics.jsonl, val.jsonl), which
	// grows by about 200 bytes a row: 256 MB is a million rows.
	MaxLog = 256 << 20
	// MaxUserText bounds a text file a user hands mkbench: a sweep file,
	// a Slurm template, a split or spec file.
	MaxUserText = 16 << 20
)

// TooLargeError is the error for a file over the ceiling a reader set.
type TooLargeError struct {
	Path      string
	Size, Max int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %s, more than the %s such a file can hold: it is damaged or not what its name says", e.Path, Size(e.Size), Size(e.Max))
}

// ErrTooLarge is what a TooLargeError matches with errors.Is.
var ErrTooLarge = errors.New("file too large")

func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Size writes a byte count for people: "512 B", "8.0 MB", "3.0 GB".
func Size(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
}

// ReadBounded reads the regular file at path when it holds at most max
// bytes, as os.ReadFile does (a missing file's error matches
// fs.ErrNotExist). A larger file is a *TooLargeError, found from its size
// before anything is read and again while reading (a file that grows);
// anything but a regular file (a FIFO, a device, a directory) is refused,
// since reading it could block or never end.
func ReadBounded(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, path, max)
}

// ReadFSBounded is ReadBounded for a file of fsys.
func ReadFSBounded(fsys fs.FS, name string, max int64) ([]byte, error) {
	if st, err := fs.Stat(fsys, name); err != nil {
		return nil, err
	} else if err := regular(st, name); err != nil {
		return nil, err
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f, name, max)
}

func readBounded(f fs.File, path string, max int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := regular(st, path); err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, &TooLargeError{Path: path, Size: st.Size(), Max: max}
	}
	// Sized from the stat, but never trusted past max: the file may grow.
	buf := make([]byte, 0, st.Size()+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(int64(cap(buf)), max+1) // at most one byte past max is ever read
		n, err := f.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, &TooLargeError{Path: path, Size: int64(len(buf)), Max: max}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
	}
}

// regular refuses anything but a regular file.
func regular(st fs.FileInfo, path string) error {
	if st.Mode().IsRegular() {
		return nil
	}
	what := "not a regular file"
	if st.IsDir() {
		what = "a directory, not a file"
	}
	return &fs.PathError{Op: "read", Path: path, Err: errors.New(what)}
}
