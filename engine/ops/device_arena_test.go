package ops

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/opencl"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// arenaEpisode is a Meta-Dataset-like episode's image counts: way 5–20,
// each class 1–5 support images, 2 query images a class.
type arenaEpisode struct{ support, query int }

func arenaEpisodes(n int, seed uint64) []arenaEpisode {
	rng := rand.New(rand.NewPCG(seed, 5))
	eps := make([]arenaEpisode, n)
	for i := range eps {
		way := 5 + rng.IntN(16)
		for range way {
			eps[i].support += 1 + rng.IntN(5)
		}
		eps[i].query = 2 * way
	}
	return eps
}

// arenaGraph is a graph of one ConvNet op on n images, as the engine
// builds one per episode shape: with grad, loss = Σ ψ(x) ⊙ R and its
// gradients (a task graph), without, ψ(x) alone (a summary graph, which
// runs forward only).
func arenaGraph(t testing.TB, pool *Pool, spec ConvSpec, n int, grad bool, rng *rand.Rand) G.VM {
	t.Helper()
	g := G.NewGraph()
	net, err := NewConvNet(pool, spec)
	if err != nil {
		t.Fatal(err)
	}
	net.SetStep(rng.Uint64(), true)
	val := func(shape ...int) *tensor.Dense {
		size := 1
		for _, d := range shape {
			size *= d
		}
		v := make([]float64, size)
		for i := range v {
			v[i] = rng.NormFloat64() * 0.3
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
	}
	x := G.NewMatrix(g, G.Float64, G.WithShape(n, spec.InDim()), G.WithName("x"), G.WithValue(val(n, spec.InDim())))
	var ws, bs, params []*G.Node
	for l := range spec.Blocks {
		ws = append(ws, G.NewMatrix(g, G.Float64, G.WithShape(spec.Filters, spec.FanIn(l)), G.WithName("w"+string(rune('0'+l))), G.WithValue(val(spec.Filters, spec.FanIn(l)))))
		bs = append(bs, G.NewVector(g, G.Float64, G.WithShape(spec.Filters), G.WithName("b"+string(rune('0'+l))), G.WithValue(val(spec.Filters))))
	}
	out, err := net.Apply(x, ws, bs)
	if err != nil {
		t.Fatal(err)
	}
	if !grad {
		return G.NewTapeMachine(g)
	}
	r := G.NewMatrix(g, G.Float64, G.WithShape(n, spec.OutDim()), G.WithName("R"), G.WithValue(val(n, spec.OutDim())))
	loss, err := G.Sum(must(G.HadamardProd(out, r)))
	if err != nil {
		t.Fatal(err)
	}
	params = append(append(params, ws...), bs...)
	if _, err := G.Grad(loss, params...); err != nil {
		t.Fatal(err)
	}
	return G.NewTapeMachine(g, G.BindDualValues(params...))
}

func must(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return n
}

// arenaSpec is a Conv-4-like net small enough for PoCL at a hundred
// images an episode.
var arenaSpec = ConvSpec{Channels: 1, Height: 12, Width: 12, Blocks: 3, Filters: 8, Keep: 0.9}

// runArenaEpisodes runs eps as the engine runs varying episodes: per
// episode a summary graph (the support images, forward only) and a task
// graph (every image, forward and backward), both new, the previous
// episode's graphs closed and dropped. It returns the device's buffer
// count after each episode and its live bytes at the end.
func runArenaEpisodes(t *testing.T, dev *opencl.Device, eps []arenaEpisode) (allocs []int64, live int64) {
	t.Helper()
	pool := &Pool{}
	pool.SetDevice(dev)
	rng := rand.New(rand.NewPCG(1, 2))
	var prev []G.VM
	for _, e := range eps {
		for _, vm := range prev {
			vm.Close()
		}
		sum := arenaGraph(t, pool, arenaSpec, e.support, false, rng)
		task := arenaGraph(t, pool, arenaSpec, e.support+e.query, true, rng)
		for _, vm := range []G.VM{sum, task} {
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
		}
		prev = []G.VM{sum, task}
		allocs = append(allocs, dev.MemStats().Allocs)
	}
	return allocs, dev.MemStats().Live
}

// Varying episodes reuse the pool's device buffers, which grow: once the
// largest episode has run, no episode allocates on the device, and the
// device holds about what the largest episode alone needs, not the sum
// over shapes (each graph's op has a kernel of its own).
func TestDeviceArenaVaryingEpisodes(t *testing.T) {
	checkArenaReuse(t, arenaEpisodes(30, 7), func(dev *opencl.Device, eps []arenaEpisode) ([]int64, int64) {
		return runArenaEpisodes(t, dev, eps)
	})
}

// checkArenaReuse runs eps through run on a test device and fails t if an
// episode no larger than one before it made a device buffer, or if the
// device holds more than 1.1× what the largest episode alone needs (run
// on a fresh device). run returns the device's allocation count after
// each episode and the bytes it holds at the end.
func checkArenaReuse(t *testing.T, eps []arenaEpisode, run func(dev *opencl.Device, eps []arenaEpisode) (allocs []int64, live int64)) {
	t.Helper()
	dev := testDevice(t)
	base := dev.MemStats()
	allocs, live := run(dev, eps)
	live -= base.Live
	big := eps[0]
	for _, e := range eps {
		if e.support+e.query > big.support+big.query {
			big = e
		}
	}
	_, alone := run(testDevice(t), []arenaEpisode{big})
	t.Logf("after %d episodes (%d–%d images): %d buffers made, %d bytes held; the largest episode alone: %d bytes",
		len(eps), minImages(eps), big.support+big.query, allocs[len(allocs)-1]-base.Allocs, live, alone)
	top := 0
	for i, e := range eps {
		n := e.support + e.query
		if i > 0 && n <= top && allocs[i] != allocs[i-1] {
			t.Errorf("episode %d (%d images, %d seen before) made %d device buffers", i, n, top, allocs[i]-allocs[i-1])
		}
		top = max(top, n)
	}
	if float64(live) > 1.1*float64(alone) {
		t.Errorf("the device holds %d bytes after %d episodes, the largest alone %d: want at most 1.1×", live, len(eps), alone)
	}
}

func minImages(eps []arenaEpisode) int {
	m := eps[0].support + eps[0].query
	for _, e := range eps {
		m = min(m, e.support+e.query)
	}
	return m
}

// Passes that overlap on one pool (the staged step's task ranges) hold
// different slots: two kernels run forward, then backward, interleaved,
// give the bytes each gives alone; and once both are done, a third pass
// reuses a slot instead of making one.
func TestDeviceArenaOverlappingPasses(t *testing.T) {
	dev := testDevice(t)
	pool := &Pool{}
	pool.SetDevice(dev)
	spec := arenaSpec
	pa, pb := newConvProblem(spec, 9, 1), newConvProblem(spec, 14, 2)
	alone := func(p *convProblem) ([]float64, [][]float64, [][]float64) {
		k, err := NewConvKernel(pool, spec)
		if err != nil {
			t.Fatal(err)
		}
		return p.run(t, k, 3, true)
	}
	oa, ga, ba := alone(pa)
	ob, gb, bb := alone(pb)
	ka, _ := NewConvKernel(pool, spec)
	kb, _ := NewConvKernel(pool, spec)
	outA, outB := pa.forward(t, ka, 3, true), pb.forward(t, kb, 3, true)
	gwa, gba := pa.backward(t, ka)
	gwb, gbb := pb.backward(t, kb)
	convDevCompare(t, "first of two at once", 0, [][]float64{outA}, gwa, gba, [][]float64{oa}, ga, ba)
	convDevCompare(t, "second of two at once", 0, [][]float64{outB}, gwb, gbb, [][]float64{ob}, gb, bb)
	if n := len(pool.arena.Load().slots); n != 2 {
		t.Errorf("two overlapping passes: %d slots, want 2", n)
	}
	before := dev.MemStats().Allocs
	alone(pa)
	if n, a := len(pool.arena.Load().slots), dev.MemStats().Allocs; n != 2 || a != before {
		t.Errorf("a third pass after both: %d slots and %d new buffers, want 2 and none", n, a-before)
	}
}

// A pass the op ends after Forward (no gradient taken of it) gives its
// slot back; a Backward then refuses in one line instead of reading what
// the next pass wrote there.
func TestDeviceArenaBackwardAfterRelease(t *testing.T) {
	dev := testDevice(t)
	pool := &Pool{}
	pool.SetDevice(dev)
	p := newConvProblem(arenaSpec, 6, 3)
	k, _ := NewConvKernel(pool, arenaSpec)
	p.forward(t, k, 1, true)
	k.releaseDevice()
	other, _ := NewConvKernel(pool, arenaSpec)
	p.forward(t, other, 2, true)
	if n := len(pool.arena.Load().slots); n != 1 {
		t.Fatalf("a pass after a released one: %d slots, want 1", n)
	}
	gws, gbs := p.grads()
	err := k.Backward(p.r, gws, gbs)
	if err == nil || !strings.Contains(err.Error(), "given back") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Backward after the slot went back: %v, want one line saying so", err)
	}
}

