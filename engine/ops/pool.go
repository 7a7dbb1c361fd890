package ops

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/mkbench/mkbench/internal/opencl"
)

// Pool is the parallelism of one model: the one place where the engine
// spreads work over goroutines. Every loop it runs gives each index wholly
// to one goroutine and lets kernels split their work at fixed points, so
// results never depend on how many goroutines ran it; only speed does.
//
// A model runs its training step as concurrent stages (Stages); while more
// than one runs, each already has a core, and ops that split their own work
// over more goroutines only add wake-ups, so the ops of that model then run
// on one goroutine (Workers). The count is per Pool, so one model's stages
// never slow down another model's ops. The zero value is ready to use; a
// nil *Pool is a pool that never runs stages (all cores for every op), which
// is what tests and single ops use.
type Pool struct {
	stages atomic.Int32
	// dev, when set, is the OpenCL device the image backbones run on
	// (device.go); nil runs everything on the CPU.
	dev *opencl.Device
	// arena is the device memory its backbone kernels share
	// (device_arena.go), made on first use.
	arena atomic.Pointer[devArena]
}

// parallelMinWork is the estimated work (flops or inner-loop operations,
// about a nanosecond each) below which For stays on the calling goroutine.
// Waking a goroutine on the idle core was measured at tens to ~100 µs on
// the 2-core machine: 6 KRR tasks of n=25 (~70k flops) and the sine-sized
// RBF kernel (~100k) gained nothing from a second worker, 6 tasks of n=100
// (~4M) ran 1.3× faster.
const parallelMinWork = 250000

// Workers is how many goroutines an op may spread its work over:
// GOMAXPROCS, or 1 while more than one of the pool's stages run. It is a
// scheduling hint: results do not depend on it.
func (p *Pool) Workers() int {
	if p != nil && p.stages.Load() > 1 {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// For calls fn(t) for every t in [0, n) on up to Workers goroutines (the
// caller's included) when work, the estimated total cost, is worth it.
// Each index runs entirely on one goroutine, so a kernel that writes only
// index-t data is bit-identical whatever the number of workers.
func (p *Pool) For(n int, work float64, fn func(t int)) {
	workers := min(p.Workers(), n)
	if workers <= 1 || work < parallelMinWork {
		for t := range n {
			fn(t)
		}
		return
	}
	var next atomic.Int32
	run := func() { claim(&next, n, false, funcJob(fn)) }
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
}

// claim runs j for indices claimed one at a time from next until all n
// are taken, in decreasing order of i if rev.
func claim(next *atomic.Int32, n int, rev bool, j job) {
	for {
		i := int(next.Add(1)) - 1
		if i >= n {
			return
		}
		if rev {
			i = n - 1 - i
		}
		j.run(i)
	}
}

// Stages runs fn(r) for every r in [0, n), each on a goroutine of its own
// (the last on the caller's), and counts them as running stages until all
// have returned (see Workers). p must not be nil, and fn must not panic:
// a stage recovers its own panics.
func (p *Pool) Stages(n int, fn func(r int)) {
	p.stages.Add(int32(n))
	defer p.stages.Add(-int32(n))
	var wg sync.WaitGroup
	for r := range n - 1 {
		wg.Go(func() { fn(r) })
	}
	fn(n - 1)
	wg.Wait()
}

// job is the body of a team's loop. Jobs are methods of long-lived values,
// so that starting a loop allocates nothing.
type job interface{ run(i int) }

// funcJob makes a function a job.
type funcJob func(i int)

func (f funcJob) run(i int) { f(i) }

// team runs the parallel loops of one kernel (the coupling flow's, the
// convolution's) on the pool's workers without allocating: its helper
// goroutines are started on first need and then parked between loops.
// They hold only the team, and a cleanup on the kernel that owns it closes
// start (ending them) once the kernel is unreachable. Indices are claimed
// dynamically, which is safe for determinism because every job writes
// only memory of its own (a chunk's scratch, partials and rows, or one
// block's parameters).
type team struct {
	pool    *Pool
	n       int
	rev     bool
	job     job
	next    atomic.Int32
	wg      sync.WaitGroup
	start   chan struct{}
	helpers int
}

// newTeam returns a team for owner, a kernel core, whose helpers end once
// owner is unreachable.
func newTeam[T any](p *Pool, owner *T) *team {
	t := &team{pool: p, start: make(chan struct{})}
	runtime.AddCleanup(owner, func(start chan struct{}) { close(start) }, t.start)
	return t
}

func (t *team) work() { claim(&t.next, t.n, t.rev, t.job) }

func (t *team) helper() {
	for range t.start {
		t.work()
		t.wg.Done()
	}
}

// parallel runs j.run(i) for i < n, in decreasing order of i if rev.
func (t *team) parallel(n int, rev bool, j job) {
	w := min(t.pool.Workers(), n)
	t.n, t.rev, t.job = n, rev, j
	t.next.Store(0)
	for ; t.helpers < w-1; t.helpers++ {
		go t.helper()
	}
	t.wg.Add(w - 1)
	for i := 0; i < w-1; i++ {
		t.start <- struct{}{}
	}
	t.work()
	t.wg.Wait()
	t.job = nil
}
