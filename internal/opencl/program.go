package opencl

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"
)

const (
	clProgramBuildLog       = 0x1183
	statusBuildFailure      = -11
	statusInvalidKernelName = -46
)

// unsafeMath are the build options that let the compiler drop NaN and
// infinities or reorder sums: the engine needs a NaN to reach the loss
// (a diverged step stops there) and equal bytes run after run.
var unsafeMath = []string{"-cl-fast-relaxed-math", "-cl-unsafe-math-optimizations", "-cl-finite-math-only", "-cl-no-signed-zeros", "-cl-mad-enable"}

// Program is OpenCL C source built for one device.
type Program struct {
	h   uintptr
	dev *Device
}

// Build compiles OpenCL C source for d with options (such as "-D TILE=16
// -cl-std=CL1.2"). A source that does not compile is a *BuildError holding
// the compiler's log. The options that relax IEEE arithmetic
// (-cl-fast-relaxed-math and its parts) are refused.
func (d *Device) Build(source, options string) (*Program, error) {
	for _, o := range strings.Fields(options) {
		for _, u := range unsafeMath {
			if o == u {
				return nil, fmt.Errorf("opencl: build option %s is refused: it lets the compiler drop NaN or reorder sums (the engine needs NaN to reach the loss and equal bytes run after run)", o)
			}
		}
	}
	if source == "" {
		return nil, fmt.Errorf("opencl: an empty program source")
	}
	src := []byte(source)
	length := uintptr(len(src))
	// clCreateProgramWithSource reads a char** array of Go pointers: the
	// source is pinned so that what the array points to is pinned Go
	// memory, as cgo's rules ask (purego does not check them).
	var pin runtime.Pinner
	pin.Pin(&src[0])
	defer pin.Unpin()
	strs := [1]*byte{&src[0]}
	var st int32
	h := call(cl.createProgramWithSource, d.ctx, 1, uintptr(unsafe.Pointer(&strs[0])), uintptr(unsafe.Pointer(&length)), uintptr(unsafe.Pointer(&st)))
	if err := check("clCreateProgramWithSource", uintptr(st)); err != nil {
		return nil, err
	}
	opts := cstring(options)
	// No pfn_notify callback: the build is synchronous and its log is read
	// back with clGetProgramBuildInfo.
	r := Status(int32(call(cl.buildProgram, h, 1, uintptr(unsafe.Pointer(&d.id)), uintptr(unsafe.Pointer(&opts[0])), 0, 0)))
	if r != 0 {
		log := d.buildLog(h)
		call(cl.releaseProgram, h)
		if r == statusBuildFailure || log != "" {
			return nil, &BuildError{Status: r, Log: log}
		}
		return nil, &Error{Op: "clBuildProgram", Status: r}
	}
	return &Program{h: h, dev: d}, nil
}

// buildLog is the compiler's output for program h on d ("" when none).
func (d *Device) buildLog(h uintptr) string {
	var n uintptr
	if call(cl.getProgramBuildInfo, h, d.id, clProgramBuildLog, 0, 0, uintptr(unsafe.Pointer(&n))) != 0 || n == 0 {
		return ""
	}
	b := make([]byte, n)
	if call(cl.getProgramBuildInfo, h, d.id, clProgramBuildLog, n, uintptr(unsafe.Pointer(&b[0])), 0) != 0 {
		return ""
	}
	return strings.TrimSpace(fromC(b))
}

// Release frees the program; kernels made from it keep it alive in OpenCL
// until they are released too. Once more does nothing.
func (p *Program) Release() {
	if p != nil && p.h != 0 {
		call(cl.releaseProgram, p.h)
		p.h = 0
	}
}

// Kernel is one __kernel function of a program with its arguments.
//
// A kernel object holds its arguments between SetArg and Launch, and
// clSetKernelArg is not thread-safe on one kernel object: two goroutines
// must never share a Kernel. Make one per user (per op instance: the
// staged step runs two task ranges at once), from the same Program.
type Kernel struct {
	h    uintptr
	dev  *Device
	name string
	// Scratch for argument values and launch sizes: fields of the heap
	// object, so that passing their addresses to C allocates nothing.
	arg           uint64
	global, local [3]uintptr
	ev            uintptr // the launch's event, while kernels are timed
}

