package engine

import (
	"fmt"

	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
)

// mlpSummary computes the task summaries s̄ of a regression model whose ψ
// is an MLP, and their backward, with our kernels instead of a graph: the
// staged step's summary and seeded-summary passes (see staged). On the sine
// sizes these passes are ~65 rows per task range, so gorgonia's per-node
// cost (two graphs of 10 and 41 nodes run in parallel phases, with the
// prefetch competing for a core) made them 1–1.5 ms of a ~6 ms step; here
// they take tens of microseconds and run inline. Their gradients equal the
// graphs' (TestStagedStepMatchesOneGraph compares the whole step with the
// one-graph model, whose gradient the finite-difference test checks, and
// TestMLPSummaryGradients checks this one directly).
type mlpSummary struct {
	embedW, embedB []int // parameter indices of ψ's layers
	inferW, inferB []int // and of the inference network's
	in, out, f, H  int

	acts  [][]float64 // ψ's layer outputs (rows, width), then the inference layers'
	cat   []float64   // [ψ(x), y] (rows, f+out)
	delta [2][]float64
}

func newMLPSummary(cfg Config, ps *Params, inDim, outDim int) *mlpSummary {
	s := &mlpSummary{in: inDim, out: outDim, f: cfg.FeatureDim(), H: cfg.InferHidden}
	for i := range cfg.EmbedHidden {
		s.embedW = append(s.embedW, paramIndex(ps, fmt.Sprintf("embed.W%d", i)))
		s.embedB = append(s.embedB, paramIndex(ps, fmt.Sprintf("embed.b%d", i)))
	}
	for i := range cfg.inferLayers() {
		s.inferW = append(s.inferW, paramIndex(ps, fmt.Sprintf("infer.W%d", i)))
		s.inferB = append(s.inferB, paramIndex(ps, fmt.Sprintf("infer.b%d", i)))
	}
	s.acts = make([][]float64, len(s.embedW)+len(s.inferW))
	return s
}

// forward writes the summaries of T tasks of n support rows (xs, ys) to
// sbar (T, H), keeping what backward needs.
func (s *mlpSummary) forward(ps *Params, xs, ys []float64, T, n int, sbar []float64) {
	rows := T * n
	x, k := xs, s.in
	for l := range s.embedW {
		m := len(ps.List[s.embedB[l]].Data)
		s.acts[l] = task.Grow(s.acts[l], rows*m)
		ops.DenseForward(s.acts[l], x, ps.List[s.embedW[l]].Data, ps.List[s.embedB[l]].Data, rows, k, m, ops.ActReLU)
		x, k = s.acts[l], m
	}
	s.cat = task.Grow(s.cat, rows*(k+s.out))
	for i := 0; i < rows; i++ {
		copy(s.cat[i*(k+s.out):], x[i*k:(i+1)*k])
		copy(s.cat[i*(k+s.out)+k:], ys[i*s.out:(i+1)*s.out])
	}
	x, k = s.cat, k+s.out
	for l := range s.inferW {
		a := len(s.embedW) + l
		s.acts[a] = task.Grow(s.acts[a], rows*s.H)
		ops.DenseForward(s.acts[a], x, ps.List[s.inferW[l]].Data, ps.List[s.inferB[l]].Data, rows, k, s.H, ops.ActELU)
		x, k = s.acts[a], s.H
	}
	clear(sbar[:T*s.H])
	for t := 0; t < T; t++ {
		st := sbar[t*s.H : (t+1)*s.H]
		for i := 0; i < n; i++ {
			for j, v := range x[(t*n+i)*s.H : (t*n+i+1)*s.H] {
				st[j] += v
			}
		}
		for j := range st {
			st[j] /= float64(n)
		}
	}
}

// backward adds the gradients of Σ sbar⊙dsbar w.r.t. ψ's and the inference
// network's parameters to grads (indexed like ps.List), for the inputs of
// the last forward.
func (s *mlpSummary) backward(ps *Params, xs []float64, T, n int, dsbar []float64, grads [][]float64) {
	rows := T * n
	ne := len(s.embedW)
	// Through the mean: every row of task t gets dsbar[t]/n.
	d := task.Grow(s.delta[0], rows*s.H)
	for t := 0; t < T; t++ {
		for i := 0; i < n; i++ {
			for j, v := range dsbar[t*s.H : (t+1)*s.H] {
				d[(t*n+i)*s.H+j] = v / float64(n)
			}
		}
	}
	s.delta[0] = d
	dense := func(wi, bi int, x []float64, y []float64, k, m int, act ops.Activation, d []float64, dx []float64) {
		ops.ActivateGrad(act, d, d, y) // d becomes the gradient at the pre-activation
		addGemmGrad(grads, wi, len(ps.List[wi].Data), func(g []float64) {
			dgemm.Gemm(true, false, k, m, rows, 1, x, k, d, m, 1, g, m)
		})
		addGemmGrad(grads, bi, m, func(g []float64) {
			for i := 0; i < rows; i++ {
				for j, v := range d[i*m : (i+1)*m] {
					g[j] += v
				}
			}
		})
		if dx != nil {
			dgemm.Gemm(false, true, rows, k, m, 1, d, m, ps.List[wi].Data, m, 0, dx, k)
		}
	}
	cur, other := 0, 1
	for l := len(s.inferW) - 1; l >= 0; l-- {
		x, k := s.cat, s.f+s.out
		if l > 0 {
			x, k = s.acts[ne+l-1], s.H
		}
		dx := task.Grow(s.delta[other], rows*k)
		s.delta[other] = dx
		dense(s.inferW[l], s.inferB[l], x, s.acts[ne+l], k, s.H, ops.ActELU, s.delta[cur], dx)
		cur, other = other, cur
	}
	// s.delta[cur] is the gradient w.r.t. [ψ(x), y]; keep ψ's columns.
	dcat, k := s.delta[cur], s.f+s.out
	dF := task.Grow(s.delta[other], rows*s.f)
	for i := 0; i < rows; i++ {
		copy(dF[i*s.f:(i+1)*s.f], dcat[i*k:i*k+s.f])
	}
	s.delta[other] = dF
	cur, other = other, cur
	for l := ne - 1; l >= 0; l-- {
		x, kin := xs, s.in
		if l > 0 {
			x, kin = s.acts[l-1], len(ps.List[s.embedB[l-1]].Data)
		}
		m := len(ps.List[s.embedB[l]].Data)
		var dx []float64
		if l > 0 {
			dx = task.Grow(s.delta[other], rows*kin)
			s.delta[other] = dx
		}
		dense(s.embedW[l], s.embedB[l], x, s.acts[l], kin, m, ops.ActReLU, s.delta[cur], dx)
		cur, other = other, cur
	}
}

// addGemmGrad lets fn add into grads[i], which starts at zero if empty.
func addGemmGrad(grads [][]float64, i, n int, fn func(g []float64)) {
	if len(grads[i]) == 0 {
		grads[i] = task.Grow(grads[i], n)
		clear(grads[i])
	}
	fn(grads[i])
}
