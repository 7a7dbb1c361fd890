package engine

import (
	"fmt"

	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
)

// taskStages is the number of task stages a training step's meta-batch is
// split into: one per core of the 2-core machine the targets are set on.
// It is fixed rather than GOMAXPROCS so that the sums, and with them every
// bit of training, are the same on any machine.
const taskStages = 2

// staged is the training step for one shape, run so that both cores work
// through nearly all of it. gorgonia executes a graph one op at a time, so
// one graph of the whole model used a second core only inside our own ops,
// and most of a step was not in them. Everything but the context LSTM is
// per task, so the meta-batch is split into taskStages ranges of tasks,
// each with its own graphs, run concurrently:
//
//  1. summary: ψ and the inference network on the support rows, forward
//     only, giving each task's s̄;
//  2. the context LSTM over all T tasks, forward (our kernels, called
//     directly: it is the one serial part);
//  3. task: the whole model of the range's tasks with the LSTM outputs as
//     an input, forward and backward: the gradients of every parameter but
//     the LSTM's, and ∂L/∂(LSTM outputs);
//  4. the LSTM backward: its parameters' gradients and ∂L/∂s̄ along the
//     context path;
//  5. seeded summary: ψ and the inference network again with the loss
//     Σ s̄⊙∂L/∂s̄, adding their gradients along the context path.
//
// Variants without context run only step 3. Each task stage's loss carries
// its share of the meta-batch as a weight, so losses and gradients add up
// to those of the one-graph model (TestStagedStepMatchesOneGraph).
type staged struct {
	cfg    Config
	tasks  []*graph  // step 3, one per range
	sums   []*graph  // step 1, with context only
	seeded []*graph  // step 5, with context only
	pool   *ops.Pool // the model's: runs the task stages
	gate   *busyGate // the model's: closed while the task stages run
	// mlp does steps 1 and 5 without graphs when ψ is an MLP and the
	// inference network sees support points (regression): see mlpSummary.
	mlp    *mlpSummary
	lo     []int // first task of each range, then T
	shares []float64

	// The context LSTM, run outside gorgonia.
	dirs         int
	lstm         [2]ops.LSTMCache
	lstmW, lstmB [2]int // parameter indices
	sbar, dSbar  []float64
	out, dOut    [2][]float64
}

func (m *Model) staged(sh shape) (*staged, error) {
	return built(m.stages, sh, func() (*staged, error) {
		m.collect()
		st, err := buildStaged(m.blueprint(), sh)
		if err != nil {
			return st, err
		}
		st.gate = &m.gate
		if m.res != nil {
			if err := m.res.attach(st.tasks, st.sums, st.seeded); err != nil {
				st.close()
				return nil, err
			}
		}
		return st, nil
	}, func(st *staged) {
		if m.res != nil {
			m.res.detach(st.tasks, st.sums, st.seeded)
		}
		st.close()
		m.released = true
	})
}

func buildStaged(bp blueprint, sh shape) (*staged, error) {
	cfg, ps := bp.cfg, bp.ps
	st := &staged{cfg: cfg, pool: bp.pool, dirs: contextDirs(cfg)}
	if cfg.Kernel != KernelVRF {
		st.dirs = 0
	}
	if st.dirs > 0 && cfg.Conv == nil && !cfg.UsesResNet() && !cfg.Classify() {
		st.mlp = newMLPSummary(cfg, ps, bp.inDim, bp.outDim)
	}
	n := min(taskStages, sh.T)
	for r := 0; r <= n; r++ {
		st.lo = append(st.lo, r*sh.T/n)
	}
	for r := 0; r < n; r++ {
		part := sh
		part.T = st.lo[r+1] - st.lo[r]
		share := float64(part.T) / float64(sh.T)
		st.shares = append(st.shares, share)
		gr, err := buildTask(bp, part, share)
		if err != nil {
			st.close()
			return nil, err
		}
		st.tasks = append(st.tasks, gr)
		if st.dirs == 0 || st.mlp != nil {
			continue
		}
		if gr, err = buildSummary(bp, part); err == nil {
			st.sums = append(st.sums, gr)
			gr, err = buildSeededSummary(bp, part)
		}
		if err != nil {
			st.close()
			return nil, err
		}
		st.seeded = append(st.seeded, gr)
	}
	for k := 0; k < st.dirs; k++ {
		st.lstmW[k], st.lstmB[k] = paramIndex(ps, "lstm."+lstmDirs[k]+".W"), paramIndex(ps, "lstm."+lstmDirs[k]+".b")
	}
	return st, nil
}

