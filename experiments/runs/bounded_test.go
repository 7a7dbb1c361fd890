package runs

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runstate"
)

// A run whose summary.json or config.json is far larger than mkbench
// writes (a sparse 2 GB file) is listed as unreadable with the reason,
// without being read, and the other runs are listed as they are.
func TestOversizedRunFilesListedDamaged(t *testing.T) {
	if testing.Short() {
		t.Skip("makes sparse 2 GB files")
	}
	root := t.TempDir()
	done := filepath.Join(root, "a-done")
	train(t, done, 1)
	for _, f := range []string{engine.FileSummary, engine.FileConfig} {
		dir := filepath.Join(root, "b-big-"+f)
		copyRun(t, done, dir)
		if err := os.Truncate(filepath.Join(dir, f), 2<<30); err != nil {
			t.Skip(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rs, err := Scan(root)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("Scan allocated %d bytes: an oversized file was read", got)
	}
	if len(rs) != 3 {
		t.Fatalf("listed %d runs, want 3", len(rs))
	}
	if rs[0].State != runstate.Finished || rs[0].Error != "" {
		t.Errorf("the sound run: %+v", rs[0])
	}
	for _, r := range rs[1:] {
		f := strings.TrimPrefix(filepath.Base(r.Dir), "b-big-")
		if r.State != "" || !strings.Contains(r.Error, f) || !strings.Contains(r.Error, "2.0 GB") || strings.Contains(r.Error, "\n") {
			t.Errorf("%s: state %q, error %q; want unreadable, naming %s and its size", r.Rel, r.State, r.Error, f)
		}
	}
}
