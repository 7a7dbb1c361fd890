package opencl

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/mkbench/mkbench/internal/runfile"
)

// The classes of failure a caller may want to tell apart (errors.Is): each
// error this package returns for them is one line naming what is missing
// and how to install it.
var (
	// ErrUnsupported: this system cannot load OpenCL at run time (Windows,
	// other than Linux on amd64/arm64).
	ErrUnsupported = errors.New("OpenCL devices are not supported on " + runtime.GOOS + "/" + runtime.GOARCH + " (Linux on amd64 or arm64 only): use --device cpu")
	// ErrNoLoader: libOpenCL.so.1 (or MKBENCH_OPENCL_LIB) did not load, or
	// lacks a function.
	ErrNoLoader = errors.New("no OpenCL loader")
	// ErrNoPlatform: the loader found no platform (no vendor driver or ICD
	// file), or no platform has a device.
	ErrNoPlatform = errors.New("no OpenCL platform")
	// ErrNoCLBlast: libclblast.so.1 (or MKBENCH_CLBLAST_LIB) did not load.
	ErrNoCLBlast = errors.New("no CLBlast")
)

// Install hints, one per missing piece.
const (
	loaderFix   = "apt-get install ocl-icd-libopencl1, and your GPU vendor's driver (or set MKBENCH_OPENCL_LIB to the loader's file)"
	platformFix = "install a vendor driver (NVIDIA: the driver's libnvidia-opencl.so.1 and /etc/OpenCL/vendors/nvidia.icd, or OCL_ICD_VENDORS=…; CPU for tests: pocl-opencl-icd)"
	clblastFix  = "apt-get install libclblast1 (or set MKBENCH_CLBLAST_LIB to the library's file)"
)

// missingError is a missing loader, platform or library: kind (one of the
// Err sentinels) with what was tried and the fix, as one line.
type missingError struct {
	kind   error
	detail string
	fix    string
}

func (e *missingError) Error() string {
	return fmt.Sprintf("%v (%s): %s", e.kind, e.detail, e.fix)
}

func (e *missingError) Unwrap() error { return e.kind }

// Status is an OpenCL or CLBlast status code (cl_int, CLBlastStatusCode).
type Status int32

// String is the code's name as the headers spell it, with its number.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return fmt.Sprintf("%s (%d)", n, int32(s))
	}
	return fmt.Sprintf("status %d", int32(s))
}

// Error is a call into OpenCL or CLBlast that returned a status other than
// success.
type Error struct {
	Op     string // the C function, with what it was doing where useful
	Status Status
}

func (e *Error) Error() string { return e.Op + ": " + e.Status.String() }

// check turns a status into an *Error, or nil on success.
func check(op string, status uintptr) error {
	if s := Status(int32(status)); s != 0 {
		return &Error{Op: op, Status: s}
	}
	return nil
}

// BuildError is a program that did not compile: the compiler's log, as
// clGetProgramBuildInfo gives it, in Log; Error gives it as one line.
type BuildError struct {
	Status Status
	Log    string
}

