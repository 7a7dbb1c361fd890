//go:build !race

package opencl

const raceEnabled = false
