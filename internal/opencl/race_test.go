//go:build race

package opencl

// raceEnabled: the race detector adds allocations, so TestAllocs only logs.
const raceEnabled = true
