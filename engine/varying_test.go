package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// varyBlobs is blobs with Meta-Dataset's kind of episodes: each draws its
// way (2 … maxWay), each class's shots (1 … maxShot) and one query size.
type varyBlobs struct {
	blobs
	maxShot, maxQuery int
}

func (s varyBlobs) Sample(*rand.Rand, *task.Batch) { panic("varyBlobs: Sample") }

func (s varyBlobs) SampleVarying(rng *rand.Rand, b *task.Batch) {
	way := 2 + rng.IntN(s.way-1)
	shots := make([]int, way)
	for c := range shots {
		shots[c] = 1 + rng.IntN(s.maxShot)
	}
	sampleUneven(rng, b, shots, 1+rng.IntN(s.maxQuery), s.InDim())
}

// sampleUneven fills b with one episode of len(shots) classes, shots[c]
// support rows of class c and q query rows a class, each row its class's
// template plus noise.
func sampleUneven(rng *rand.Rand, b *task.Batch, shots []int, q, in int) {
	way, ns := len(shots), 0
	for _, k := range shots {
		ns += k
	}
	b.Resize(1, ns, way*q, in, way)
	tmpl := make([]float64, way*in)
	for i := range tmpl {
		tmpl[i] = math.Max(0, rng.NormFloat64())
	}
	row := func(x, y []float64, r, c int) {
		for k := 0; k < in; k++ {
			x[r*in+k] = tmpl[c*in+k] + 0.5*rng.NormFloat64()
		}
		clear(y[r*way : (r+1)*way])
		y[r*way+c] = 1
	}
	r := 0
	for c, k := range shots {
		for range k {
			row(b.XS, b.YS, r, c)
			r++
		}
	}
	for i := 0; i < way*q; i++ {
		row(b.XQ, b.YQ, i, i%way)
	}
}

func varyConfig(variant string) Config {
	c := classConfig(variant, 0.9)
	c.Varying = true
	c.Way, c.Shot, c.Query = 4, 12, 2 // bounds: 4 classes of ≤ 3 shots
	c.MetaBatch = 1
	return c
}

