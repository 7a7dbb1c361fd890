package datasets

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// TestMain gives the tests a temporary data-set cache (MKBENCH_CACHE), so
// that they never write into the cache of the user who runs them.
func TestMain(m *testing.M) { os.Exit(testutil.TempCache(m)) }

// The loaders' default cache, in these tests, is TestMain's temporary
// folder, not the cache of the user who runs them (the tests used to leave
// decoded fixtures in ~/.cache/mkbench).
func TestTestsUseATemporaryCache(t *testing.T) {
	d, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(os.TempDir(), d); err != nil || !filepath.IsLocal(rel) {
		t.Errorf("the tests' cache %s is not under %s", d, os.TempDir())
	}
	if user, err := os.UserCacheDir(); err == nil && d == filepath.Join(user, "mkbench") {
		t.Errorf("the tests' cache is the user's, %s", d)
	}
}
