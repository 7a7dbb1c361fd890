package sweep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Retry readies failed unit u of the sweep in dir for a worker to take up
// again: it removes the unit's failed.json. A failure for good (permanent,
// given only on request: sweep resume --retry-failed) also gets a retry
// row in starts.jsonl, from which stalls and deaths are counted afresh;
// otherwise they count on, so that a unit whose worker keeps dying is
// failed for good after maxDeaths however often it is resumed. It holds
// the unit's lock meanwhile, and refuses a unit a live worker holds.
func Retry(dir string, u Unit, permanent bool) error {
	ud := filepath.Join(dir, u.Dir)
	if !exists(ud) {
		return nil
	}
	lock, err := runfile.Lock(ud)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	defer lock.Release()
	if permanent {
		host, _ := os.Hostname()
		s := Start{Time: time.Now().UTC(), Host: host, PID: os.Getpid(), Retry: true}
		if err := runfile.Append(filepath.Join(ud, FileStarts), s, runfile.Shared); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(ud, FileFailed)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
