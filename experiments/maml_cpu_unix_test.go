//go:build linux || darwin

package experiments

import (
	"syscall"
	"time"
)

// mamlCPUTime is the CPU time the process has used. On a machine shared
// with other jobs it measures our work where wall time also counts theirs.
func mamlCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
