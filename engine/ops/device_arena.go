package ops

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/mkbench/mkbench/internal/opencl"
)

// The device memory of a pool's backbone kernels. The engine builds a
// graph per episode shape, each with a kernel of its own, and Meta-Dataset
// draws a new shape nearly every episode: were each kernel to own its
// device buffers, every episode would allocate them anew and the device
// would hold one set per shape not yet collected. Instead the kernels of
// a pool lease their buffers from the pool's devArena: a pass (Forward,
// and the Backward that follows it) holds one slot of buffers, each grown
// to the largest size asked of it and never shrunk, and gives the slot
// back when the pass is over, for the next kernel to reuse. Kernels whose
// passes overlap — the staged step's task ranges run at once, two models
// may share a pool in tests — hold different slots, so the device holds
// about (passes at once) × (the largest pass), whatever the number of
// shapes.
//
// A pass is over after its Backward, or, for an op no gradient is taken
// of (a summary or evaluation graph), after its Forward (releaseDevice). A
// kernel whose slot was given back cannot run Backward on it: it says so
// instead of reading another pass's activations. What a kernel keeps of
// its own on the device is its kernel objects.
//
// The coupling flows lease their buffers from the same arena, in slots of
// their own kind: a backbone's pass and a flow's pass of one graph overlap,
// and a slot shared by both kinds would grow to the sum of both. A flow's
// Steps, read after its Forward gave the slot back, takes the slot again
// (reclaim) and finds its ω there when no other pass held the slot since.
type devArena struct {
	dev *opencl.Device
	*arenaSlots
}

// arenaSlots are an arena's slots, apart from it so that the cleanup that
// releases their buffers, once the arena's pool and kernels are gone, can
// hold them.
type arenaSlots struct {
	mu    sync.Mutex
	slots []*devSlot
	ids   uint64 // leases handed out
}

func newDevArena(dev *opencl.Device) *devArena {
	a := &devArena{dev: dev, arenaSlots: &arenaSlots{}}
	runtime.AddCleanup(a, (*arenaSlots).releaseAll, a.arenaSlots)
	return a
}

func (s *arenaSlots) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.slots {
		for _, b := range sl.bufs {
			b.Release()
		}
	}
	s.slots = nil
}

// devSlot is one pass's buffers, by role; only the lease holding it
// touches them.
type devSlot struct {
	owner uint64 // the lease holding it; 0 when free
	last  uint64 // the lease that held it last: whose pass its buffers hold
	kind  string // the leases it serves (devLease.kind)
	bufs  map[devRole]*opencl.Buffer
}

// devRole names a buffer of a slot: which kernel family asks (conv,
// resnet), and its index among that family's buffers. A slot serves
// kernels of either family and of any spec; each role's buffer grows to
// the largest length asked of it.
type devRole struct {
	family string
	i      int
}

// deviceArena is p's arena on dev, made on first use. A kernel made for
// another device than the pool's (tests set it by hand), or with no pool,
// gets an arena of its own.
func (p *Pool) deviceArena(dev *opencl.Device) *devArena {
	if p == nil || p.dev != dev {
		return newDevArena(dev)
	}
	if a := p.arena.Load(); a != nil {
		return a
	}
	p.arena.CompareAndSwap(nil, newDevArena(dev))
	return p.arena.Load()
}

// devLease is a kernel's claim on its arena's slots.
type devLease struct {
	arena *devArena
	id    uint64
	kind  string   // the slots it takes: "" the backbones', "flow" the flows'
	slot  *devSlot // the slot last held; held while slot.owner == id
}

// joinArena makes *l, a field of owner (a kernel core), a lease of a,
// whose slot is given back if owner is collected while holding it (a
// Forward whose Backward never came).
func joinArena[T any](owner *T, l *devLease, a *devArena) {
	a.mu.Lock()
	a.ids++
	l.arena, l.id = a, a.ids
	a.mu.Unlock()
	runtime.AddCleanup(owner, func(k devLeaseKey) { k.arena.free(k.id) }, devLeaseKey{a, l.id})
}

type devLeaseKey struct {
	arena *devArena
	id    uint64
}

// claim makes l hold a slot for a pass: the one it holds, else a free one
// (the one it held last if it is free, so a kernel run again finds its
// buffers), else a new one.
func (l *devLease) claim() {
	a := l.arena
	a.mu.Lock()
	defer a.mu.Unlock()
	l.claimLocked()
}

