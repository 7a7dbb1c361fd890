package opencl

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Device is an open OpenCL device: its context and one in-order command
// queue, on which every buffer copy, kernel and CLBlast call runs in the
// order it was issued. The queue is safe to use from several goroutines
// (OpenCL queues are); a Kernel is not (see Kernel).
type Device struct {
	Info DeviceInfo

	id, ctx uintptr
	// queue is a field, not a local, because CLBlast takes its address
	// (cl_command_queue*): the Device lives on the heap, so the pointer
	// stays valid through the call.
	queue uintptr

	// xfer counts the host↔device copies (Write, Read) for tests that
	// check what crosses per step.
	xfer struct{ writes, wbytes, reads, rbytes atomic.Int64 }
	mem  memCounter // its buffers (memstats.go)
	prof profiler   // device-measured times (profile.go)
	// blastEv receives a CLBlast product's event; CLBlast's calls are one
	// at a time (blastMu), and a field keeps it off the Go stack.
	blastEv uintptr
}

// Transfers is what Write and Read have copied to and from a device.
type Transfers struct {
	Writes, WriteBytes, Reads, ReadBytes int64
}

// Transfers returns the copies between host and d so far (Fill and Copy,
// which stay on the device, are not counted); Timing gives the time the
// device spent on them.
func (d *Device) Transfers() Transfers {
	return Transfers{d.xfer.writes.Load(), d.xfer.wbytes.Load(), d.xfer.reads.Load(), d.xfer.rbytes.Load()}
}

func openDevice(f found) (*Device, error) {
	d := &Device{Info: f.info, id: f.deviceID}
	props := [3]uintptr{clContextPlatform, f.platform, 0}
	var st int32
	d.ctx = call(cl.createContext, uintptr(unsafe.Pointer(&props[0])), 1, uintptr(unsafe.Pointer(&d.id)), 0, 0, uintptr(unsafe.Pointer(&st)))
	if err := check("clCreateContext for "+f.info.Name, uintptr(st)); err != nil {
		return nil, err
	}
	// Profiling on: copies are timed by their events (profile.go).
	d.queue = call(cl.createCommandQueue, d.ctx, d.id, clQueueProfilingEnable, uintptr(unsafe.Pointer(&st)))
	if err := check("clCreateCommandQueue for "+f.info.Name, uintptr(st)); err != nil {
		call(cl.releaseContext, d.ctx)
		return nil, err
	}
	return d, nil
}

// Finish waits until everything issued on the queue has run; an error of
// an earlier asynchronous command may surface here.
func (d *Device) Finish() error {
	err := check("clFinish", call(cl.finish, d.queue))
	d.collect()
	return err
}

// Close finishes the queue and releases it and the context. Buffers,
// programs and kernels are released first by their owners; Close on a
// closed Device does nothing.
func (d *Device) Close() error {
	if d == nil || d.ctx == 0 {
		return nil
	}
	err := d.Finish()
	d.dropEvents()
	call(cl.releaseCommandQueue, d.queue)
	call(cl.releaseContext, d.ctx)
	d.queue, d.ctx = 0, 0
	return err
}

func (d *Device) String() string { return d.Info.String() }

// Element is a Go element type a Buffer holds.
type Element interface {
	float32 | float64 | int32 | uint8
}

// Buffer is device memory holding n elements of one type; its offsets and
// lengths are in elements.
type Buffer struct {
	h    uintptr // cl_mem
	dev  *Device
	n    int
	elem uintptr // bytes an element
	kind string  // the element type's name
}

// kindOf is T's name and size (a type switch: fmt's %T would allocate on
// every read and write).
func kindOf[T Element]() (string, uintptr) {
	var zero T
	switch any(zero).(type) {
	case float32:
		return "float32", 4
	case float64:
		return "float64", 8
	case int32:
		return "int32", 4
	}
	return "uint8", 1
}

// Len is the number of elements the buffer holds.
func (b *Buffer) Len() int { return b.n }

// Handle is the cl_mem, for CLBlast and kernel arguments.
func (b *Buffer) Handle() uintptr { return b.h }

const clMemReadWrite = 1

// Alloc makes a buffer of n elements of T on d (contents undefined: Zero
// or Write it). A size over the device's largest allocation is refused
// with one line naming both sizes.
func Alloc[T Element](d *Device, n int) (*Buffer, error) {
	kind, elem := kindOf[T]()
	if n <= 0 {
		return nil, fmt.Errorf("opencl: a buffer of %d %s elements: the length must be at least 1", n, kind)
	}
	bytes := uint64(n) * uint64(elem)
	if bytes/uint64(elem) != uint64(n) || (d.Info.MaxAlloc > 0 && bytes > d.Info.MaxAlloc) {
		return nil, fmt.Errorf("opencl: a buffer of %d %s elements (%s) exceeds %s's largest allocation, %s (CL_DEVICE_MAX_MEM_ALLOC_SIZE): use a smaller batch or image size",
			n, kind, size(bytes), d.Info.Name, size(d.Info.MaxAlloc))
	}
	var st int32
	h := call(cl.createBuffer, d.ctx, clMemReadWrite, uintptr(bytes), 0, uintptr(unsafe.Pointer(&st)))
	if err := check(fmt.Sprintf("clCreateBuffer of %s", size(bytes)), uintptr(st)); err != nil {
		return nil, err
	}
	d.mem.add(int64(bytes))
	return &Buffer{h: h, dev: d, n: n, elem: elem, kind: kind}, nil
}

