package opencl

import (
	"os"
	"sync"
)

// The libraries' default names (Debian's ocl-icd-libopencl1 and
// libclblast1) and the variables that name another file.
const (
	openCLLib     = "libOpenCL.so.1"
	openCLEnv     = "MKBENCH_OPENCL_LIB"
	clblastLib    = "libclblast.so.1"
	clblastEnv    = "MKBENCH_CLBLAST_LIB"
	clblastRowMaj = 101 // CLBlastLayoutRowMajor
	clblastNoTr   = 111 // CLBlastTransposeNo
	clblastTr     = 112 // CLBlastTransposeYes
)

// clFuncs are the OpenCL 1.2 entry points the package calls, as C
// function addresses (called through call: integer and pointer arguments
// only).
type clFuncs struct {
	getPlatformIDs, getPlatformInfo, getDeviceIDs, getDeviceInfo           uintptr
	createContext, releaseContext, createCommandQueue, releaseCommandQueue uintptr
	createBuffer, releaseMemObject                                         uintptr
	enqueueReadBuffer, enqueueWriteBuffer, enqueueCopyBuffer               uintptr
	enqueueFillBuffer, finish                                              uintptr
	createProgramWithSource, buildProgram, getProgramBuildInfo             uintptr
	releaseProgram, createKernel, releaseKernel, setKernelArg              uintptr
	enqueueNDRangeKernel, enqueueMarkerWithWaitList                        uintptr
	getEventProfilingInfo, releaseEvent                                    uintptr
}

var (
	clOnce sync.Once
	cl     clFuncs
	clErr  error
)

// loadOpenCL loads the OpenCL loader once per process; a failure is kept,
// since the loader reads its vendor files (OCL_ICD_VENDORS) only then.
func loadOpenCL() error {
	clOnce.Do(func() { cl, clErr = openOpenCL(libFile(openCLEnv, openCLLib)) })
	return clErr
}

// libFile is the library to load: the file the variable env names, else
// def; what names it in messages as the user chose it.
func libFile(env, def string) (path, what string) {
	if p := os.Getenv(env); p != "" {
		return p, env + "=" + p
	}
	return def, def
}

// openLib loads the library at path (what in messages), or says it is
// missing (kind) and how to install it.
func openLib(path, what string, kind error, fix string) (uintptr, error) {
	if !supported {
		return 0, ErrUnsupported
	}
	lib, err := dlopen(path)
	if err != nil {
		return 0, &missingError{kind, what + ": " + oneLine(err), fix}
	}
	return lib, nil
}

// openOpenCL loads the loader from path and resolves every function the
// package calls.
func openOpenCL(path, what string) (clFuncs, error) {
	var f clFuncs
	lib, err := openLib(path, what, ErrNoLoader, loaderFix)
	if err != nil {
		return f, err
	}
	syms := []struct {
		p    *uintptr
		name string
	}{
		{&f.getPlatformIDs, "clGetPlatformIDs"}, {&f.getPlatformInfo, "clGetPlatformInfo"},
		{&f.getDeviceIDs, "clGetDeviceIDs"}, {&f.getDeviceInfo, "clGetDeviceInfo"},
		{&f.createContext, "clCreateContext"}, {&f.releaseContext, "clReleaseContext"},
		{&f.createCommandQueue, "clCreateCommandQueue"}, {&f.releaseCommandQueue, "clReleaseCommandQueue"},
		{&f.createBuffer, "clCreateBuffer"}, {&f.releaseMemObject, "clReleaseMemObject"},
		{&f.enqueueReadBuffer, "clEnqueueReadBuffer"}, {&f.enqueueWriteBuffer, "clEnqueueWriteBuffer"},
		{&f.enqueueCopyBuffer, "clEnqueueCopyBuffer"}, {&f.enqueueFillBuffer, "clEnqueueFillBuffer"},
		{&f.finish, "clFinish"},
		{&f.createProgramWithSource, "clCreateProgramWithSource"}, {&f.buildProgram, "clBuildProgram"},
		{&f.getProgramBuildInfo, "clGetProgramBuildInfo"}, {&f.releaseProgram, "clReleaseProgram"},
		{&f.createKernel, "clCreateKernel"}, {&f.releaseKernel, "clReleaseKernel"},
		{&f.setKernelArg, "clSetKernelArg"}, {&f.enqueueNDRangeKernel, "clEnqueueNDRangeKernel"},
		{&f.enqueueMarkerWithWaitList, "clEnqueueMarkerWithWaitList"},
		{&f.getEventProfilingInfo, "clGetEventProfilingInfo"}, {&f.releaseEvent, "clReleaseEvent"},
	}
	for _, s := range syms {
		if *s.p, err = dlsym(lib, s.name); err != nil || *s.p == 0 {
			return clFuncs{}, &missingError{ErrNoLoader, what + " has no " + s.name + ", an OpenCL 1.2 loader is needed", loaderFix}
		}
	}
	return f, nil
}

// clblastFuncs are CLBlast's entry points: their float alpha and beta need
// purego's RegisterFunc (call passes integers only).
type clblastFuncs struct {
	sgemm func(layout, transA, transB uint32, m, n, k uintptr, alpha float32,
		a, offA, lda, b, offB, ldb uintptr, beta float32,
		c, offC, ldc uintptr, queue *uintptr, event *uintptr) int32
	sgemmStridedBatched func(layout, transA, transB uint32, m, n, k uintptr, alpha float32,
		a, offA, lda, strideA, b, offB, ldb, strideB uintptr, beta float32,
		c, offC, ldc, strideC, batch uintptr, queue *uintptr, event *uintptr) int32
}

var (
	blOnce sync.Once
	blast  clblastFuncs
	blErr  error
)

// LoadCLBlast loads CLBlast (libclblast.so.1, or the file
// MKBENCH_CLBLAST_LIB names) once, after the OpenCL loader; its error is
// one line naming what is missing. Sgemm calls it; a caller that wants to
// refuse a device without CLBlast up front calls it after Open.
func LoadCLBlast() error {
	if err := loadOpenCL(); err != nil {
		return err
	}
	blOnce.Do(func() { blast, blErr = openCLBlast(libFile(clblastEnv, clblastLib)) })
	return blErr
}

// openCLBlast loads CLBlast from path and binds the routines the package
// calls.
func openCLBlast(path, what string) (clblastFuncs, error) {
	var f clblastFuncs
	lib, err := openLib(path, what, ErrNoCLBlast, clblastFix)
	if err != nil {
		return f, err
	}
	for _, s := range []struct {
		fptr any
		name string
	}{{&f.sgemm, "CLBlastSgemm"}, {&f.sgemmStridedBatched, "CLBlastSgemmStridedBatched"}} {
		sym, err := dlsym(lib, s.name)
		if err != nil || sym == 0 {
			return clblastFuncs{}, &missingError{ErrNoCLBlast, what + " has no " + s.name + ", CLBlast 1.5 or later is needed", clblastFix}
		}
		registerFunc(s.fptr, sym)
	}
	return f, nil
}

// oneLine is err's text with line breaks folded (dlerror's messages are
// one line already; this keeps a refusal one line whatever they say).
func oneLine(err error) string {
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

// cstring is s with the NUL C expects.
func cstring(s string) []byte { return append([]byte(s), 0) }

// fromC is the string in a NUL-terminated buffer.
func fromC(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
