package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// tui --sweep on a directory that is no sweep, or none at all, is one
// line on stderr before any terminal is needed.
func TestTUISweepNotASweep(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ dir, want string }{
		{dir, "is not a sweep directory (it has no sweep.json"},
		{filepath.Join(dir, "missing"), "no such directory"},
	} {
		_, stderr, code := mkbench(t, "tui", "--sweep", c.dir)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("tui --sweep %s: exit %d, stderr %q; want one line with %q", c.dir, code, stderr, c.want)
		}
	}
}
