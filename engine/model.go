package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/mkbench/mkbench/engine/internal/vecmath"
	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
)

// Random streams. Every random draw comes from a PCG seeded by (run seed,
// stream, index), so iteration i's tasks and noise do not depend on what
// ran before: a resumed run needs no RNG state, and evaluation never
// perturbs the training stream.
const (
	streamInit uint64 = iota + 1
	streamTrainTasks
	streamTrainNoise
	streamEvalTasks
	streamEvalNoise
	streamDisplayTask
	streamDisplayNoise
	streamValTasks
	streamValNoise
)

// LSTMState is the carried context state, one (h, c) per direction.
type LSTMState struct {
	H, C [2][]float64
}

func (s LSTMState) clone() LSTMState {
	var o LSTMState
	for k := 0; k < 2; k++ {
		o.H[k] = append([]float64(nil), s.H[k]...)
		o.C[k] = append([]float64(nil), s.C[k]...)
	}
	return o
}

// Model holds a configuration's parameters, its carried context and the
// graphs built so far. It is owned by one goroutine.
type Model struct {
	Cfg    Config
	Src    task.Source
	Params *Params
	State  LSTMState
	// BN holds the running statistics of a ResNet ψ's batch norms, one per
	// convolution (nil for other ψ): non-trainable state, updated after
	// every successful training step and carried by checkpoints.
	BN []ops.BNStats
	// EvalProgress, when set, is told after each meta-batch of an
	// evaluation how many of its tasks are done: a caller's progress line
	// for evaluations that take minutes. It runs on the evaluating
	// goroutine.
	EvalProgress func(done, total int)

	graphs map[shape]*graph
	stages map[shape]*staged
	// released says a graph was dropped since the last build (collect).
	released bool
	noise    noise // for evaluation and display runs
	// pool spreads the work of the model's ops over the cores; the staged
	// step runs its task ranges as the pool's stages.
	pool ops.Pool
	// res keeps the backbone's parameters on the pool's device while the
	// model trains (resident.go); nil on the CPU.
	res *resident

	// Training inputs are double-buffered: while step i runs, a goroutine
	// draws the tasks and noise of step i+1 (they depend only on the seed
	// and i), taking that work off the critical path.
	gradBuf [][]float64 // Step's gradients
	gate    busyGate    // see busyGate
	// cancel, when closed, stops an evaluation between batches (Run sets
	// it to its context's Done).
	cancel  <-chan struct{}
	bufs    [2]stepInput
	pending *stepInput
	ready   chan struct{}
}

// log2Pi is the constant of the Gaussian log-density log q0(ω₀).
var log2Pi = math.Log(2 * math.Pi)

// noise is one draw of everything random a forward pass needs.
type noise struct {
	eps      []float64 // (T,D,d) standard normal: ω₀ = μ + σ⊙ε, or ω itself for RFF
	phase    []float64 // (T,D) RFF phases b ~ U[0, 2π]
	logq0c   []float64 // (T) the gradient-free part of the mean log q0(ω₀)
	dropSeed uint64    // seeds the dropout masks of a convolutional ψ

	bits []uint64     // the uniform bits ε is made from
	gen  vecmath.Bits // makes them; seeded from the draw's rng
}

// stepInput is the data of one training iteration.
type stepInput struct {
	iter  int
	batch task.Batch
	noise noise
	panic any // recovered from the prefetch that drew it
}

// NewModel initializes a model's parameters from cfg.Seed.
func NewModel(cfg Config, src task.Source) (*Model, error) {
	ops.UseFastBLAS()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.UsesResNet() && src.InDim() != cfg.ResNet.InDim() {
		return nil, fmt.Errorf("engine: the ResNet takes %d×%d×%d images (%d values), the task family %s gives %d values per input",
			cfg.ResNet.Height, cfg.ResNet.Width, cfg.ResNet.Channels, cfg.ResNet.InDim(), src.Name(), src.InDim())
	}
	if w := src.OutDim(); cfg.Classify() && !cfg.Varying && w != cfg.Way && w != cfg.TrainingWay() {
		return nil, fmt.Errorf("engine: the task family %s draws %d-way episodes, the config trains %d-way ones", src.Name(), w, cfg.TrainingWay())
	}
	if _, ok := src.(task.Varying); ok != cfg.Varying {
		if ok {
			return nil, fmt.Errorf("engine: the task family %s draws episodes of varying way and shots: the config needs varying set", src.Name())
		}
		return nil, fmt.Errorf("engine: the config asks for varying episodes, and the task family %s draws episodes of one shape", src.Name())
	}
	m := &Model{Cfg: cfg, Src: src, graphs: map[shape]*graph{}, stages: map[shape]*staged{}}
	m.pool.SetDevice(currentDevice()) // before the first graph: its kernels choose their device as they are made
	m.Params = newParams(cfg, src.InDim(), src.OutDim(), task.Stream(cfg.Seed, streamInit, 0))
	if cfg.UsesResNet() {
		m.BN = ops.NewResNetStats(*cfg.ResNet)
	}
	var err error
	if m.res, err = newResident(m); err != nil {
		return nil, err
	}
	if cfg.Context != ContextNone {
		for k := 0; k < 2; k++ {
			m.State.H[k] = make([]float64, cfg.InferHidden)
			m.State.C[k] = make([]float64, cfg.InferHidden)
		}
	}
	return m, nil
}