func paramIndex(ps *Params, name string) int {
	for i, p := range ps.List {
		if p.Name == name {
			return i
		}
	}
	panic("engine: no parameter " + name)
}

func (st *staged) close() {
	for _, gs := range [][]*graph{st.tasks, st.sums, st.seeded} {
		for _, gr := range gs {
			gr.vm.Close()
		}
	}
}

// foldBN folds the batch statistics of the step's task stages into the
// running statistics of a ResNet ψ, range by range; the summary passes saw
// the same support images and are not counted again.
func (st *staged) foldBN() error {
	for _, gr := range st.tasks {
		for _, n := range gr.resnets {
			if err := n.FoldRunning(); err != nil {
				return err
			}
		}
	}
	return nil
}

// parallel runs fn(r) for every task range as the stages of the model's
// pool, and returns the first error. A panic in fn becomes an error.
func (st *staged) parallel(fn func(r int) error) error {
	errs := make([]error, len(st.tasks))
	if st.gate != nil {
		st.gate.set(true)
	}
	st.pool.Stages(len(st.tasks), func(r int) {
		defer func() {
			if p := recover(); p != nil {
				errs[r] = fmt.Errorf("engine: model run panicked: %v", p)
			}
		}()
		if st.gate != nil {
			// The first range to finish frees a core: the draw may
			// use it while the other range completes.
			defer st.gate.set(false)
		}
		errs[r] = fn(r)
	})
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// rangeSeed is task range r's dropout seed: each range's nets number their
// ops from 0, and equal seeds would give equal masks to the images at the
// same place in different ranges. The summary and seeded-summary passes of
// a range share it, so both see the same masks.
func rangeSeed(seed uint64, r int) uint64 { return seed ^ uint64(r+1)*task.Gamma }

func runGraph(gr *graph, dropSeed uint64) error {
	if err := gr.bindParams(); err != nil {
		return err
	}
	gr.setDropout(dropSeed)
	gr.vm.Reset()
	return gr.vm.RunAll()
}

// run executes one training step on batch b with noise nz, from and (on
// success) advancing the carried context state, and leaves the gradient of
// every parameter in grads (indexed like ps.List). bound is called once the
// inputs are copied.
func (st *staged) run(ps *Params, b *task.Batch, nz *noise, state *LSTMState, bound func(), grads *[][]float64) (stats StepStats, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: model run panicked: %v", r)
		}
	}()
	T, NS, NQ, in, out := b.T, b.NS, b.NQ, b.InDim, b.OutDim
	f, D, H := st.cfg.FeatureDim(), st.cfg.Bases, st.cfg.InferHidden
	for r, gr := range st.tasks {
		lo, hi := st.lo[r], st.lo[r+1]
		x := dataOf(gr.x.Value())
		copy(x, b.XS[lo*NS*in:hi*NS*in])
		copy(x[(hi-lo)*NS*in:], b.XQ[lo*NQ*in:hi*NQ*in])
		gr.setTargets(b.YS[lo*NS*out : hi*NS*out])
		setInput(gr.yq, b.YQ[lo*NQ*out:hi*NQ*out])
		if gr.eps != nil {
			setInput(gr.eps, nz.eps[lo*D*f:hi*D*f])
		}
		if gr.phase != nil {
			setInput(gr.phase, nz.phase[lo*D:hi*D])
		}
		if gr.logq0c != nil {
			setInput(gr.logq0c, nz.logq0c[lo:hi])
		}
		if st.dirs > 0 && st.mlp == nil {
			for _, g := range []*graph{st.sums[r], st.seeded[r]} {
				setInput(g.x, b.XS[lo*NS*in:hi*NS*in])
				g.setTargets(b.YS[lo*NS*out : hi*NS*out])
			}
		}
	}

	// The next step's draw may start: it runs in the serial parts of this
	// step and waits while the task stages have both cores (gate).
	if bound != nil {
		bound()
	}

	if st.dirs > 0 {
		// 1, 2: summaries, then the LSTM forward over all tasks.
		st.sbar = task.Grow(st.sbar, T*H)
		if st.mlp != nil {
			st.mlp.forward(ps, b.XS, b.YS, T, NS, st.sbar)
		} else {
			if err := st.parallel(func(r int) error { return runGraph(st.sums[r], rangeSeed(nz.dropSeed, r)) }); err != nil {
				return stats, err
			}
			for r, gr := range st.sums {
				copy(st.sbar[st.lo[r]*H:], dataOf(gr.r.ctxV))
			}
		}
		for k := 0; k < st.dirs; k++ {
			st.out[k] = task.Grow(st.out[k], T*H)
			ops.LSTMForward(&st.lstm[k], st.sbar, ps.List[st.lstmW[k]].Data, ps.List[st.lstmB[k]].Data,
				state.H[k], state.C[k], T, H, H, k == 1, st.out[k])
		}
		cd := st.dirs * H
		for r, gr := range st.tasks {
			ctx := dataOf(gr.hIn.Value())
			for t := st.lo[r]; t < st.lo[r+1]; t++ {
				row := ctx[(t-st.lo[r])*cd : (t-st.lo[r]+1)*cd]
				for k := 0; k < st.dirs; k++ {
					copy(row[k*H:(k+1)*H], st.out[k][t*H:(t+1)*H])
				}
			}
		}
	}

	// 3: the task stages.
	if err := st.parallel(func(r int) error { return runGraph(st.tasks[r], rangeSeed(nz.dropSeed, r)) }); err != nil {
		return stats, err
	}
	if len(*grads) != len(ps.List) {
		*grads = make([][]float64, len(ps.List))
	}
	for i := range *grads {
		(*grads)[i] = (*grads)[i][:0]
	}
	for r, gr := range st.tasks {
		if err := gr.addGrads(*grads); err != nil {
			return stats, err
		}
		stats.Loss += scalarOf(gr.r.lossV)
		stats.Data += st.shares[r] * scalarOf(gr.r.dataV)
		if gr.r.klV != nil {
			stats.KL += st.shares[r] * scalarOf(gr.r.klV)
		}
	}
	stats.Lambda = scalarOf(st.tasks[0].r.lambdaV)
	if st.dirs == 0 {
		return stats, nil
	}

	// 4: the LSTM backward.
	cd := st.dirs * H
	for k := 0; k < st.dirs; k++ {
		st.dOut[k] = task.Grow(st.dOut[k], T*H)
	}
	for r, gr := range st.tasks {
		g, err := takeGrad(gr.hIn)
		if err != nil {
			return stats, err
		}
		for t := st.lo[r]; t < st.lo[r+1]; t++ {
			row := g[(t-st.lo[r])*cd : (t-st.lo[r]+1)*cd]
			for k := 0; k < st.dirs; k++ {
				copy(st.dOut[k][t*H:(t+1)*H], row[k*H:(k+1)*H])
			}
		}
		clear(g)
	}
	st.dSbar = task.Grow(st.dSbar, T*H)
	clear(st.dSbar)
	var dx []float64
	for k := 0; k < st.dirs; k++ {
		w, bias := ps.List[st.lstmW[k]], ps.List[st.lstmB[k]]
		dw := task.Grow((*grads)[st.lstmW[k]], len(w.Data))
		db := task.Grow((*grads)[st.lstmB[k]], len(bias.Data))
		dx = task.Grow(dx, T*H)
		ops.LSTMBackward(&st.lstm[k], st.sbar, w.Data, st.dOut[k], dx, dw, db)
		(*grads)[st.lstmW[k]], (*grads)[st.lstmB[k]] = dw, db
		for i, v := range dx {
			st.dSbar[i] += v
		}
	}

	// 5: the seeded summaries.
	if st.mlp != nil {
		st.mlp.backward(ps, b.XS, T, NS, st.dSbar, *grads)
		for k := 0; k < st.dirs; k++ {
			state.H[k], state.C[k] = st.lstm[k].FinalState()
		}
		return stats, nil
	}
	for r, gr := range st.seeded {
		setInput(gr.seedH, st.dSbar[st.lo[r]*H:st.lo[r+1]*H])
	}
	if err := st.parallel(func(r int) error { return runGraph(st.seeded[r], rangeSeed(nz.dropSeed, r)) }); err != nil {
		return stats, err
	}
	for _, gr := range st.seeded {
		if err := gr.addGrads(*grads); err != nil {
			return stats, err
		}
	}
	for k := 0; k < st.dirs; k++ {
		state.H[k], state.C[k] = st.lstm[k].FinalState()
	}
	return stats, nil
}
