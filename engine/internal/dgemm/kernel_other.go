//go:build !amd64 || purego

package dgemm

// detect offers only the portable kernels: this is not amd64, or the purego
// build tag asks for the pure-Go path.
func detect() []*impl { return []*impl{&goImpl} }
