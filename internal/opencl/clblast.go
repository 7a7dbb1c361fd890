package opencl

import (
	"fmt"
	"sync"
)

// blastMu makes CLBlast's calls one at a time in the process. CLBlast
// compiles and caches a kernel on a variant's first use, and two first
// uses at once (the staged step's two task stages) were seen to fail
// inside it (std::bad_alloc, CLBlastUnexpectedError) under the race
// detector. A call only queues the product, so holding the lock costs
// microseconds once the cache is warm.
var blastMu sync.Mutex

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on d's queue with CLBlast,
// row-major: op(A) is m×k, op(B) k×n, C m×n; op(X) is X transposed when
// trans says so; offsets and leading dimensions are in elements. It
// returns once the product is queued. CLBlast is loaded on first use
// (LoadCLBlast); its status codes come back as *Error with their names
// (CLBlastInsufficientMemoryA: A's buffer is too small for m, k, lda…).
func (d *Device) Sgemm(transA, transB bool, m, n, k int, alpha float32,
	a *Buffer, offA, lda int, b *Buffer, offB, ldb int,
	beta float32, c *Buffer, offC, ldc int) error {
	if err := d.gemmArgs(a, b, c, m, n, k, 1, offA, lda, offB, ldb, offC, ldc); err != nil {
		return err
	}
	blastMu.Lock()
	defer blastMu.Unlock()
	ev, marker := d.blastEvent()
	st := blast.sgemm(clblastRowMaj, trans(transA), trans(transB), uintptr(m), uintptr(n), uintptr(k), alpha,
		a.h, uintptr(offA), uintptr(lda), b.h, uintptr(offB), uintptr(ldb), beta,
		c.h, uintptr(offC), uintptr(ldc), &d.queue, ev)
	return d.blastDone("CLBlastSgemm", st, marker)
}

// SgemmStridedBatched computes batch products as Sgemm does, the i-th on
// the matrices at offA+i·strideA, offB+i·strideB and offC+i·strideC
// (CLBlastSgemmStridedBatched: one launch for all of them).
func (d *Device) SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32,
	a *Buffer, offA, lda, strideA int, b *Buffer, offB, ldb, strideB int,
	beta float32, c *Buffer, offC, ldc, strideC int, batch int) error {
	if err := d.gemmArgs(a, b, c, m, n, k, batch, offA, lda, offB, ldb, offC, ldc, strideA, strideB, strideC); err != nil {
		return err
	}
	blastMu.Lock()
	defer blastMu.Unlock()
	ev, marker := d.blastEvent()
	st := blast.sgemmStridedBatched(clblastRowMaj, trans(transA), trans(transB), uintptr(m), uintptr(n), uintptr(k), alpha,
		a.h, uintptr(offA), uintptr(lda), uintptr(strideA), b.h, uintptr(offB), uintptr(ldb), uintptr(strideB), beta,
		c.h, uintptr(offC), uintptr(ldc), uintptr(strideC), uintptr(batch), &d.queue, ev)
	return d.blastDone("CLBlastSgemmStridedBatched", st, marker)
}

// blastEvent is where CLBlast writes its product's event, and the marker
// queued before it, while kernels are timed (nil and 0 otherwise); blastMu
// is held, and no other command is queued until blastDone.
func (d *Device) blastEvent() (*uintptr, uintptr) {
	if !d.profilingKernels() {
		return nil, 0
	}
	d.prof.enq.Lock() // blastDone unlocks
	m := d.marker()
	if m == 0 {
		d.prof.enq.Unlock()
		return nil, 0
	}
	d.blastEv = 0
	return &d.blastEv, m
}

// blastDone turns CLBlast's status into an error, and records the
// product's event (or releases the marker of a product not queued).
func (d *Device) blastDone(op string, st int32, marker uintptr) error {
	if marker != 0 {
		d.prof.enq.Unlock()
		if st == 0 && d.blastEv != 0 {
			d.record(evBlas, d.blastEv, marker)
		} else {
			call(cl.releaseEvent, marker)
		}
	}
	if st != 0 {
		return &Error{Op: op, Status: Status(st)}
	}
	return nil
}

func trans(t bool) uint32 {
	if t {
		return clblastTr
	}
	return clblastNoTr
}

// gemmArgs refuses what CLBlast cannot be handed at all: a library that
// does not load, buffers that are not float32 on d or are released, and
// negative sizes (which would wrap to huge size_t values). Whether the
// buffers are large enough CLBlast checks, with named errors.
func (d *Device) gemmArgs(a, b, c *Buffer, m, n, k, batch int, ints ...int) error {
	if err := LoadCLBlast(); err != nil {
		return err
	}
	for _, x := range [3]*Buffer{a, b, c} {
		if x == nil || x.h == 0 || x.kind != "float32" || x.dev != d {
			return fmt.Errorf("opencl: sgemm needs three live float32 buffers on %s", d.Info.Name)
		}
	}
	if m <= 0 || n <= 0 || k <= 0 || batch <= 0 {
		return fmt.Errorf("opencl: sgemm of m=%d n=%d k=%d batch=%d: each must be at least 1", m, n, k, batch)
	}
	for _, v := range ints {
		if v < 0 {
			return fmt.Errorf("opencl: sgemm with a negative offset, leading dimension or stride (%d)", v)
		}
	}
	return nil
}
