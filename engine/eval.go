package engine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
)

// EvalResult is a metric over fresh tasks with its 95% confidence interval.
type EvalResult struct {
	Metric string  `json:"metric"` // "mse" for regression, "accuracy" (a fraction) for classification
	Mean   float64 `json:"mean"`
	CI95   float64 `json:"ci95"` // 1.96·sd/√n over tasks
	Tasks  int     `json:"tasks"`
	Query  int     `json:"query"`   // query points per task
	Draws  int     `json:"samples"` // ω draws averaged per prediction
	// PerTask holds each task's metric, in stream order.
	PerTask []float64 `json:"-"`
}

// NonFiniteParamError is the error for a model whose parameters (or
// batch-norm statistics, or carried context) hold NaN or ±Inf where it is
// to be evaluated or exported: such a model predicts nothing, and
// evaluating it would end in the graph machine's error about an op deep
// inside it. A training checkpoint of a diverged run may hold such values
// and still be kept (its resume refuses the step, not the file); the
// refusal belongs where the parameters are to be used. It matches
// ErrNonFinite and the error of the file it was read from
// (ErrBadModelFile, ErrBadCheckpoint).
type NonFiniteParamError struct {
	File   string  // the file the model was read from; "" for a model in memory
	Tensor string  // "parameter NAME", "buffer NAME", "context state H[0]"
	Value  float64 // the first non-finite value
	kind   error
}

func (e *NonFiniteParamError) Error() string {
	where := ""
	if e.File != "" {
		where = e.File + ": "
	}
	return fmt.Sprintf("engine: %s%s holds %v: the model diverged or the file is damaged", where, e.Tensor, e.Value)
}

// Is matches ErrNonFinite and the error kind of the file.
func (e *NonFiniteParamError) Is(target error) bool {
	return target == ErrNonFinite || e.kind != nil && target == e.kind
}

// checkFinite returns a *NonFiniteParamError for the first tensor of ck
// that holds a NaN or ±Inf (parameters, buffers, context state), nil when
// every value is finite. file and kind label the error.
func (ck *Checkpoint) checkFinite(file string, kind error) error {
	for _, group := range []struct {
		what string
		ps   []*Param
	}{{"parameter", ck.Params}, {"buffer", ck.Buffers}} {
		for _, p := range group.ps {
			if p == nil {
				continue
			}
			if x, bad := firstNonFinite(p.Data); bad {
				return &NonFiniteParamError{File: file, Tensor: group.what + " " + p.Name, Value: x, kind: kind}
			}
		}
	}
	for k := 0; k < 2; k++ {
		for j, v := range [][]float64{ck.State.H[k], ck.State.C[k]} {
			if x, bad := firstNonFinite(v); bad {
				return &NonFiniteParamError{File: file, Tensor: fmt.Sprintf("context state %s[%d]", "HC"[j:j+1], k), Value: x, kind: kind}
			}
		}
	}
	return nil
}

// firstNonFinite is the first NaN or ±Inf of v.
func firstNonFinite(v []float64) (float64, bool) {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return x, true
		}
	}
	return 0, false
}

// String formats the result the way the paper reports it.
func (r EvalResult) String() string {
	if r.Metric == "accuracy" {
		return fmt.Sprintf("accuracy %.2f%% ± %.2f (%d tasks)", 100*r.Mean, 100*r.CI95, r.Tasks)
	}
	return fmt.Sprintf("%s %.4f ± %.4f (%d tasks)", r.Metric, r.Mean, r.CI95, r.Tasks)
}

// Evaluate measures the model on tasks fresh tasks with query points (per
// class, when classifying) each, drawn from the evaluation stream of seed
// (disjoint from training). Tasks go through the model in meta-batches of
// the training size, so the context LSTM sees sequences like those it was
// trained on; it starts from the model's carried state and carries it
// across evaluation batches without changing the model's own state. Each
// prediction averages samples independent draws of the bases (the
// posterior predictive: the mean for regression, the mean class
// probabilities for classification).
func (m *Model) Evaluate(tasks, query, samples int, seed uint64) (EvalResult, error) {
	return m.evaluate(m.Src, streamEvalTasks, streamEvalNoise, tasks, query, samples, seed, m.Cfg.EvalSupportShift)
}

// EvaluateOn is Evaluate on tasks drawn from src instead of the model's own
// task source: a test split, or the same family at another way or shot.
func (m *Model) EvaluateOn(src task.Source, tasks, query, samples int, seed uint64) (EvalResult, error) {
	return m.evaluate(src, streamEvalTasks, streamEvalNoise, tasks, query, samples, seed, m.Cfg.EvalSupportShift)
}

