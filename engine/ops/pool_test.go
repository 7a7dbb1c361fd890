package ops

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestPoolForRunsEachIndexOnce(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var p *Pool // nil: all cores
	for _, tc := range []struct{ n, work int }{{0, 0}, {1, 1 << 30}, {7, 0}, {7, 1 << 30}, {100, 1 << 30}} {
		counts := make([]int32, tc.n)
		p.For(tc.n, float64(tc.work), func(i int) { atomic.AddInt32(&counts[i], 1) })
		for i, c := range counts {
			if c != 1 {
				t.Fatalf("n=%d work=%d: index %d ran %d times", tc.n, tc.work, i, c)
			}
		}
	}
}

// While a pool's stages run, its ops get one worker each; another pool,
// another model's, keeps all cores.
func TestPoolStagesArePerPool(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var mine, other Pool
	var mu sync.Mutex
	var inside, outside []int
	mine.Stages(2, func(r int) {
		mu.Lock()
		defer mu.Unlock()
		inside = append(inside, mine.Workers())
		outside = append(outside, other.Workers())
	})
	if len(inside) != 2 {
		t.Fatalf("%d stages ran, want 2", len(inside))
	}
	for i := range inside {
		if inside[i] != 1 || outside[i] != 2 {
			t.Fatalf("during the stages: workers %d in the pool, %d in another; want 1 and 2", inside[i], outside[i])
		}
	}
	if w := mine.Workers(); w != 2 {
		t.Fatalf("after the stages: %d workers, want 2", w)
	}
	// One stage alone keeps the cores.
	mine.Stages(1, func(int) { inside[0] = mine.Workers() })
	if inside[0] != 2 {
		t.Fatalf("in a single stage: %d workers, want 2", inside[0])
	}
}

// A team runs every index once, in either order, and reuses its helpers.
func TestTeamRunsEachIndexOnce(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	owner := new(int)
	tm := newTeam(nil, owner)
	for _, rev := range []bool{false, true} {
		for _, n := range []int{1, 2, 9} {
			counts := make([]int32, n)
			tm.parallel(n, rev, funcJob(func(i int) { atomic.AddInt32(&counts[i], 1) }))
			for i, c := range counts {
				if c != 1 {
					t.Fatalf("n=%d rev=%v: index %d ran %d times", n, rev, i, c)
				}
			}
		}
	}
	if tm.helpers != 1 {
		t.Fatalf("%d helpers on 2 cores, want 1", tm.helpers)
	}
	runtime.KeepAlive(owner)
}
