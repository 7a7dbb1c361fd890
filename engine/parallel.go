package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelMinWork is the estimated work (flops or inner-loop operations,
// about a nanosecond each) below which forTasks stays on the calling
// goroutine. Waking a goroutine on the idle core was measured at tens to
// ~100 µs on the 2-core machine: 6 KRR tasks of n=25 (~70k flops) and the
// sine-sized RBF kernel (~100k) gained nothing from a second worker, 6 tasks
// of n=100 (~4M) ran 1.3× faster.
const parallelMinWork = 250000

// forTasks calls fn(t) for every t in [0, n) on up to GOMAXPROCS goroutines
// (the caller included) when work, the estimated total cost, is worth it.
// Each index runs entirely on one goroutine, so a kernel that writes only
// index-t data is bit-identical whatever GOMAXPROCS is; only the number of
// workers depends on it.
func forTasks(n int, work float64, fn func(t int)) {
	workers := min(opWorkers(), n)
	if workers <= 1 || work < parallelMinWork {
		for t := range n {
			fn(t)
		}
		return
	}
	var next atomic.Int64
	run := func() {
		for {
			t := int(next.Add(1)) - 1
			if t >= n {
				return
			}
			fn(t)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
}

// stagesRunning counts back stages running concurrently (see staged). While
// they run, each already has a core, and ops that split their own work over
// more goroutines only add wake-ups: opWorkers is then 1. It is a
// scheduling hint: results do not depend on the number of workers.
var stagesRunning atomic.Int32

// opWorkers is how many goroutines an op may spread its work over.
func opWorkers() int {
	if stagesRunning.Load() > 1 {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}
