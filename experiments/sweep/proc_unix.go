//go:build unix

package sweep

import (
	"os"
	"syscall"
)

// stop asks a worker to save a checkpoint and end.
func stop(p *os.Process) { p.Signal(syscall.SIGTERM) }
