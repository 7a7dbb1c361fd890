//go:build !(linux && (amd64 || arm64) && !android && !faketime)

package opencl

// supported is false: purego has no Dlopen here (Windows) or the package
// was never tried here; every entry point returns ErrUnsupported, since
// nothing is ever loaded.
const supported = false

func dlopen(string) (uintptr, error)         { return 0, ErrUnsupported }
func dlsym(uintptr, string) (uintptr, error) { return 0, ErrUnsupported }
func call(uintptr, ...uintptr) uintptr       { panic("opencl: call without a loaded library") }
func registerFunc(any, uintptr)              { panic("opencl: registerFunc without a loaded library") }