// A varying episode (shots differ between classes) against finite
// differences, through the per-class means of yw.
func TestVaryingGradientMatchesFiniteDifferences(t *testing.T) {
	for _, v := range []string{"rbf", "vrf", "metakernel"} {
		t.Run(v, func(t *testing.T) {
			m, err := NewModel(varyConfig(v), varyBlobs{blobs{way: 4, side: 7}, 3, 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkModelFD(t, m, rand.New(rand.NewPCG(13, 0)))
		})
	}
}

// An episode of equal shots computes the same in a varying graph (yw) as
// in the fixed one (Ys / shot), to the bit.
func TestVaryingGraphOfBalancedEpisodeMatchesFixed(t *testing.T) {
	cfg := classConfig("metakernel", 0.9)
	m, err := NewModel(cfg, blobs{way: 3, side: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	randomizeModel(m, rand.New(rand.NewPCG(3, 0)))
	in := &m.bufs[0]
	m.prepare(0, in, nil)
	var losses []float64
	for _, sh := range []shape{
		{T: cfg.MetaBatch, NS: cfg.SupportPoints(), NQ: cfg.QueryPoints(), train: true},
		{T: cfg.MetaBatch, NS: cfg.SupportPoints(), NQ: cfg.QueryPoints(), Way: cfg.Way, Uneven: true, train: true},
	} {
		gr, err := m.graph(sh)
		if err != nil {
			t.Fatal(err)
		}
		st := m.State.clone()
		if err := m.run(gr, &in.batch, &in.noise, &st, nil); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, scalarOf(gr.r.lossV))
		gr.grads(nil, len(m.Params.List))
	}
	if losses[0] != losses[1] {
		t.Fatalf("loss of the fixed graph %v, of the varying graph %v", losses[0], losses[1])
	}
}

// A model of varying episodes trains (one episode a step, graphs built
// per shape and few kept), learns, evaluates, and repeats itself to the
// bit from the same seed.
func TestVaryingModelTrainsAndRepeats(t *testing.T) {
	cfg := varyConfig("metakernel")
	cfg.Bases, cfg.InferHidden, cfg.PriorHidden = 32, 16, 16
	cfg.KLWeight = 0.01
	src := varyBlobs{blobs{way: 4, side: 7}, 3, 2}
	train := func() ([]float64, EvalResult, EvalResult) {
		m, err := NewModel(cfg, src)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		before, err := m.Evaluate(60, 1, 1, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		opt := NewOptimizer(cfg, m.Params.List)
		var grads [][]float64
		var losses []float64
		for i := 0; i < 800; i++ {
			st, err := m.trainStep(i, opt, &grads)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, st.Loss)
			if n := len(m.stages); n > varyingKept {
				t.Fatalf("%d staged steps kept, want ≤ %d", n, varyingKept)
			}
		}
		after, err := m.Evaluate(60, 1, 1, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.graphs) > varyingKept {
			t.Fatalf("%d graphs kept, want ≤ %d", len(m.graphs), varyingKept)
		}
		return losses, before, after
	}
	l1, before, after := train()
	t.Logf("accuracy before %v, after %v", before, after)
	if after.Query != 0 || after.Tasks != 60 {
		t.Fatalf("result %+v: want 60 tasks and query 0 (drawn per episode)", after)
	}
	// Ways of 2–4 with 1–3 shots: chance is about 36%; 800 single
	// episodes take it to about 72%.
	if after.Mean < 0.65 || after.Mean < before.Mean+0.12 {
		t.Fatalf("accuracy after training %v (before %v), want ≥ 65%% and 12 points better", after, before)
	}
	l2, _, after2 := train()
	for i := range l1 {
		if math.Float64bits(l1[i]) != math.Float64bits(l2[i]) {
			t.Fatalf("step %d: loss %v, then %v from the same seed", i, l1[i], l2[i])
		}
	}
	if after2.Mean != after.Mean {
		t.Fatalf("evaluation %v, then %v", after, after2)
	}
}

// A model and a task family must agree on whether episodes vary.
func TestVaryingNeedsAVaryingSource(t *testing.T) {
	if _, err := NewModel(varyConfig("vrf"), blobs{way: 4, side: 7}); err == nil {
		t.Fatal("a varying config on a fixed family was accepted")
	}
	if _, err := NewModel(classConfig("vrf", 0.9), varyBlobs{blobs{way: 3, side: 7}, 3, 2}); err == nil {
		t.Fatal("a fixed config on a varying family was accepted")
	}
	c := varyConfig("vrf")
	c.MetaBatch = 2
	if err := c.Validate(); err == nil {
		t.Fatal("varying episodes with meta_batch 2 were accepted")
	}
}

// BenchmarkVaryingStep is a training step of varying episodes (a graph
// built for nearly every step) against the fixed step of the same model.
func BenchmarkVaryingStep(b *testing.B) {
	for _, vary := range []bool{false, true} {
		name := "fixed"
		cfg := classConfig("metakernel", 0.9)
		cfg.MetaBatch = 1
		var src task.Source = blobs{way: 4, side: 7}
		if vary {
			name, cfg = "varying", varyConfig("metakernel")
			src = varyBlobs{blobs{way: 4, side: 7}, 3, 2}
		} else {
			cfg.Way, cfg.Shot, cfg.Query = 4, 2, 2
		}
		b.Run(name, func(b *testing.B) {
			m, err := NewModel(cfg, src)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			opt := NewOptimizer(cfg, m.Params.List)
			var grads [][]float64
			for i := 0; i < b.N; i++ {
				if _, err := m.trainStep(i, opt, &grads); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Training at a higher way than the test (Config.TrainWay): the training
// graph of TrainWay classes against finite differences, and a run that
// trains 5-way, validates and tests 3-way.
func TestTrainWay(t *testing.T) {
	cfg := classConfig("metakernel", 0.9)
	cfg.TrainWay = 5
	m, err := NewModel(cfg, blobs{way: 5, side: 7})
	if err != nil {
		t.Fatal(err)
	}
	checkModelFD(t, m, rand.New(rand.NewPCG(14, 0)))
	m.Close()
	if _, err := NewModel(cfg, blobs{way: 4, side: 7}); err == nil {
		t.Error("a 4-way family for a model training 5-way was accepted")
	}
	bad := cfg
	bad.TrainWay = 2
	if err := bad.Validate(); err == nil {
		t.Error("train_way below way was accepted")
	}

	cfg.Iters, cfg.ValEvery, cfg.ValTasks = 30, 10, 5
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 10, 2, 1
	test := blobs{way: 3, side: 7}
	res, err := Run(context.Background(), cfg, blobs{way: 5, side: 7}, RunOptions{Dir: t.TempDir(), Val: test, Test: test}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Eval == nil || res.Eval.Tasks != 10 || res.Iters != 30 {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, FileBest)); err != nil {
		t.Errorf("no best checkpoint from the 3-way validation: %v", err)
	}
}

// shotsSeen is a blobs source that records the support rows of the
// batches drawn from it.
type shotsSeen struct {
	blobs
	mu sync.Mutex
	ns map[int]int
}

func (s *shotsSeen) Sample(rng *rand.Rand, b *task.Batch) {
	s.mu.Lock()
	s.ns[b.NS]++
	s.mu.Unlock()
	s.blobs.Sample(rng, b)
}

// Training on more shots than the test (Config.TrainShot): the training
// graph of TrainShot·way support rows against finite differences (its
// prototypes divide by the training shot), and a run whose training
// episodes have 4 shots while validation and test have 2.
func TestTrainShot(t *testing.T) {
	cfg := classConfig("metakernel", 0.9)
	cfg.TrainShot = 4
	train := &shotsSeen{blobs: blobs{way: 3, side: 7}, ns: map[int]int{}}
	m, err := NewModel(cfg, train)
	if err != nil {
		t.Fatal(err)
	}
	checkModelFD(t, m, rand.New(rand.NewPCG(15, 0)))
	m.Close()
	if train.ns[4*3] == 0 || len(train.ns) != 1 {
		t.Errorf("training batches' support rows: %v, want only %d", train.ns, 4*3)
	}
	// Training at train_shot 4 is training a 4-shot model: the same
	// episodes, the same prototypes, the same loss to the last bit.
	four := cfg
	four.Shot, four.TrainShot = 4, 0
	if a, b := firstStepLoss(t, cfg, train), firstStepLoss(t, four, train); a != b {
		t.Errorf("first step's loss %v at train_shot 4, %v at shot 4", a, b)
	}
	for _, bad := range []func(c *Config){
		func(c *Config) { c.TrainShot = -1 },
		func(c *Config) { c.Way, c.Shot, c.Query = 0, 5, 5 },
	} {
		c := cfg
		bad(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "train_shot") {
			t.Errorf("%+v: %v, want a train_shot error", c, err)
		}
	}

	cfg.Iters, cfg.ValEvery, cfg.ValTasks = 20, 10, 5
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 10, 2, 1
	train.ns = map[int]int{}
	test := &shotsSeen{blobs: blobs{way: 3, side: 7}, ns: map[int]int{}}
	res, err := Run(context.Background(), cfg, train, RunOptions{Dir: t.TempDir(), Val: test, Test: test}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Eval == nil || res.Eval.Tasks != 10 || res.Iters != 20 {
		t.Fatalf("result %+v", res)
	}
	for s, ns := range map[*shotsSeen]int{train: 4 * 3, test: 2 * 3} {
		for n := range s.ns {
			if n != ns {
				t.Errorf("support rows %v, want only %d", s.ns, ns)
			}
		}
	}
}

// firstStepLoss is the loss of the first training step of a model of cfg.
func firstStepLoss(t *testing.T, cfg Config, src task.Source) float64 {
	t.Helper()
	m, err := NewModel(cfg, src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var grads [][]float64
	st, err := m.trainStep(0, NewOptimizer(cfg, m.Params.List), &grads)
	if err != nil {
		t.Fatal(err)
	}
	return st.Loss
}
