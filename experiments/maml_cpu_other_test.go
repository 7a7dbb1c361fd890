//go:build !(linux || darwin)

package experiments

import "time"

// mamlCPUTime is not measured here; the benchmark reports no CPU time.
func mamlCPUTime() time.Duration { return 0 }
