package engine

import (
	"fmt"
	"sync"

	G "gorgonia.org/gorgonia"
)

// backStages is the number of back stages a training step's tasks are
// split into: one per core of the 2-core machine the targets are set on.
// It is fixed rather than GOMAXPROCS so that the sums, and with them every
// bit of training, are the same on any machine.
const backStages = 2

// staged is the training step for one shape, run in stages so that both
// cores work through all of it. gorgonia executes a graph one op at a
// time, so a single graph uses a second core only inside our own ops, and
// most of a step is not in them. The model splits into a front (ψ and the
// context h over all T tasks, which the LSTM couples) and a back
// (everything per task from h on: q, flows, features, KRR, prior, loss),
// and a step runs
//
//  1. the front forward-only (fwd): ψ(x) for all rows, and h;
//  2. backStages back graphs over disjoint task ranges, concurrently, each
//     with its backward: the back parameters' gradients and the loss's
//     gradients w.r.t. its rows of ψ(x) and h;
//  3. the front again with the seeded loss Σ F⊙∂L/∂F + Σ h⊙∂L/∂h (full),
//     whose backward gives the front parameters' gradients.
//
// Each back stage's loss carries its share of the meta-batch as a weight,
// so losses and gradients add up to those of the one-graph model
// (TestStagedStepMatchesOneGraph).
type staged struct {
	fwd, full *graph
	backs     []*graph
	lo        []int // first task of each back stage, then T
	shares    []float64
	ctxDim    int
}

func (m *Model) staged(sh shape) (*staged, error) {
	if st, ok := m.stages[sh]; ok {
		return st, nil
	}
	st, err := buildStaged(m.Cfg, m.Params, m.Src.InDim(), m.Src.OutDim(), sh)
	if err != nil {
		return nil, err
	}
	m.stages[sh] = st
	return st, nil
}

func buildStaged(cfg Config, ps *Params, inDim, outDim int, sh shape) (*staged, error) {
	st := &staged{}
	var err error
	if st.fwd, err = buildFront(cfg, ps, inDim, outDim, sh, false); err != nil {
		return nil, err
	}
	if st.full, err = buildFront(cfg, ps, inDim, outDim, sh, true); err != nil {
		st.close()
		return nil, err
	}
	if st.fwd.ctx != nil {
		st.ctxDim = st.fwd.ctx.Shape()[1]
	}
	n := min(backStages, sh.T)
	for r := 0; r <= n; r++ {
		st.lo = append(st.lo, r*sh.T/n)
	}
	for r := 0; r < n; r++ {
		part := sh
		part.T = st.lo[r+1] - st.lo[r]
		share := float64(part.T) / float64(sh.T)
		gr, err := buildBack(cfg, ps, outDim, part, st.ctxDim, share)
		if err != nil {
			st.close()
			return nil, err
		}
		st.backs = append(st.backs, gr)
		st.shares = append(st.shares, share)
	}
	return st, nil
}

func (st *staged) close() {
	for _, gr := range append([]*graph{st.fwd, st.full}, st.backs...) {
		if gr != nil && gr.vm != nil {
			gr.vm.Close()
		}
	}
}

// run executes one training step on batch b with noise nz, from and (on
// success) advancing the carried context state, and leaves the gradient of
// every parameter in grads. bound is called once the inputs are copied.
func (st *staged) run(b *Batch, nz *noise, state *LSTMState, bound func(), grads *[][]float64, nParams int) (stats StepStats, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: model run panicked: %v", r)
		}
	}()
	T, NS, NQ, in, out := b.T, b.NS, b.NQ, b.InDim, b.OutDim
	all := append([]*graph{st.fwd, st.full}, st.backs...)
	for _, gr := range all {
		if err := gr.bindParams(); err != nil {
			return stats, err
		}
	}
	for _, gr := range []*graph{st.fwd, st.full} {
		x := dataOf(gr.x.Value())
		copy(x, b.XS[:T*NS*in])
		copy(x[T*NS*in:], b.XQ[:T*NQ*in])
		setInput(gr.ys, b.YS)
		for k := 0; k < 2; k++ {
			setInput(gr.h0[k], state.H[k])
			setInput(gr.c0[k], state.C[k])
		}
	}
	f, D := st.fwd.cfg.FeatureDim(), st.fwd.cfg.Bases
	for r, gr := range st.backs {
		lo, hi := st.lo[r], st.lo[r+1]
		setInput(gr.ys, b.YS[lo*NS*out:hi*NS*out])
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
	}
	if bound != nil {
		bound()
	}

	// 1. Front, forward only.
	st.fwd.vm.Reset()
	if err := st.fwd.vm.RunAll(); err != nil {
		return stats, err
	}
	F, h := dataOf(st.fwd.r.featV), dataOf(st.fwd.r.ctxV)
	for r, gr := range st.backs {
		lo, hi := st.lo[r], st.lo[r+1]
		setInput(gr.fs, F[lo*NS*f:hi*NS*f])
		setInput(gr.fq, F[(T*NS+lo*NQ)*f:(T*NS+hi*NQ)*f])
		if gr.hIn != nil {
			setInput(gr.hIn, h[lo*st.ctxDim:hi*st.ctxDim])
		}
	}

	// 2. Back stages, concurrently; the last on this goroutine.
	errs := make([]error, len(st.backs))
	var wg sync.WaitGroup
	for r, gr := range st.backs {
		runBack := func() {
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("engine: model run panicked: %v", p)
				}
			}()
			gr.vm.Reset()
			errs[r] = gr.vm.RunAll()
		}
		if r == len(st.backs)-1 {
			runBack()
		} else {
			wg.Go(runBack)
		}
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return stats, e
		}
	}
	if len(*grads) != nParams {
		*grads = make([][]float64, nParams)
	}
	for i := range *grads {
		(*grads)[i] = (*grads)[i][:0]
	}
	seedF, seedH := dataOf(st.full.seedF.Value()), []float64(nil)
	if st.full.seedH != nil {
		seedH = dataOf(st.full.seedH.Value())
	}
	for r, gr := range st.backs {
		lo, hi := st.lo[r], st.lo[r+1]
		if err := gr.addGrads(*grads); err != nil {
			return stats, err
		}
		for _, p := range []struct {
			n   *G.Node
			dst []float64
		}{
			{gr.fs, seedF[lo*NS*f : hi*NS*f]},
			{gr.fq, seedF[(T*NS+lo*NQ)*f : (T*NS+hi*NQ)*f]},
			{gr.hIn, seedH[lo*st.ctxDim : hi*st.ctxDim]},
		} {
			if p.n == nil {
				continue
			}
			g, err := takeGrad(p.n)
			if err != nil {
				return stats, err
			}
			copy(p.dst, g)
			clear(g)
		}
		stats.Loss += scalarOf(gr.r.lossV)
		stats.Data += st.shares[r] * scalarOf(gr.r.dataV)
		if gr.r.klV != nil {
			stats.KL += st.shares[r] * scalarOf(gr.r.klV)
		}
	}
	stats.Lambda = scalarOf(st.backs[0].r.lambdaV)

	// 3. Front with the seeded loss.
	st.full.vm.Reset()
	if err := st.full.vm.RunAll(); err != nil {
		return stats, err
	}
	if err := st.full.addGrads(*grads); err != nil {
		return stats, err
	}
	for k := 0; k < 2; k++ {
		if st.fwd.lstm[k] != nil {
			state.H[k], state.C[k] = st.fwd.lstm[k].FinalState()
		}
	}
	return stats, nil
}
