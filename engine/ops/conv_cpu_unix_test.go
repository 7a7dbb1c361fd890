//go:build linux || darwin

package ops

import (
	"syscall"
	"time"
)

// convCPUTime is the CPU time the process has used. On a machine shared
// with other jobs it measures our work where wall time also counts theirs.
func convCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
