//go:build linux && (amd64 || arm64) && !android && !faketime

package opencl

import "github.com/ebitengine/purego"

// supported says this system can load OpenCL at run time (purego's Dlopen
// and SyscallN exist here).
const supported = true

// dlopen loads a shared library with its symbols global, so that CLBlast,
// loaded after the loader, binds its clXxx calls to the already-loaded
// libOpenCL (a GPU host may have it only at a path MKBENCH_OPENCL_LIB names).
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

// call runs the C function fn with integer and pointer arguments and
// returns its integer result. A pointer must be converted to uintptr in the
// call expression itself, so that the referent stays alive and (escaping
// to the heap) does not move during the call, as for syscall.Syscall.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// registerFunc binds fptr to the C function sym; only for functions with
// float arguments (CLBlast's alpha and beta), which call cannot pass.
func registerFunc(fptr any, sym uintptr) { purego.RegisterFunc(fptr, sym) }
