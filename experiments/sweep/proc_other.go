//go:build !unix

package sweep

import (
	"os"
	"syscall"
)

func workerAttr() *syscall.SysProcAttr { return nil }

// stop ends a worker; without SIGTERM it cannot checkpoint first.
func stop(p *os.Process) { p.Kill() }
