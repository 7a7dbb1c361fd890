// Package opencl is mkbench's device layer: a small OpenCL binding, loaded
// at run time, with CLBlast for the matrix products. The engine's device
// kernels (conv, ResNet) are built on it; of mkbench's it imports only the
// leaf internal/runfile (sizes as the rest of mkbench prints them).
//
// # What it offers
//
//   - Devices lists every platform's devices (the order opencl:N counts
//     in) and WriteTable prints them for `mkbench devices`.
//   - ParseSelection reads --device / MKBENCH_DEVICE (cpu, opencl,
//     opencl:N, auto) and Open applies the rules: cpu loads nothing;
//     opencl:N opens device N; opencl the first GPU, else the first device
//     (PoCL in tests); auto the first GPU only, never a CPU device, and
//     without one returns no device and a one-line note so that the caller
//     runs on the CPU and says why. An explicit opencl that cannot open is
//     an error.
//   - A Device is a context with one in-order queue: float32, float64,
//     int32 and uint8 buffers (Alloc, blocking Write and Read, Fill, Zero,
//     Copy), programs built from OpenCL C source (Build, with the
//     compiler's log on failure), kernels (SetBuffer, SetInt32, SetUint32,
//     SetUint64, SetFloat32, SetLocal, Launch in 1–3 dimensions), Finish,
//     and CLBlast's row-major Sgemm and SgemmStridedBatched on that queue.
//   - What the device measured (Timing): the queue is made with profiling
//     on, so every Write and Read is timed by its own event, apart from
//     the kernels before it; kernels and CLBlast products are timed too
//     while ProfileKernels is on. Transfers counts the copies and bytes,
//     MemStats the buffers.
//
// Every failure is an error, never a panic: a missing loader
// (libOpenCL.so.1, or the file MKBENCH_OPENCL_LIB names), platform or
// CLBlast (libclblast.so.1, or MKBENCH_CLBLAST_LIB; loaded only when a
// product is first asked for) is one line naming what is missing and how
// to install it, and matches ErrNoLoader, ErrNoPlatform or ErrNoCLBlast;
// a failed call is an *Error with the status's name (OpenCL's or
// CLBlast's); a program that does not compile is a *BuildError.
//
// # Why purego
//
// No cgo: github.com/ebitengine/purego opens the libraries with dlopen at
// run time, so `CGO_ENABLED=0 go build` still works, a binary needs no
// OpenCL headers or libraries to build or to run on the CPU, and the
// default (cpu) path loads nothing, its results byte-identical to a build
// without this package. Linux on amd64 and arm64 only; elsewhere (Windows
// has no purego.Dlopen) the package compiles and every entry point returns
// ErrUnsupported. The project's `-tags purego` build (no assembly in
// engine/internal) is unrelated to the purego library, which this package
// uses under any tags.
//
// # Pitfalls it guards (../shared/docs/GPU-NOTES.md)
//
//   - Handles (cl_mem, queues, kernels) are C-owned uintptrs. Go memory is
//     passed to C only during blocking calls, and the program source,
//     reached through a char** array, is pinned with runtime.Pinner. No
//     callbacks: build logs are read with clGetProgramBuildInfo.
//   - purego's RegisterFunc allocates per call (about 20 for a CLBlast
//     call), so every OpenCL call, whose arguments are all integers and
//     pointers, goes through SyscallN (one allocation); only CLBlast's
//     routines, which take float alpha and beta, use RegisterFunc.
//   - clSetKernelArg is not thread-safe on one kernel object: a Kernel is
//     never shared between goroutines; make one per op instance from one
//     Program (the staged step runs two task ranges at once).
//   - NaN must reach the loss (a diverged step stops there): a ReLU is
//     written `x < 0 ? 0 : x`, never fmax, and Build refuses
//     -cl-fast-relaxed-math and the options it is made of.
//   - One device gives the same bytes run after run: kernels use
//     fixed-order reductions and no float atomics. A device never gives
//     the CPU's bytes; compare with tolerances.
//   - PoCL and CLBlast compile kernels on first use, seconds each (about
//     10 s for the first sgemm variant on PoCL, 20 s for the batched
//     ones); POCL_CACHE_DIR keeps PoCL's binaries between processes, so
//     set it in CI, and keep the GEMM variants (transposes) few.
//
// # Tests
//
// The tests run on whatever OpenCL device there is (PoCL, OpenCL on the
// CPU: apt-get install pocl-opencl-icd ocl-icd-libopencl1 libclblast1);
// without a platform they skip with one line, and with CI=true they fail
// instead (testutil.OpenCL).
package opencl
