//go:build !(linux || darwin)

package ops

import "time"

// convCPUTime is not measured here; the benchmarks then omit cpu-ms/op.
func convCPUTime() time.Duration { return 0 }