// Release frees the buffer's device memory; once more does nothing.
func (b *Buffer) Release() {
	if b != nil && b.h != 0 {
		call(cl.releaseMemObject, b.h)
		b.h = 0
		b.dev.mem.add(-int64(b.n) * int64(b.elem))
	}
}

// span checks that n elements of type T from off fit in b, and gives their
// byte offset and length.
func span[T Element](b *Buffer, off, n int, op string) (uintptr, uintptr, error) {
	if kind, _ := kindOf[T](); kind != b.kind {
		return 0, 0, fmt.Errorf("opencl: %s of %s elements on a buffer of %s", op, kind, b.kind)
	}
	if b.h == 0 {
		return 0, 0, fmt.Errorf("opencl: %s on a released buffer", op)
	}
	if off < 0 || n < 0 || off > b.n || n > b.n-off {
		return 0, 0, fmt.Errorf("opencl: %s of %d elements at %d on a buffer of %d", op, n, off, b.n)
	}
	return uintptr(off) * b.elem, uintptr(n) * b.elem, nil
}

// Write copies src into b from element off, and returns when it is done
// (a blocking write: src may be reused at once).
func Write[T Element](b *Buffer, off int, src []T) error {
	o, n, err := span[T](b, off, len(src), "write")
	if err != nil || n == 0 {
		return err
	}
	b.dev.xfer.writes.Add(1)
	b.dev.xfer.wbytes.Add(int64(n))
	var ev uintptr
	// A blocking write may return once src is copied aside, before the
	// device has it: the event is read later (collect).
	locked := b.dev.queueing()
	st := call(cl.enqueueWriteBuffer, b.dev.queue, b.h, 1, o, n, uintptr(unsafe.Pointer(&src[0])), 0, 0, uintptr(unsafe.Pointer(&ev)))
	b.dev.queued(locked)
	if err := check("clEnqueueWriteBuffer", st); err != nil {
		return err
	}
	b.dev.record(evWrite, ev, 0)
	return nil
}

// Read copies len(dst) elements of b from element off into dst, after
// everything issued before it has run (a blocking read).
func Read[T Element](b *Buffer, off int, dst []T) error {
	o, n, err := span[T](b, off, len(dst), "read")
	if err != nil || n == 0 {
		return err
	}
	b.dev.xfer.reads.Add(1)
	b.dev.xfer.rbytes.Add(int64(n))
	var ev uintptr
	locked := b.dev.queueing()
	st := call(cl.enqueueReadBuffer, b.dev.queue, b.h, 1, o, n, uintptr(unsafe.Pointer(&dst[0])), 0, 0, uintptr(unsafe.Pointer(&ev)))
	b.dev.queued(locked)
	if err := check("clEnqueueReadBuffer", st); err != nil {
		return err
	}
	// The read is complete, and with it everything queued before it.
	b.dev.record(evRead, ev, 0)
	b.dev.collect()
	return nil
}

// Fill sets n elements of b from off to v, in queue order.
func Fill[T Element](b *Buffer, off, n int, v T) error {
	o, nb, err := span[T](b, off, n, "fill")
	if err != nil || nb == 0 {
		return err
	}
	// clEnqueueFillBuffer copies the pattern before it returns.
	locked := b.dev.queueing()
	defer b.dev.queued(locked)
	return check("clEnqueueFillBuffer", call(cl.enqueueFillBuffer, b.dev.queue, b.h, uintptr(unsafe.Pointer(&v)), b.elem, o, nb, 0, 0, 0))
}

// Zero sets every byte of b to 0 (0.0 for float32), in queue order.
func (b *Buffer) Zero() error {
	if b.h == 0 {
		return fmt.Errorf("opencl: zero on a released buffer")
	}
	var zero uint64 // a pattern of the buffer's element size
	locked := b.dev.queueing()
	defer b.dev.queued(locked)
	return check("clEnqueueFillBuffer", call(cl.enqueueFillBuffer, b.dev.queue, b.h, uintptr(unsafe.Pointer(&zero)), b.elem, 0, uintptr(b.n)*b.elem, 0, 0, 0))
}

// Copy copies n elements of src from srcOff to dst at dstOff, in queue
// order; both buffers hold the same type and are on one device.
func Copy(dst *Buffer, dstOff int, src *Buffer, srcOff, n int) error {
	if dst.kind != src.kind || dst.dev != src.dev {
		return fmt.Errorf("opencl: copy from a buffer of %s to one of %s, or across devices", src.kind, dst.kind)
	}
	if dst.h == 0 || src.h == 0 {
		return fmt.Errorf("opencl: copy with a released buffer")
	}
	if n < 0 || srcOff < 0 || dstOff < 0 || srcOff > src.n || n > src.n-srcOff || dstOff > dst.n || n > dst.n-dstOff {
		return fmt.Errorf("opencl: copy of %d elements from %d of %d to %d of %d", n, srcOff, src.n, dstOff, dst.n)
	}
	if n == 0 {
		return nil
	}
	e := src.elem
	locked := src.dev.queueing()
	defer src.dev.queued(locked)
	return check("clEnqueueCopyBuffer", call(cl.enqueueCopyBuffer, src.dev.queue, src.h, dst.h, uintptr(srcOff)*e, uintptr(dstOff)*e, uintptr(n)*e, 0, 0, 0))
}
