package testutil

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs this package's tests under TempCache, which
// TestTempCacheIsNotTheUsers checks.
func TestMain(m *testing.M) { os.Exit(TempCache(m)) }

// Under TempCache the cache the loaders use is a fresh temporary folder,
// not the user's.
func TestTempCacheIsNotTheUsers(t *testing.T) {
	d := os.Getenv("MKBENCH_CACHE")
	if d == "" {
		t.Fatal("MKBENCH_CACHE is not set")
	}
	if rel, err := filepath.Rel(os.TempDir(), d); err != nil || !filepath.IsLocal(rel) {
		t.Errorf("MKBENCH_CACHE %s is not under %s", d, os.TempDir())
	}
	if user, err := os.UserCacheDir(); err == nil && d == filepath.Join(user, "mkbench") {
		t.Errorf("MKBENCH_CACHE is the user's cache %s", d)
	}
	if entries, err := os.ReadDir(d); err != nil || len(entries) != 0 {
		t.Errorf("the temporary cache is not an empty folder: %v %v", entries, err)
	}
}

// CopyDir copies the plain files of a folder (not its subfolders);
// ReadFile reads one back.
func TestCopyDirAndReadFile(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "new", "copy")
	os.WriteFile(filepath.Join(src, "a.json"), []byte(`{"a":1}`), 0o644)
	os.Mkdir(filepath.Join(src, "sub"), 0o755)
	CopyDir(t, src, dst)
	if got := string(ReadFile(t, filepath.Join(dst, "a.json"))); got != `{"a":1}` {
		t.Errorf("a.json: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dst, "sub")); err == nil {
		t.Error("a subfolder was copied")
	}
}

// CentralDiff approximates a derivative and leaves x as it was.
func TestCentralDiff(t *testing.T) {
	x := []float64{1, 2}
	g := CentralDiff(x, 1, func() float64 { return x[0] * x[1] * x[1] * x[1] })
	if math.Abs(g-12) > 1e-6 || x[1] != 2 {
		t.Errorf("d/dx1 x0·x1³ at (1,2) = %v (want 12); x = %v", g, x)
	}
}
