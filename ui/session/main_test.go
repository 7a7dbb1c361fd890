package session

import (
	"os"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// TestMain gives the tests a temporary data-set cache (MKBENCH_CACHE), so
// that they never write into the cache of the user who runs them.
func TestMain(m *testing.M) { os.Exit(testutil.TempCache(m)) }