func (e *BuildError) Error() string {
	// The log's lines, blank ones dropped, joined into the one line a
	// refusal is; a long log is cut (Log keeps all of it).
	var lines []string
	for _, l := range strings.Split(e.Log, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	log := strings.Join(lines, " | ")
	if len(log) > 600 {
		log = log[:600] + "…"
	}
	if log == "" {
		log = "the compiler gave no log"
	}
	return fmt.Sprintf("OpenCL program did not build (clBuildProgram: %v): %s", e.Status, log)
}

// statusNames are OpenCL's error codes and CLBlast's own (CLBlast reuses
// OpenCL's numbers for the errors it shares with it).
var statusNames = map[Status]string{
	-1: "CL_DEVICE_NOT_FOUND", -2: "CL_DEVICE_NOT_AVAILABLE", -3: "CL_COMPILER_NOT_AVAILABLE",
	-4: "CL_MEM_OBJECT_ALLOCATION_FAILURE", -5: "CL_OUT_OF_RESOURCES", -6: "CL_OUT_OF_HOST_MEMORY",
	-7: "CL_PROFILING_INFO_NOT_AVAILABLE", -8: "CL_MEM_COPY_OVERLAP", -9: "CL_IMAGE_FORMAT_MISMATCH",
	-10: "CL_IMAGE_FORMAT_NOT_SUPPORTED", -11: "CL_BUILD_PROGRAM_FAILURE", -12: "CL_MAP_FAILURE",
	-13: "CL_MISALIGNED_SUB_BUFFER_OFFSET", -14: "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
	-15: "CL_COMPILE_PROGRAM_FAILURE", -16: "CL_LINKER_NOT_AVAILABLE", -17: "CL_LINK_PROGRAM_FAILURE",
	-18: "CL_DEVICE_PARTITION_FAILED", -19: "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
	-30: "CL_INVALID_VALUE", -31: "CL_INVALID_DEVICE_TYPE", -32: "CL_INVALID_PLATFORM",
	-33: "CL_INVALID_DEVICE", -34: "CL_INVALID_CONTEXT", -35: "CL_INVALID_QUEUE_PROPERTIES",
	-36: "CL_INVALID_COMMAND_QUEUE", -37: "CL_INVALID_HOST_PTR", -38: "CL_INVALID_MEM_OBJECT",
	-39: "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR", -40: "CL_INVALID_IMAGE_SIZE", -41: "CL_INVALID_SAMPLER",
	-42: "CL_INVALID_BINARY", -43: "CL_INVALID_BUILD_OPTIONS", -44: "CL_INVALID_PROGRAM",
	-45: "CL_INVALID_PROGRAM_EXECUTABLE", -46: "CL_INVALID_KERNEL_NAME", -47: "CL_INVALID_KERNEL_DEFINITION",
	-48: "CL_INVALID_KERNEL", -49: "CL_INVALID_ARG_INDEX", -50: "CL_INVALID_ARG_VALUE",
	-51: "CL_INVALID_ARG_SIZE", -52: "CL_INVALID_KERNEL_ARGS", -53: "CL_INVALID_WORK_DIMENSION",
	-54: "CL_INVALID_WORK_GROUP_SIZE", -55: "CL_INVALID_WORK_ITEM_SIZE", -56: "CL_INVALID_GLOBAL_OFFSET",
	-57: "CL_INVALID_EVENT_WAIT_LIST", -58: "CL_INVALID_EVENT", -59: "CL_INVALID_OPERATION",
	-60: "CL_INVALID_GL_OBJECT", -61: "CL_INVALID_BUFFER_SIZE", -62: "CL_INVALID_MIP_LEVEL",
	-63: "CL_INVALID_GLOBAL_WORK_SIZE", -64: "CL_INVALID_PROPERTY", -65: "CL_INVALID_IMAGE_DESCRIPTOR",
	-66: "CL_INVALID_COMPILER_OPTIONS", -67: "CL_INVALID_LINKER_OPTIONS",
	-68: "CL_INVALID_DEVICE_PARTITION_COUNT", -69: "CL_INVALID_PIPE_SIZE", -70: "CL_INVALID_DEVICE_QUEUE",
	-71: "CL_INVALID_SPEC_ID", -72: "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
	-1001: "CL_PLATFORM_NOT_FOUND_KHR",

	-1024: "CLBlastNotImplemented", -1022: "CLBlastInvalidMatrixA", -1021: "CLBlastInvalidMatrixB",
	-1020: "CLBlastInvalidMatrixC", -1019: "CLBlastInvalidVectorX", -1018: "CLBlastInvalidVectorY",
	-1017: "CLBlastInvalidDimension", -1016: "CLBlastInvalidLeadDimA", -1015: "CLBlastInvalidLeadDimB",
	-1014: "CLBlastInvalidLeadDimC", -1013: "CLBlastInvalidIncrementX", -1012: "CLBlastInvalidIncrementY",
	-1011: "CLBlastInsufficientMemoryA", -1010: "CLBlastInsufficientMemoryB",
	-1009: "CLBlastInsufficientMemoryC", -1008: "CLBlastInsufficientMemoryX",
	-1007: "CLBlastInsufficientMemoryY",
	-2050: "CLBlastInsufficientMemoryTemp", -2049: "CLBlastInvalidBatchCount",
	-2048: "CLBlastInvalidOverrideKernel", -2047: "CLBlastMissingOverrideParameter",
	-2046: "CLBlastInvalidLocalMemUsage", -2045: "CLBlastNoHalfPrecision",
	-2044: "CLBlastNoDoublePrecision", -2043: "CLBlastInvalidVectorScalar",
	-2042: "CLBlastInsufficientMemoryScalar", -2041: "CLBlastDatabaseError",
	-2040: "CLBlastUnknownError", -2039: "CLBlastUnexpectedError",
}

// size prints a byte count as the rest of mkbench does.
func size(n uint64) string { return runfile.Size(int64(min(n, 1<<62))) }
