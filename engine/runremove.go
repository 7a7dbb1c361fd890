package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/internal/runfile"
)

// RemoveRun deletes the run in dir, as a user asks the runs browser to:
// the engine's own files (OwnFile) and those named in also (what other
// parts of mkbench write into a run directory: an experiment's fits, a
// sweep unit's starts), the stopped-TIME folders of its earlier starts
// when they hold nothing else, and dir itself once nothing is left. What
// is not mkbench's is never removed: left names it, and dir stays. The
// caller holds dir's lock; its lock file is removed last, by the caller,
// when left is empty (runfile.DirLock.Remove).
func RemoveRun(dir string, also ...string) (left []string, err error) {
	own := func(name string) bool {
		if of, ok := runfile.TempOf(name); ok {
			name = of
		}
		return name != runfile.FileLock && (OwnFile(name) || slices.Contains(also, name))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case e.Type().IsRegular() && own(name):
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return left, err
			}
		case e.IsDir() && strings.HasPrefix(name, asidePrefix+"-"):
			if sub, err := RemoveRun(path, also...); err != nil || len(sub) > 0 {
				left = append(left, name)
			} else if err := os.Remove(path); err != nil {
				left = append(left, name)
			}
		case name != runfile.FileLock:
			left = append(left, name)
		}
	}
	return left, nil
}