// Kernel makes a kernel object for the __kernel function name.
func (p *Program) Kernel(name string) (*Kernel, error) {
	cname := cstring(name)
	var st int32
	h := call(cl.createKernel, p.h, uintptr(unsafe.Pointer(&cname[0])), uintptr(unsafe.Pointer(&st)))
	if st == statusInvalidKernelName {
		return nil, fmt.Errorf("opencl: the program has no __kernel %q", name)
	}
	if err := check("clCreateKernel "+name, uintptr(st)); err != nil {
		return nil, err
	}
	return &Kernel{h: h, dev: p.dev, name: name}, nil
}

// Release frees the kernel object; once more does nothing.
func (k *Kernel) Release() {
	if k != nil && k.h != 0 {
		call(cl.releaseKernel, k.h)
		k.h = 0
	}
}

// setArg sets argument i to the n bytes at k.arg (or, for local memory,
// to n bytes with no value).
func (k *Kernel) setArg(i int, n uintptr, local bool) error {
	p := unsafe.Pointer(&k.arg)
	if local {
		p = nil
	}
	if st := call(cl.setKernelArg, k.h, uintptr(i), n, uintptr(p)); st != 0 {
		return &Error{Op: fmt.Sprintf("clSetKernelArg %s argument %d", k.name, i), Status: Status(int32(st))}
	}
	return nil
}

// SetBuffer sets argument i (a __global pointer) to b.
func (k *Kernel) SetBuffer(i int, b *Buffer) error {
	k.arg = uint64(b.h)
	return k.setArg(i, unsafe.Sizeof(b.h), false)
}

// SetInt32 sets argument i (an int) to v.
func (k *Kernel) SetInt32(i int, v int32) error {
	*(*int32)(unsafe.Pointer(&k.arg)) = v
	return k.setArg(i, 4, false)
}

// SetUint32 sets argument i (a uint) to v.
func (k *Kernel) SetUint32(i int, v uint32) error {
	*(*uint32)(unsafe.Pointer(&k.arg)) = v
	return k.setArg(i, 4, false)
}

// SetUint64 sets argument i (a ulong) to v.
func (k *Kernel) SetUint64(i int, v uint64) error {
	k.arg = v
	return k.setArg(i, 8, false)
}

// SetFloat32 sets argument i (a float) to v.
func (k *Kernel) SetFloat32(i int, v float32) error {
	*(*uint32)(unsafe.Pointer(&k.arg)) = math.Float32bits(v)
	return k.setArg(i, 4, false)
}

// SetLocal sets argument i (a __local pointer) to bytes of local memory a
// work-group gets.
func (k *Kernel) SetLocal(i int, bytes int) error {
	if bytes <= 0 {
		return fmt.Errorf("opencl: kernel %s argument %d: %d bytes of local memory", k.name, i, bytes)
	}
	return k.setArg(i, uintptr(bytes), true)
}

// Launch enqueues the kernel over global work-items in 1 to 3 dimensions,
// in work-groups of local (nil: the implementation chooses); each global
// size is a multiple of its local size. It returns once the launch is
// queued: a later Read, Finish or blocking call sees its results.
func (k *Kernel) Launch(global, local []int) error {
	dims := len(global)
	if dims < 1 || dims > 3 || (local != nil && len(local) != dims) {
		return fmt.Errorf("opencl: kernel %s launched over %d global and %d local dimensions: 1 to 3, the same number", k.name, len(global), len(local))
	}
	var lp unsafe.Pointer // nil: the implementation picks the work-groups
	for i, g := range global {
		if g <= 0 {
			return fmt.Errorf("opencl: kernel %s: global size %d in dimension %d", k.name, g, i)
		}
		k.global[i] = uintptr(g)
		if local != nil {
			if local[i] <= 0 || g%local[i] != 0 {
				return fmt.Errorf("opencl: kernel %s: global size %d in dimension %d is not a multiple of the local size %d", k.name, g, i, local[i])
			}
			k.local[i] = uintptr(local[i])
			lp = unsafe.Pointer(&k.local[0])
		}
	}
	var evp uintptr // nil: no event
	timed := k.dev.profilingKernels()
	if timed {
		k.ev = 0
		evp = uintptr(unsafe.Pointer(&k.ev))
		k.dev.prof.enq.RLock() // see profiler.enq
	}
	st := call(cl.enqueueNDRangeKernel, k.dev.queue, k.h, uintptr(dims), 0, uintptr(unsafe.Pointer(&k.global[0])), uintptr(lp), 0, 0, evp)
	if timed {
		k.dev.prof.enq.RUnlock()
	}
	if st != 0 {
		return &Error{Op: "clEnqueueNDRangeKernel " + k.name, Status: Status(int32(st))}
	}
	if timed {
		k.dev.record(evKernel, k.ev, 0)
	}
	return nil
}
