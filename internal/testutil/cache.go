package testutil

import (
	"fmt"
	"os"
	"testing"
)

// TempCache runs the tests of m with MKBENCH_CACHE set to a new temporary
// folder, removed afterwards, and returns m.Run's exit code: the loaders
// cache decoded data sets in MKBENCH_CACHE (else the user's cache folder),
// and a test must not fill, or read stale files from, the cache of the
// user who runs it. Processes the tests start (the mkbench binary)
// inherit it. A package whose tests load data sets calls it from its
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.TempCache(m)) }
func TempCache(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mkbench-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testutil: no temporary cache folder:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := os.Setenv("MKBENCH_CACHE", dir); err != nil {
		fmt.Fprintln(os.Stderr, "testutil:", err)
		return 1
	}
	return m.Run()
}