// EvaluateSources evaluates on each named source (tasks episodes each,
// the same task and noise streams as EvaluateOn) and returns their mean —
// the mean of the sources' means, its 95% interval √(Σ ci²)/n, as the
// Meta-Dataset table averages its rows — and each source's result.
func (m *Model) EvaluateSources(srcs []NamedSource, tasks, query, samples int, seed uint64) (EvalResult, map[string]*EvalResult, error) {
	by := make(map[string]*EvalResult, len(srcs))
	var mean EvalResult
	var ci2 float64
	// Progress counts across the sources.
	report := m.EvalProgress
	if report != nil {
		defer func() { m.EvalProgress = report }()
	}
	for i, s := range srcs {
		if report != nil {
			m.EvalProgress = func(done, _ int) { report(i*tasks+done, len(srcs)*tasks) }
		}
		ev, err := m.EvaluateOn(s.Source, tasks, query, samples, seed)
		if err != nil {
			return EvalResult{}, nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		by[s.Name] = &ev
		mean.Metric, mean.Query, mean.Draws = ev.Metric, ev.Query, ev.Draws
		mean.Mean += ev.Mean / float64(len(srcs))
		mean.Tasks += ev.Tasks
		ci2 += ev.CI95 * ev.CI95
	}
	if len(srcs) > 0 {
		mean.CI95 = math.Sqrt(ci2) / float64(len(srcs))
	}
	return mean, by, nil
}

// evalMemo lets evaluate's draws share one pass of ψ (graph.setMemo); tests
// turn it off to compare against evaluations that run ψ every draw.
var evalMemo = true

// evaluate is Evaluate on tasks from src, with tasks and noise from the
// given random streams, each support image joined by its copies shifted by
// up to shift pixels (Config.EvalSupportShift; the validations during
// training pass 0).
func (m *Model) evaluate(src task.Source, taskStream, noiseStream uint64, tasks, query, samples int, seed uint64, shift int) (EvalResult, error) {
	if tasks <= 0 || query <= 0 || samples <= 0 {
		return EvalResult{}, fmt.Errorf("engine: evaluation needs positive tasks, query and samples, got %d, %d, %d", tasks, query, samples)
	}
	// The sizes may come from a flag (eval --eval-tasks) rather than a
	// validated config: their ceilings are Validate's, checked before the
	// per-task results are allocated.
	if tasks > MaxTasks || query > MaxSize || samples > MaxSize {
		return EvalResult{}, fmt.Errorf("engine: evaluation of %d tasks, %d queries and %d draws: at most %d tasks and %d queries and draws", tasks, query, samples, MaxTasks, MaxSize)
	}
	c := m.Cfg
	res := EvalResult{Metric: "mse", Tasks: tasks, Query: query, Draws: samples, PerTask: make([]float64, 0, tasks)}
	if c.Classify() {
		res.Metric = "accuracy"
	}
	taskRNG := task.Stream(seed, taskStream, 0)
	state := m.State.clone()
	var b, shifted task.Batch
	var mean, prob []float64
	vary, _ := src.(task.Varying)
	if vary != nil {
		// The sampler draws each episode's query size.
		res.Query = 0
	}
	for batch := 0; len(res.PerTask) < tasks; batch++ {
		select {
		case <-m.cancel:
			return res, fmt.Errorf("engine: evaluation stopped after %d of %d tasks: %w", len(res.PerTask), tasks, context.Canceled)
		default:
		}
		// Varying episodes go one at a time, each in its own shape.
		T := min(c.MetaBatch, tasks-len(res.PerTask))
		if vary != nil {
			vary.SampleVarying(taskRNG, &b)
		} else {
			b.Resize(T, c.SupportPoints(), query*max(c.Way, 1), src.InDim(), src.OutDim())
			src.Sample(taskRNG, &b)
		}
		bp := &b
		if shift > 0 {
			ch, h, w, _ := c.ImageInput()
			shiftSupport(&shifted, &b, h, w, ch, shift)
			bp = &shifted
		}
		T, nq, out := bp.T, bp.NQ, bp.OutDim
		gr, err := m.graph(m.batchShape(bp, src))
		if err != nil {
			return res, err
		}
		n := len(bp.YQ)
		mean = task.Grow(mean, n)
		clear(mean)
		prob = task.Grow(prob, out)
		var next LSTMState
		// The draws share the batch's images and parameters, so ψ runs
		// once for them all.
		gr.setMemo(evalMemo && samples > 1)
		for s := 0; s < samples; s++ {
			m.drawNoise(task.Stream(seed, noiseStream, uint64(batch*samples+s)), T)
			st := state.clone()
			if err := m.run(gr, bp, &m.noise, &st, nil); err != nil {
				return res, m.evalError(err)
			}
			if s == 0 {
				next = st
			}
			pred := dataOf(gr.r.predV)[:n]
			if !c.Classify() {
				for i, v := range pred {
					mean[i] += v / float64(samples)
				}
				continue
			}
			for i := 0; i < n; i += out {
				ops.Softmax(prob, pred[i:i+out])
				for k, p := range prob {
					mean[i+k] += p / float64(samples)
				}
			}
		}
		state = next
		per := nq * out
		for t := 0; t < T; t++ {
			var v float64
			for i := t * per; i < (t+1)*per; i += out {
				if c.Classify() {
					if ops.Argmax(mean[i:i+out]) == ops.Argmax(bp.YQ[i:i+out]) {
						v++
					}
					continue
				}
				for k := i; k < i+out; k++ {
					d := mean[k] - bp.YQ[k]
					v += d * d
				}
			}
			if c.Classify() {
				res.PerTask = append(res.PerTask, v/float64(nq))
			} else {
				res.PerTask = append(res.PerTask, v/float64(per))
			}
		}
		if m.EvalProgress != nil {
			m.EvalProgress(len(res.PerTask), tasks)
		}
	}
	res.Mean, res.CI95 = MeanCI(res.PerTask)
	if math.IsNaN(res.Mean) {
		return res, fmt.Errorf("engine: evaluation produced NaN: %w", ErrNonFinite)
	}
	return res, nil
}

// evalError is the error of an evaluation whose graph failed: a model
// whose values are not finite is named by its first such tensor (the
// machine's own error would name an op deep inside, "PC 62. Failed to
// execute instruction KRRSolve#22 …"); any other failure is the op's
// error without the machine's wrapping.
func (m *Model) evalError(err error) error {
	if err := m.SyncHost(); err != nil {
		return err
	}
	held := Checkpoint{Params: m.Params.List, Buffers: bnBuffers(m.Cfg.ResNet, m.BN), State: m.State}
	if nf := held.checkFinite("", nil); nf != nil {
		return fmt.Errorf("engine: evaluation: %w", nf)
	}
	cause := ops.Cause(err)
	if ke := (*ops.KRRError)(nil); errors.As(cause, &ke) {
		// The advice of a training step (lower the learning rate) does not
		// apply to parameters already trained.
		return &evalFailure{cause: cause, msg: "engine: evaluation failed: " + ke.Problem() +
			": the model's values overflow on these tasks; try fewer bases, or the checkpoint of an earlier iteration"}
	}
	return fmt.Errorf("engine: evaluation failed: %w", cause)
}

// evalFailure is an evaluation's error with its own words, matching its
// cause.
type evalFailure struct {
	msg   string
	cause error
}

func (e *evalFailure) Error() string { return e.msg }
func (e *evalFailure) Unwrap() error { return e.cause }

// shiftSupport makes dst the episodes of src with each support image
// followed by its copies shifted by every (dy, dx) in −r … r but (0, 0)
// (Config.EvalSupportShift), each copy with its image's target; queries
// are src's. Images are h×w×c, channels-last.
func shiftSupport(dst, src *task.Batch, h, w, c, r int) {
	n := (2*r + 1) * (2*r + 1)
	in, out := src.InDim, src.OutDim
	dst.Resize(src.T, src.NS*n, src.NQ, in, out)
	copy(dst.XQ, src.XQ)
	copy(dst.YQ, src.YQ)
	tmp := make([]float64, in)
	for i := range src.T * src.NS {
		x, y := src.XS[i*in:(i+1)*in], src.YS[i*out:(i+1)*out]
		j := i * n
		copy(dst.XS[j*in:], x)
		copy(dst.YS[j*out:], y)
		for dy := -r; dy <= r; dy++ {
			for dx := -r; dx <= r; dx++ {
				if dy == 0 && dx == 0 {
					continue
				}
				j++
				img := dst.XS[j*in : (j+1)*in]
				copy(img, x)
				task.ShiftImage(img, tmp, h, w, c, dy, dx)
				copy(dst.YS[j*out:(j+1)*out], y)
			}
		}
	}
}

// MeanCI is the mean of x and its 95% interval half-width 1.96·sd/√n (sample
// standard deviation): the paper's way of reporting an evaluation.
func MeanCI(x []float64) (mean, ci float64) {
	n := float64(len(x))
	for _, v := range x {
		mean += v
	}
	mean /= n
	if len(x) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, 1.96 * math.Sqrt(ss/(n-1)) / math.Sqrt(n)
}

// Display is what the workbench draws of one fixed task: the bases after
// every flow step and, for 1-D regression, the fit.
type Display struct {
	Iter int
	// OmegaSteps[k] holds the D×Dim bases of the display task after flow
	// step k (k = 0 is the Gaussian q0); one entry without flows, none for
	// the RBF kernel.
	OmegaSteps [][]float64
	D, Dim     int

	GridX, Truth       []float64
	PredMean, PredSD   []float64 // over Draws draws of the bases
	SupportX, SupportY []float64
	TaskMSE            float64 // of PredMean against Truth on the grid
	Draws              int
}

const displayGrid = 100

// Display computes the display snapshot for display task number which (a
// fixed stream, so the same number gives the same task in every run).
// Classification tasks have no curve: their snapshot holds the bases only,
// from one draw. Other task families without a curve give nil.
func (m *Model) Display(iter, which, draws int) (*Display, error) {
	c := m.Cfg
	cs, ok := m.Src.(task.CurveSource)
	if !ok {
		if !c.Classify() {
			return nil, nil
		}
		return m.basesDisplay(iter, which)
	}
	gr, err := m.graph(shape{T: 1, NS: c.SupportPoints(), NQ: displayGrid})
	if err != nil {
		return nil, err
	}
	lo, hi := cs.Domain()
	grid := make([]float64, displayGrid)
	for i := range grid {
		grid[i] = lo + (hi-lo)*float64(i)/float64(displayGrid-1)
	}
	var b task.Batch
	b.Resize(1, c.SupportPoints(), displayGrid, 1, 1)
	cs.SampleCurve(task.Stream(c.Seed, streamDisplayTask, uint64(which)), &b, grid)
	d := &Display{Iter: iter, D: c.Bases, Dim: c.FeatureDim(), GridX: grid, Draws: draws,
		Truth:    append([]float64(nil), b.YQ...),
		SupportX: append([]float64(nil), b.XS...), SupportY: append([]float64(nil), b.YS...),
		PredMean: make([]float64, displayGrid), PredSD: make([]float64, displayGrid)}
	sq := make([]float64, displayGrid)
	for s := 0; s < draws; s++ {
		m.drawNoise(task.Stream(c.Seed, streamDisplayNoise, uint64(iter)*1024+uint64(s)), 1)
		st := m.State.clone()
		if err := m.run(gr, &b, &m.noise, &st, nil); err != nil {
			return nil, m.evalError(err)
		}
		for i, v := range dataOf(gr.r.predV)[:displayGrid] {
			d.PredMean[i] += v
			sq[i] += v * v
		}
		if s == 0 {
			d.OmegaSteps = m.omegaSteps(gr)
		}
	}
	var se float64
	for i := range grid {
		mu := d.PredMean[i] / float64(draws)
		d.PredMean[i] = mu
		d.PredSD[i] = math.Sqrt(math.Max(0, sq[i]/float64(draws)-mu*mu))
		se += (mu - d.Truth[i]) * (mu - d.Truth[i])
	}
	d.TaskMSE = se / displayGrid
	return d, nil
}

// omegaSteps copies the bases of task 0 of gr's last run after every flow
// step (one entry without flows, none for the RBF kernel).
func (m *Model) omegaSteps(gr *graph) [][]float64 {
	c := m.Cfg
	switch {
	case gr.flow != nil:
		// The flow runs on ε; the bases after step k are μ + σ⊙f_k(ε).
		steps := gr.flow.Steps(0)
		mu, lv, dim := dataOf(gr.r.muV), dataOf(gr.r.lvV), c.FeatureDim()
		for _, w := range steps {
			for i := range w {
				k := i % dim
				w[i] = mu[k] + math.Exp(0.5*lv[k])*w[i]
			}
		}
		return steps
	case gr.r.omega0V != nil:
		return [][]float64{append([]float64(nil), dataOf(gr.r.omega0V)[:c.Bases*c.FeatureDim()]...)}
	case c.Kernel == KernelRFF:
		return [][]float64{append([]float64(nil), m.noise.eps[:c.Bases*c.FeatureDim()]...)}
	}
	return nil
}

// basesDisplay is Display for a classification task: one draw of its
// bases, so that the workbench can show them after each flow step.
func (m *Model) basesDisplay(iter, which int) (*Display, error) {
	c := m.Cfg
	var b task.Batch
	rng := task.Stream(c.Seed, streamDisplayTask, uint64(which))
	if v, ok := m.Src.(task.Varying); ok {
		v.SampleVarying(rng, &b)
	} else {
		m.resizeTraining(&b, 1)
		m.Src.Sample(rng, &b)
	}
	gr, err := m.graph(m.batchShape(&b, m.Src))
	if err != nil {
		return nil, err
	}
	m.drawNoise(task.Stream(c.Seed, streamDisplayNoise, uint64(iter)*1024), 1)
	st := m.State.clone()
	if err := m.run(gr, &b, &m.noise, &st, nil); err != nil {
		return nil, m.evalError(err)
	}
	return &Display{Iter: iter, D: c.Bases, Dim: c.FeatureDim(), Draws: 1, OmegaSteps: m.omegaSteps(gr)}, nil
}
