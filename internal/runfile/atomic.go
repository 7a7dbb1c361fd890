package runfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Private is the mode of run files; Shared, that of results meant to be
// read by others.
const (
	Private os.FileMode = 0o600
	Shared  os.FileMode = 0o644
)

// WriteAtomic writes data to path through a temporary file in the same
// directory (synced, given mode perm) and a rename, so that readers never
// see half a file and a failed write keeps the previous one.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteAtomicFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomicFunc is WriteAtomic for content that write streams: path is
// replaced only when write, the sync and the close all succeed.
func WriteAtomicFunc(path string, perm os.FileMode, write func(io.Writer) error) error {
	return writeAtomic(path, perm, write, nil, false)
}

// WriteNewFunc is WriteAtomicFunc for a file that must not exist: the
// whole file appears at path only if nothing is there when it is done
// (an error matching fs.ErrExist otherwise), so of two writers racing to
// one path, one wins and the other is told.
func WriteNewFunc(path string, perm os.FileMode, write func(io.Writer) error) error {
	return writeAtomic(path, perm, write, nil, true)
}

// WriteAtomicChecked is WriteAtomic that reads the temporary file back
// after the sync and passes its content to check before the rename: a
// write the disk got wrong, or content check refuses, never replaces the
// previous file.
func WriteAtomicChecked(path string, data []byte, perm os.FileMode, check func(written []byte) error) error {
	return writeAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, check, false)
}

// writeAtomic writes a temporary file beside path with write, sets perm,
// syncs and closes it, lets check (if any) read it back, and renames it
// over path (noReplace: links it to path, which must not exist); on any
// failure the temporary file is removed and path is untouched.
func writeAtomic(path string, perm os.FileMode, write func(io.Writer) error, check func([]byte) error, noReplace bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpMark+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	werr := write(tmp)
	if werr == nil {
		werr = tmp.Chmod(perm)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && check != nil {
		var back []byte
		if back, werr = os.ReadFile(name); werr == nil {
			if werr = check(back); werr != nil {
				werr = fmt.Errorf("verifying what was written: %w", werr)
			}
		}
	}
	switch {
	case werr == nil && noReplace:
		// A hard link, unlike a rename, never replaces what is there.
		werr = os.Link(name, path)
	case werr == nil:
		werr = os.Rename(name, path)
	}
	if werr == nil && noReplace {
		os.Remove(name)
	}
	if werr != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	return nil
}

// WriteJSON writes v as indented JSON, atomically.
func WriteJSON(path string, v any, perm os.FileMode) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return WriteAtomic(path, append(data, '\n'), perm)
}

// tmpMark joins a file's name and the random digits os.CreateTemp puts in
// the name of writeAtomic's temporary file.
const tmpMark = ".tmp-"

// TempOf returns the name of the file whose interrupted atomic write left
// the temporary file name (exactly NAME.tmp-DIGITS, as writeAtomic names
// them); ok is false for any other name.
func TempOf(name string) (of string, ok bool) {
	i := strings.LastIndex(name, tmpMark)
	if i <= 0 {
		return "", false
	}
	digits := name[i+len(tmpMark):]
	if digits == "" {
		return "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return name[:i], true
}

// RemoveTemps removes from dir the temporary files that interrupted
// atomic writes of the files own names left (a kill during a checkpoint
// write leaves a checkpoint.gob.tmp-N as large as a checkpoint). Only
// names of exactly writeAtomic's pattern for a name own accepts are
// removed, and only regular files: anything else in dir is not provably
// such a leftover and stays. The caller must hold dir's lock, so that no
// write in progress loses its file. It returns the names removed.
func RemoveTemps(dir string, own func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		of, ok := TempOf(e.Name())
		if !ok || !e.Type().IsRegular() || !own(of) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, e.Name())
	}
	return removed, nil
}
