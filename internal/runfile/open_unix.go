//go:build unix

package runfile

import (
	"errors"
	"syscall"
)

// O_NONBLOCK keeps the open of a FIFO from waiting for its other end; it
// changes nothing for a regular file, the only kind OpenOwn keeps.
const (
	oNoFollow = syscall.O_NOFOLLOW
	oNonBlock = syscall.O_NONBLOCK
)

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