// grads is zeroed storage for every block's weight and bias gradients.
func (p *convProblem) grads() (gws, gbs [][]float64) {
	gws, gbs = make([][]float64, p.spec.Blocks), make([][]float64, p.spec.Blocks)
	for l := range gws {
		gws[l] = make([]float64, len(p.ws[l]))
		gbs[l] = make([]float64, len(p.bs[l]))
	}
	return gws, gbs
}

// backward runs k's Backward on p's output gradient.
func (p *convProblem) backward(t testing.TB, k *ConvKernel) (gws, gbs [][]float64) {
	t.Helper()
	gws, gbs = p.grads()
	if err := k.Backward(p.r, gws, gbs); err != nil {
		t.Fatal(err)
	}
	return gws, gbs
}

// The ResNet's device core shares its pool's arena the same way: per
// varying episode a new kernel for the support images (forward only, its
// slot given back as its op does) and one for the whole episode (forward
// and backward); once the largest episode has run, no episode allocates,
// and the device holds what the largest episode alone needs.
func TestDeviceArenaVaryingResNet(t *testing.T) {
	spec := ResNetSpec{Channels: 3, Height: 16, Width: 16, Widths: [4]int{4, 4, 8, 8}, Out: 4}
	run := func(dev *opencl.Device, eps []arenaEpisode) (allocs []int64, live int64) {
		pool := &Pool{}
		pool.SetDevice(dev)
		for i, e := range eps {
			sum, err := NewResNetKernel(pool, spec)
			if err != nil {
				t.Fatal(err)
			}
			ps := newResProblem(spec, BNLayout{Episodes: 1, Support: e.support}, uint64(i))
			ps.forward(t, sum, BNTrain)
			sum.releaseDevice()
			task, err := NewResNetKernel(pool, spec)
			if err != nil {
				t.Fatal(err)
			}
			newResProblem(spec, BNLayout{Episodes: 1, Support: e.support, Query: e.query}, uint64(i)).run(t, task, BNTrain)
			allocs = append(allocs, dev.MemStats().Allocs)
		}
		return allocs, dev.MemStats().Live
	}
	checkArenaReuse(t, arenaEpisodes(12, 8), run)
}