// buildMu serializes graph construction across models: gorgonia v0.9.18
// numbers node groups from an unsynchronized package-level counter, so two
// models building graphs at once (the workbench's side-by-side variants)
// race on it.
var buildMu sync.Mutex

// varyingKept is how many graphs (and staged steps) of varying episodes a
// model keeps: their shapes seldom repeat, and each graph holds the
// memory of its activations.
const varyingKept = 1

// built returns cache[sh], building it under buildMu on first use. When
// sh is a varying episode's (Uneven), graphs of other varying shapes
// beyond varyingKept are closed (by release) and dropped; which ones does
// not change any number, as a graph rebuilt computes the same.
func built[V any](cache map[shape]V, sh shape, build func() (V, error), release func(V)) (V, error) {
	if v, ok := cache[sh]; ok {
		return v, nil
	}
	if sh.Uneven {
		n := 0
		for k := range cache {
			if k.Uneven {
				n++
			}
		}
		for k, v := range cache {
			if n < varyingKept {
				break
			}
			if k.Uneven {
				release(v)
				delete(cache, k)
				n--
			}
		}
	}
	buildMu.Lock()
	v, err := build()
	buildMu.Unlock()
	if err != nil {
		return v, err
	}
	cache[sh] = v
	return v, nil
}

// blueprint is what the model's graphs are built from. A classifier's
// graphs have Way classes unless their shape says otherwise.
func (m *Model) blueprint() blueprint {
	out := m.Src.OutDim()
	if m.Cfg.Classify() {
		out = m.Cfg.Way
	}
	return blueprint{cfg: m.Cfg, ps: m.Params, bn: m.BN, pool: &m.pool, inDim: m.Src.InDim(), outDim: out}
}

func (m *Model) graph(sh shape) (*graph, error) {
	return built(m.graphs, sh, func() (*graph, error) {
		m.collect()
		gr, err := buildGraph(m.blueprint(), sh)
		if err == nil && m.res != nil {
			// Its convolutions read the device's weights (resident.go).
			if err = m.res.attachReaders(gr); err != nil {
				gr.vm.Close()
			}
		}
		return gr, err
	}, func(gr *graph) {
		if m.res != nil {
			m.res.detach([]*graph{gr})
		}
		gr.vm.Close()
		m.released = true
	})
}

// collect runs the garbage collector before a graph is built when a
// varying episode's graph of a ResNet model was just dropped: each holds
// hundreds of MB (the gradients of 11 M parameters, the activations), and
// left to the collector's pace, one dropped a step let the heap of a
// Meta-Dataset run grow to 18 GB; collected here, the next graph reuses
// their memory.
func (m *Model) collect() {
	if m.released && m.Cfg.UsesResNet() {
		runtime.GC()
	}
	m.released = false
}

// Close releases the machines of all graphs.
func (m *Model) Close() {
	m.waitPrefetch()
	for _, gr := range m.graphs {
		gr.vm.Close()
	}
	for _, st := range m.stages {
		st.close()
	}
	m.graphs = map[shape]*graph{}
	m.stages = map[shape]*staged{}
}

// drawChunk is how many normals the noise draw makes between calls of its
// pause function (~40 µs of work).
const drawChunk = 8192