func (l *devLease) claimLocked() {
	a := l.arena
	if l.slot != nil && (l.slot.owner == l.id || l.slot.owner == 0) {
		l.slot.owner, l.slot.last = l.id, l.id
		return
	}
	for _, s := range a.slots {
		if s.owner == 0 && s.kind == l.kind {
			s.owner, s.last, l.slot = l.id, l.id, s
			return
		}
	}
	l.slot = &devSlot{owner: l.id, last: l.id, kind: l.kind, bufs: map[devRole]*opencl.Buffer{}}
	a.slots = append(a.slots, l.slot)
}

// reclaim makes l hold the slot of its last claim again when no other
// lease has held it since, so that its buffers still hold l's last pass,
// and says so; else it claims a slot as claim does and returns false.
func (l *devLease) reclaim() bool {
	a := l.arena
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := l.slot; s != nil && s.last == l.id && (s.owner == 0 || s.owner == l.id) {
		s.owner = l.id
		return true
	}
	l.claimLocked()
	return false
}

// holds says whether l still holds the slot of its last claim.
func (l *devLease) holds() bool {
	if l.arena == nil || l.slot == nil {
		return false
	}
	l.arena.mu.Lock()
	defer l.arena.mu.Unlock()
	return l.slot.owner == l.id
}

// release gives l's slot back (if it holds one).
func (l *devLease) release() {
	if l.arena != nil {
		l.arena.free(l.id)
	}
}

func (a *devArena) free(id uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.slots {
		if s.owner == id {
			s.owner = 0
		}
	}
}

// devBuf is the held slot's buffer for role, of at least n elements of T:
// the one there when it is long enough, else a new one replacing it.
func devBuf[T opencl.Element](l *devLease, role devRole, n int) (*opencl.Buffer, error) {
	s := l.slot
	if b := s.bufs[role]; b != nil && b.Len() >= n {
		return b, nil
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("%s on %s: a buffer of %d values is past the kernels' 32-bit indices: use fewer images a batch", role.family, l.arena.dev.Info.Name, n)
	}
	s.bufs[role].Release()
	delete(s.bufs, role)
	b, err := opencl.Alloc[T](l.arena.dev, max(n, 1))
	if err != nil {
		return nil, err
	}
	s.bufs[role] = b
	return b, nil
}

// errDevReleased is Backward's error when the pass's slot went to another
// kernel (the op said no gradient would be taken) or the Forward failed.
func errDevReleased(family string) error {
	return fmt.Errorf("%s on the device: Backward after the forward pass's buffers were given back (an op without gradients, or a failed Forward): run Forward again", family)
}

// Roles of a convDev's buffers.
const (
	convRoleAct = iota
	convRoleCol
	convRoleZ
	convRoleGA
	convRoleGB
	convRolePart
	convRoleW
	convRoleSum
	convRoleArg
	convRoleDrop
)

// bind claims the core's arena slot for a pass and points its buffers at
// the slot's, grown to what d.need asks (resize sets it for N images).
func (d *convDev) bind() error {
	if d.lease.arena == nil { // a core made without its kernel's pool (tests)
		joinArena(d, &d.lease, newDevArena(d.dev))
	}
	d.lease.claim()
	r, n := d.r, d.need
	var err error
	get := func(i, n int) *opencl.Buffer {
		if err != nil {
			return nil
		}
		var b *opencl.Buffer
		if i == convRoleArg || i == convRoleDrop {
			b, err = devBuf[uint8](&d.lease, devRole{"conv", i}, n)
		} else {
			b, err = devBuf[float32](&d.lease, devRole{"conv", i}, n)
		}
		return b
	}
	r.act, r.col, r.z = get(convRoleAct, n.act), get(convRoleCol, n.col), get(convRoleZ, n.z)
	r.gA, r.gB, r.part = get(convRoleGA, n.g), get(convRoleGB, n.g), get(convRolePart, n.part)
	r.arg, r.drop = get(convRoleArg, n.arg), get(convRoleDrop, n.drop)
	if d.res == nil {
		// Without resident parameters the weights go up each pass and
		// the gradient sums come down within it.
		r.w, r.sum = get(convRoleW, d.wLen), get(convRoleSum, d.part)
	}
	if err != nil {
		d.lease.release()
	}
	return err
}

// shareDevice makes the kernel's device core lease its buffers from the
// pool's arena, once.
func (k *ConvKernel) shareDevice() {
	if d := k.dev; d != nil && d.lease.arena == nil {
		joinArena(d, &d.lease, k.pool.deviceArena(k.device))
	}
}

