package opencl

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Device-measured time. A Device's queue is made with
// CL_QUEUE_PROFILING_ENABLE, so each command can report when the device
// started and ended it (clGetEventProfilingInfo, in nanoseconds of the
// device's clock). A host clock around a call cannot separate a copy from
// the kernels queued before it — a blocking Read waits for all of them —
// while the copy's own event times the copy alone.
//
// Copies (Write, Read) are always timed: a step makes tens of them, and an
// event costs a few calls each. Kernels and CLBlast products are timed
// only while ProfileKernels is on, since a step launches thousands, each
// event is held until it is read, and a product's timing keeps other
// commands from being queued while CLBlast queues its own.

// OpenCL's profiling constants (cl.h).
const (
	clQueueProfilingEnable    = 1 << 1
	clProfilingCommandStart   = 0x1282
	clProfilingCommandEnd     = 0x1283
	maxPendingEvents          = 4096
	evWrite, evRead, evKernel = 0, 1, 2
	evBlas                    = 3
)

// Timing is what the device measured of the commands on d's queue: the
// sums of their device times, in nanoseconds, and how many were measured.
type Timing struct {
	// Write and Read copies, from each copy's start to its end.
	Writes, WriteNS, Reads, ReadNS int64
	// Kernels launched (Kernel.Launch) while ProfileKernels was on, from
	// each one's start to its end.
	Kernels, KernelNS int64
	// CLBlast products (Sgemm, SgemmStridedBatched) while ProfileKernels
	// was on. CLBlast may run a product as several kernels (copies of
	// padded operands, the product) and gives the event of the last one
	// only, so a product is timed from a marker queued before it — when
	// the work before it was done — to the end of its last kernel, with
	// other goroutines' commands held back meanwhile (so no command is
	// counted twice). That includes any wait of the device for the host
	// to queue it, such as CLBlast compiling a variant on its first use:
	// warm up first.
	Blas, BlasNS int64
}

// TransferNS is the copies' device time.
func (t Timing) TransferNS() int64 { return t.WriteNS + t.ReadNS }

// Sub is t less an earlier reading u.
func (t Timing) Sub(u Timing) Timing {
	return Timing{t.Writes - u.Writes, t.WriteNS - u.WriteNS, t.Reads - u.Reads, t.ReadNS - u.ReadNS,
		t.Kernels - u.Kernels, t.KernelNS - u.KernelNS, t.Blas - u.Blas, t.BlasNS - u.BlasNS}
}

// of is the count and the time of a kind of command.
func (t *Timing) of(kind int) (n, ns *int64) {
	switch kind {
	case evWrite:
		return &t.Writes, &t.WriteNS
	case evRead:
		return &t.Reads, &t.ReadNS
	case evKernel:
		return &t.Kernels, &t.KernelNS
	}
	return &t.Blas, &t.BlasNS
}

// pendingEvent is a command whose times are not read yet: its event, and
// for a CLBlast product the marker queued before it.
type pendingEvent struct {
	kind       int
	ev, marker uintptr
}

// profiler holds the events not read yet and the sums of those read.
type profiler struct {
	on atomic.Bool // kernels and products are timed (read at every launch)
	// enq keeps other commands out from between a timed product's marker
	// and its kernels, so that the product's span holds only its own
	// commands: while kernels are timed, every other command is queued
	// under its read lock and a timed product under its write lock.
	enq     sync.RWMutex
	mu      sync.Mutex
	pending []pendingEvent
	t       Timing
}

// ProfileKernels turns the timing of kernels and CLBlast products on or
// off (copies are always timed); it applies to the commands queued after
// it.
func (d *Device) ProfileKernels(on bool) { d.prof.on.Store(on) }

func (d *Device) profilingKernels() bool { return d.prof.on.Load() }

// queueing is called before a command other than a timed product is
// queued, and queued after it with what queueing returned.
func (d *Device) queueing() bool {
	if d.prof.on.Load() {
		d.prof.enq.RLock()
		return true
	}
	return false
}

func (d *Device) queued(locked bool) {
	if locked {
		d.prof.enq.RUnlock()
	}
}

// Timing finishes the queue and returns what the device measured so far.
func (d *Device) Timing() (Timing, error) {
	err := d.Finish() // reads the events too
	d.prof.mu.Lock()
	defer d.prof.mu.Unlock()
	return d.prof.t, err
}

// record keeps ev (and a product's marker) to be read once the command is
// complete. Should the host queue many commands without a Read or Finish,
// the queue is finished to keep the list short; events that still cannot
// be read then (a command that failed) are released unread.
func (d *Device) record(kind int, ev, marker uintptr) {
	d.prof.mu.Lock()
	d.prof.pending = append(d.prof.pending, pendingEvent{kind, ev, marker})
	full := len(d.prof.pending) >= maxPendingEvents
	d.prof.mu.Unlock()
	if full {
		_ = d.Finish()
		d.prof.mu.Lock()
		if len(d.prof.pending) >= maxPendingEvents {
			for _, e := range d.prof.pending {
				releaseEvents(e)
			}
			d.prof.pending = d.prof.pending[:0]
		}
		d.prof.mu.Unlock()
	}
}

// collect reads the times of the recorded commands that are complete and
// releases their events; the others stay for a later collect. In the
// in-order queue everything before a Read or Finish is complete once it
// returns.
func (d *Device) collect() {
	p := &d.prof
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := p.pending[:0]
	for _, e := range p.pending {
		var start, end uint64
		ok := eventTime(e.ev, clProfilingCommandEnd, &end)
		if ok && e.marker != 0 {
			ok = eventTime(e.marker, clProfilingCommandEnd, &start)
		} else if ok {
			ok = eventTime(e.ev, clProfilingCommandStart, &start)
		}
		if !ok {
			keep = append(keep, e)
			continue
		}
		ns := int64(end - start)
		if end < start {
			ns = 0 // a clock that went back (never seen): count the command, not a negative time
		}
		n, sum := p.t.of(e.kind)
		*n++
		*sum += ns
		releaseEvents(e)
	}
	clear(p.pending[len(keep):])
	p.pending = keep
}

// eventTime reads one of ev's timestamps; false while the command is not
// complete (or the implementation cannot say).
func eventTime(ev uintptr, param uint32, v *uint64) bool {
	return call(cl.getEventProfilingInfo, ev, uintptr(param), 8, uintptr(unsafe.Pointer(v)), 0) == 0
}

func releaseEvents(e pendingEvent) {
	call(cl.releaseEvent, e.ev)
	if e.marker != 0 {
		call(cl.releaseEvent, e.marker)
	}
}

// dropEvents releases the events not read (Close, after the queue
// finished and what could be read was).
func (d *Device) dropEvents() {
	d.prof.mu.Lock()
	defer d.prof.mu.Unlock()
	for _, e := range d.prof.pending {
		releaseEvents(e)
	}
	d.prof.pending = nil
}

// marker queues a marker and returns its event (0 if it could not be
// queued: the product is then not timed).
func (d *Device) marker() uintptr {
	var ev uintptr
	if call(cl.enqueueMarkerWithWaitList, d.queue, 0, 0, uintptr(unsafe.Pointer(&ev))) != 0 {
		return 0
	}
	return ev
}