// draw fills the noise for T tasks from rng. pause, if not nil, is called
// between chunks of the draw; it may block (the prefetch waits there while
// the model's task stages have both cores). The numbers do not depend on it.
func (n *noise) draw(rng *rand.Rand, T, D, f int, pause func()) {
	n.eps = task.Grow(n.eps, T*D*f)
	n.phase = task.Grow(n.phase, T*D)
	n.logq0c = task.Grow(n.logq0c, T)
	// ε is Box–Muller on xoshiro256+ bits, both vectorized (vecmath.Normals,
	// vecmath.Bits): rand's ziggurat NormFloat64 took ~0.8 ms per sine step,
	// the largest single cost of vrf+ctx, now ~0.45 ms. The generator is
	// seeded from rng, so the seed still fixes every number.
	n.gen.Seed(rng.Uint64(), rng.Uint64())
	for lo := 0; lo < len(n.eps); lo += drawChunk {
		if pause != nil {
			pause()
		}
		chunk := n.eps[lo:min(lo+drawChunk, len(n.eps))]
		n.bits = task.Grow(n.bits, 2*((len(chunk)+1)/2))
		n.gen.Fill(n.bits)
		vecmath.Normals(chunk, n.bits)
	}
	for i := range n.phase {
		n.phase[i] = 2 * math.Pi * rng.Float64()
	}
	for t := 0; t < T; t++ {
		var s float64
		for _, e := range n.eps[t*D*f : (t+1)*D*f] {
			s += e * e
		}
		n.logq0c[t] = -0.5*s/float64(D) - 0.5*float64(f)*log2Pi
	}
	n.dropSeed = rng.Uint64()
}

func (m *Model) drawNoise(rng *rand.Rand, T int) {
	m.noise.draw(rng, T, m.Cfg.Bases, m.Cfg.FeatureDim(), nil)
}

// prepare draws iteration iter's tasks and noise into in.
func (m *Model) prepare(iter int, in *stepInput, pause func()) {
	c := m.Cfg
	in.iter = iter
	rng := task.Stream(c.Seed, streamTrainTasks, uint64(iter))
	if v, ok := m.Src.(task.Varying); ok {
		v.SampleVarying(rng, &in.batch)
	} else {
		m.resizeTraining(&in.batch, c.MetaBatch)
		m.Src.Sample(rng, &in.batch)
	}
	in.noise.draw(task.Stream(c.Seed, streamTrainNoise, uint64(iter)), c.MetaBatch, c.Bases, c.FeatureDim(), pause)
}

// busyGate holds the prefetch back while the model's own task stages run
// on both cores (see staged.parallel): the draw then uses only the serial
// parts of a step, where a core would idle, instead of slowing a stage.
// It is per model, so concurrent models never hold up each other.
type busyGate struct {
	mu   sync.Mutex
	cond *sync.Cond
	busy bool
}

func (g *busyGate) set(busy bool) {
	g.mu.Lock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	g.busy = busy
	g.mu.Unlock()
	if !busy {
		g.cond.Broadcast()
	}
}

func (g *busyGate) wait() {
	g.mu.Lock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	for g.busy {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// input returns iteration iter's data, from the prefetch when it matches.
func (m *Model) input(iter int) *stepInput {
	if m.pending != nil {
		<-m.ready
		in := m.pending
		m.pending = nil
		if p := in.panic; p != nil {
			in.panic = nil
			panic(fmt.Sprintf("drawing iteration %d's tasks: %v", in.iter+1, p))
		}
		if in.iter == iter {
			return in
		}
	}
	in := &m.bufs[0]
	m.prepare(iter, in, nil)
	return in
}

// prefetch starts drawing iteration iter's data into the buffer that cur
// is not using.
func (m *Model) prefetch(iter int, cur *stepInput) {
	next := &m.bufs[0]
	if cur == next {
		next = &m.bufs[1]
	}
	m.pending, m.ready = next, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		// A panic here (say, in a task source) would end the process;
		// input raises it again on the model's goroutine, where Run turns
		// it into an error.
		defer func() { next.panic = recover() }()
		m.prepare(iter, next, m.gate.wait)
	}(m.ready)
}

// waitPrefetch lets a running prefetch finish, so that nothing touches the
// model's buffers after the caller moves on.
func (m *Model) waitPrefetch() {
	if m.pending != nil {
		<-m.ready
		m.pending = nil
	}
}

// run binds a batch, noise and context state to gr and executes it. When
// state is non-nil it is advanced to the LSTM's final state. bound, if
// set, is called once the inputs are copied into the graph.
func (m *Model) run(gr *graph, b *task.Batch, nz *noise, state *LSTMState, bound func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: model run panicked: %v", r)
		}
	}()
	// Evaluation and display graphs read the host's parameters.
	if err := m.SyncHost(); err != nil {
		return err
	}
	if err := gr.bindParams(); err != nil {
		return err
	}
	x := dataOf(gr.x.Value())
	in := b.InDim
	copy(x, b.XS[:b.T*b.NS*in])
	copy(x[b.T*b.NS*in:], b.XQ[:b.T*b.NQ*in])
	gr.setTargets(b.YS[:b.T*b.NS*b.OutDim])
	setInput(gr.yq, b.YQ)
	setInput(gr.eps, nz.eps)
	setInput(gr.phase, nz.phase)
	setInput(gr.logq0c, nz.logq0c)
	if state != nil {
		for k := 0; k < 2; k++ {
			setInput(gr.h0[k], state.H[k])
			setInput(gr.c0[k], state.C[k])
		}
	}
	if bound != nil {
		bound()
	}
	gr.setDropout(nz.dropSeed)
	gr.vm.Reset()
	if err := gr.vm.RunAll(); err != nil {
		return err
	}
	if state != nil {
		for k := 0; k < 2; k++ {
			if gr.lstm[k] != nil {
				state.H[k], state.C[k] = gr.lstm[k].FinalState()
			}
		}
	}
	return nil
}