// releaseDevice ends a pass no Backward will follow (the op's graph takes
// no gradient of it): the core's arena slot goes back for other kernels,
// and a Backward would refuse.
func (k *ConvKernel) releaseDevice() {
	if k.dev != nil && k.cur == k.dev {
		k.dev.lease.release()
	}
}

// Roles of a resDev's buffers: these, then each convolution's output from
// resRoleZ, each block's two activations from resRoleH and resRoleOut.
const (
	resRoleX = iota
	resRoleW
	resRoleGW
	resRoleCol
	resRoleS
	resRoleCF
	resRoleStem
	resRolePool
	resRoleGF
	resRoleGB0
	resRoleGB1
	resRoleGH
	resRolePart
	resRoleGX
	resRoleArg
	resRoleEpi
	resRoleZ   = 1 << 10
	resRoleH   = 2 << 10
	resRoleOut = 3 << 10
)

// bind claims the core's arena slot for a pass and points its buffers at
// the slot's, grown to what d.need asks (resize sets it for N images).
func (d *resDev) bind() error {
	if d.lease.arena == nil { // a core made without its kernel's pool (tests)
		joinArena(d, &d.lease, newDevArena(d.dev))
	}
	d.lease.claim()
	n := d.need
	N := n.N
	var err error
	a := func(role, n int) *opencl.Buffer {
		if err != nil {
			return nil
		}
		var b *opencl.Buffer
		b, err = devBuf[float32](&d.lease, devRole{"resnet", role}, n)
		return b
	}
	d.x, d.col = a(resRoleX, N*d.spec.InDim()), a(resRoleCol, n.col)
	if d.res == nil { // resident weights and their gradients are the store's
		d.w, d.gw = a(resRoleW, d.wLen), a(resRoleGW, d.wLen)
	}
	d.s, d.cf = a(resRoleS, 2*N*n.cmax), a(resRoleCF, n.cf)
	d.stem, d.pool = a(resRoleStem, N*d.pl.pin), a(resRolePool, N*d.pl.pou)
	d.gf = a(resRoleGF, N*d.spec.Widths[3])
	for l, cv := range d.cv {
		d.z[l] = a(resRoleZ+l, N*cv.po*cv.Out)
	}
	d.src[0] = d.x
	in := d.pool
	for b, bl := range d.blk {
		c1 := d.cv[bl.c1]
		d.h[b], d.out[b] = a(resRoleH+b, N*c1.po*c1.Out), a(resRoleOut+b, N*c1.po*c1.Out)
		d.src[bl.c1], d.src[bl.c2] = in, d.h[b]
		if bl.proj >= 0 {
			d.src[bl.proj] = in
		}
		in = d.out[b]
	}
	d.gb = [2]*opencl.Buffer{a(resRoleGB0, N*n.gmax), a(resRoleGB1, N*n.gmax)}
	d.gh = a(resRoleGH, N*n.hmax)
	if err == nil {
		d.arg, err = devBuf[uint8](&d.lease, devRole{"resnet", resRoleArg}, N*d.pl.pou)
	}
	if err == nil {
		d.epi, err = devBuf[int32](&d.lease, devRole{"resnet", resRoleEpi}, 2*N)
	}
	d.part, d.gx = nil, nil // the backward pass's, bound as it needs them
	if err != nil {
		d.lease.release()
	}
	return err
}

// resDevBuf is the held slot's float32 buffer for role, of at least n
// values, for the backward pass's buffers (the weight products' parts, the
// input gradient).
func (d *resDev) resDevBuf(role, n int) (*opencl.Buffer, error) {
	return devBuf[float32](&d.lease, devRole{"resnet", role}, n)
}

// shareDevice makes the kernel's device core lease its buffers from the
// pool's arena, once.
func (k *ResNetKernel) shareDevice() {
	if d := k.cdev; d != nil && d.lease.arena == nil {
		joinArena(d, &d.lease, k.pool.deviceArena(k.dev))
	}
}

// releaseDevice ends a pass no Backward will follow (see
// ConvKernel.releaseDevice).
func (k *ResNetKernel) releaseDevice() {
	if k.cdev != nil && k.cur == k.cdev {
		k.cdev.lease.release()
	}
}

// releaseDevice ends a flow's pass no Backward will follow (see
// ConvKernel.releaseDevice); Steps can still read its ω.
func (k *FlowKernel) releaseDevice() {
	if k.dev != nil && k.cur == k.dev {
		k.dev.lease.release()
	}
}
