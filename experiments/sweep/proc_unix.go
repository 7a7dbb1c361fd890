//go:build unix

package sweep

import (
	"os"
	"syscall"
)

func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// stop asks a worker to save a checkpoint and end.
func stop(p *os.Process) { p.Signal(syscall.SIGTERM) }