// resizeTraining sizes b for T fixed-shape tasks of the training source:
// its way (Config.TrainingWay) and Config.TrainingShot for a classifier.
func (m *Model) resizeTraining(b *task.Batch, T int) {
	c := m.Cfg
	ns, nq := c.SupportPoints(), c.QueryPoints()
	if w := m.Src.OutDim(); c.Classify() {
		ns, nq = c.TrainingShot()*w, c.Query*w
	}
	b.Resize(T, ns, nq, m.Src.InDim(), m.Src.OutDim())
}

// batchShape is the shape of the model's graphs that run b, drawn from src.
func (m *Model) batchShape(b *task.Batch, src task.Source) shape {
	sh := shape{T: b.T, NS: b.NS, NQ: b.NQ}
	if _, ok := src.(task.Varying); ok {
		sh.Way, sh.Uneven = b.OutDim, true
	} else if m.Cfg.Classify() && b.OutDim != m.Cfg.Way {
		sh.Way = b.OutDim
	}
	return sh
}

// IsNotPD reports whether err was caused by a kernel system K+λI that is
// not positive definite (ops.ErrNotPD), also when err comes out of a
// machine's run.
func IsNotPD(err error) bool { return ops.IsNotPD(err) }

// StepStats are the scalars of one training step.
type StepStats struct {
	Loss, Data, KL, Lambda, GradNorm float64
}

// Step runs training iteration iter (0-based) of the task stream, as Run
// does each iteration: forward, backward and an update by opt (made by
// NewOptimizer for this model). For benchmarks and custom loops.
func (m *Model) Step(iter int, opt *Optimizer) (StepStats, error) {
	return m.trainStep(iter, opt, &m.gradBuf)
}

// trainStep runs iteration iter (0-based) of the task stream: forward,
// backward, and an optimizer update. On a non-finite loss or gradient the
// parameters and carried state are left as they were.
func (m *Model) trainStep(iter int, opt *Optimizer, grads *[][]float64) (StepStats, error) {
	in := m.input(iter)
	sh := m.batchShape(&in.batch, m.Src)
	sh.train = true
	st, err := m.staged(sh)
	if err != nil {
		return StepStats{}, err
	}
	if m.res != nil {
		if err := m.res.toDevice(m, opt); err != nil {
			return StepStats{}, err
		}
		m.res.store.ClearGrads()
	}
	next := m.State.clone()
	// Once the inputs are copied into the graphs, their buffer is free and
	// the next iteration's draw can overlap this one's forward and backward.
	stats, err := st.run(m.Params, &in.batch, &in.noise, &next, func() { m.prefetch(iter+1, in) }, grads)
	if err != nil {
		m.waitPrefetch()
		return stats, err
	}
	for _, v := range []struct {
		what string
		x    float64
	}{{"the loss", stats.Loss}, {"the data term", stats.Data}, {"the KL term", stats.KL}, {"λ", stats.Lambda}} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) {
			return stats, &NonFiniteError{What: v.what, Value: v.x}
		}
	}
	for k := 0; k < 2; k++ {
		for _, s := range [][]float64{next.H[k], next.C[k]} {
			for _, x := range s {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return stats, &NonFiniteError{What: "the context LSTM's carried state", Value: x}
				}
			}
		}
	}
	if stats.GradNorm, err = opt.step(m.Params.List, *grads, m.res); err != nil {
		return stats, err
	}
	m.State = next
	// The step counts: its batch statistics join the running ones.
	if err := st.foldBN(); err != nil {
		return stats, err
	}
	return stats, nil
}
