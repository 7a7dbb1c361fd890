//go:build unix

package runfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes f's exclusive flock without waiting; false when another
// open file description holds it.
func tryLock(f *os.File) (bool, error) { return tryFlock(f, unix.LOCK_EX) }

// tryShared takes f's shared flock without waiting; false when an
// exclusive one is held.
func tryShared(f *os.File) (bool, error) { return tryFlock(f, unix.LOCK_SH) }

func tryFlock(f *os.File, how int) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		}
		return false, err
	}
}

func unlock(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
