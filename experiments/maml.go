package experiments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
)

// MAMLConfig describes MAML (Finn et al. 2017) on sine regression, the
// baseline of the paper's regression figure. DefaultMAMLConfig fills every
// field; zero values are not defaults, and Validate rejects what cannot run.
type MAMLConfig struct {
	Shot      int `json:"shot"`       // support points per task (k)
	MetaBatch int `json:"meta_batch"` // tasks per meta-update
	Query     int `json:"query"`      // query points per training task
	// InnerSteps is the number of inner SGD steps in meta-training (the
	// MAML paper's sine setup: 1); TestInnerSteps those at evaluation and
	// in Predict (the paper: 10).
	InnerSteps     int     `json:"inner_steps"`
	TestInnerSteps int     `json:"test_inner_steps"`
	InnerLR        float64 `json:"inner_lr"` // α, the inner SGD rate
	OuterLR        float64 `json:"outer_lr"` // Adam's rate for the meta-update
	Iters          int     `json:"iters"`
	Seed           uint64  `json:"seed"`
	// FirstOrder drops the second-order terms (the Hessian-vector products
	// through the inner steps): first-order MAML.
	FirstOrder bool  `json:"first_order"`
	EvalTasks  int   `json:"eval_tasks"`
	EvalQuery  int   `json:"eval_query"`
	Hidden     []int `json:"hidden"` // hidden widths of the ReLU MLP
}

// DefaultMAMLConfig is the MAML paper's sine setup for k shots — network
// [40, 40], meta-batch 25, α = 0.01, one inner step in training and ten at
// test, Adam 1e-3 — with the data and protocol of the sine-<k>shot presets:
// 10 query points per training task, 20,000 iterations, seed 1, evaluation
// on 1,000 fresh tasks × 100 query points.
func DefaultMAMLConfig(shot int) MAMLConfig {
	return MAMLConfig{
		Shot: shot, MetaBatch: 25, Query: 10,
		InnerSteps: 1, TestInnerSteps: 10, InnerLR: 0.01, OuterLR: 1e-3,
		Iters: 20000, Seed: 1,
		EvalTasks: 1000, EvalQuery: 100,
		Hidden: []int{40, 40},
	}
}

// ErrMAMLConfig is wrapped by every configuration error.
var ErrMAMLConfig = errors.New("experiments: invalid MAML config")

// Validate reports the first setting that cannot run.
func (c MAMLConfig) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrMAMLConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Shot <= 0:
		return bad("shot must be positive, got %d", c.Shot)
	case c.MetaBatch <= 0:
		return bad("meta_batch must be positive, got %d", c.MetaBatch)
	case c.Query <= 0:
		return bad("query must be positive, got %d", c.Query)
	case c.InnerSteps < 0 || c.TestInnerSteps < 0:
		return bad("inner steps must not be negative, got %d and %d", c.InnerSteps, c.TestInnerSteps)
	case !(c.InnerLR >= 0) || math.IsInf(c.InnerLR, 0):
		return bad("inner_lr must be finite and non-negative, got %g", c.InnerLR)
	case !(c.OuterLR > 0) || math.IsInf(c.OuterLR, 0):
		return bad("outer_lr must be finite and positive, got %g", c.OuterLR)
	case c.Iters < 0:
		return bad("iters must not be negative, got %d", c.Iters)
	case c.EvalTasks <= 0 || c.EvalQuery <= 0:
		return bad("eval_tasks and eval_query must be positive, got %d and %d", c.EvalTasks, c.EvalQuery)
	}
	for _, h := range c.Hidden {
		if h <= 0 {
			return bad("hidden widths must be positive, got %v", c.Hidden)
		}
	}
	return nil
}

// Random streams: the engine's stream numbers (engine/model.go,
// unexported there), drawn through task.Stream as the engine draws them:
// every draw comes from a PCG seeded by (seed, stream, index). With the same seed MAML thus
// trains on the very tasks MetaKernel trains on (iteration i's batch is
// stream 2, index i) and is evaluated on the very tasks MetaKernel is
// evaluated on (stream 4), a stream disjoint from training.
const (
	mamlStreamInit       uint64 = 1
	mamlStreamTrainTasks uint64 = 2
	mamlStreamEvalTasks  uint64 = 4
)

// MAMLModel is a meta-trained initialization and its optimizer state.
type MAMLModel struct {
	Cfg          MAMLConfig
	Params       []float64 // flat: per layer the weights (rows = outputs), then the biases
	Iter         int       // meta-updates done
	TrainSeconds float64   // wall time of those updates
	LastLoss     float64   // mean query loss after adaptation, last meta-batch
	LastGradNorm float64   // norm of the last meta-gradient

	// Adam's moments and step count, kept so that training can continue
	// exactly where it stopped.
	M, V []float64

	window mamlWindow // MAMLBaseline's partial metrics row
	net    *mamlNet
	src    task.Source
}

// NewMAML initializes a model for sine tasks from cfg.Seed (MAML's
// reference initialization: truncated normal weights with sd 0.01, zero
// biases).
func NewMAML(cfg MAMLConfig) (*MAMLModel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newMAMLOn(cfg, datasets.Sine{}), nil
}

// newMAMLOn is NewMAML for a validated cfg on any regression family.
func newMAMLOn(cfg MAMLConfig, src task.Source) *MAMLModel {
	cfg.Hidden = append([]int(nil), cfg.Hidden...)
	net := newMAMLNet(src.InDim(), cfg.Hidden, src.OutDim())
	m := &MAMLModel{Cfg: cfg, Params: make([]float64, net.n), M: make([]float64, net.n), V: make([]float64, net.n), net: net, src: src}
	net.init(m.Params, task.Stream(cfg.Seed, mamlStreamInit, 0))
	return m
}

// Adam's constants (Kingma & Ba; TensorFlow's defaults, which the MAML
// code uses).
const (
	mamlAdamB1  = 0.9
	mamlAdamB2  = 0.999
	mamlAdamEps = 1e-8
)

// Train continues meta-training from m.Iter to m.Cfg.Iters. Iteration i
// draws its meta-batch from the seeded stream (seed, train tasks, i), so a
// run stopped and continued gives the same parameters as one that was not.
// progress, if set, is called after every meta-update with the number of
// updates done and the mean query loss after adaptation; it runs on the
// training goroutine, so a caller that draws should throttle. When ctx is
// cancelled Train returns ctx's error after the last whole update; the
// model stays usable. A non-finite loss or gradient stops training without
// applying the update and returns an error wrapping engine.ErrNonFinite.
func (m *MAMLModel) Train(ctx context.Context, progress func(iter int, loss float64)) error {
	return m.train(ctx, func() error {
		if progress != nil {
			progress(m.Iter, m.LastLoss)
		}
		return nil
	})
}

// train is Train with a hook after every update, which may end training
// early by lowering m.Cfg.Iters, or abort it with an error.
func (m *MAMLModel) train(ctx context.Context, after func() error) error {
	c, net := m.Cfg, m.net
	T, ns, nq := c.MetaBatch, c.Shot, c.Query
	workers := min(runtime.GOMAXPROCS(0), T)
	work := make([]*mamlTaskWork, workers)
	for i := range work {
		work[i] = newMAMLTaskWork(net, c.InnerSteps, ns, nq)
	}
	// One gradient per task, summed in task order afterwards, so that the
	// result does not depend on which worker ran which task.
	grads := make([][]float64, T)
	for t := range grads {
		grads[t] = make([]float64, net.n)
	}
	losses := make([]float64, T)
	g := make([]float64, net.n)
	var b task.Batch
	in, out := m.src.InDim(), m.src.OutDim()
	for m.Iter < m.Cfg.Iters {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		b.Resize(T, ns, nq, in, out)
		m.src.Sample(task.Stream(c.Seed, mamlStreamTrainTasks, uint64(m.Iter)), &b)
		mamlParallelFor(T, workers, func(w, t int) {
			losses[t] = work[w].metaGrad(net, m.Params,
				b.XS[t*ns*in:(t+1)*ns*in], b.YS[t*ns*out:(t+1)*ns*out],
				b.XQ[t*nq*in:(t+1)*nq*in], b.YQ[t*nq*out:(t+1)*nq*out],
				c.InnerLR, c.FirstOrder, grads[t])
		})
		// The meta-loss is the mean over the batch's tasks.
		clear(g)
		var loss float64
		for t := 0; t < T; t++ {
			mamlAxpy(1/float64(T), grads[t], g)
			loss += losses[t] / float64(T)
		}
		norm := math.Sqrt(mamlDot(g, g))
		if math.IsNaN(loss) || math.IsInf(loss, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
			return fmt.Errorf("experiments: MAML iteration %d: loss %g, gradient norm %g: %w", m.Iter+1, loss, norm, engine.ErrNonFinite)
		}
		m.adam(g)
		m.Iter++
		m.LastLoss, m.LastGradNorm = loss, norm
		m.TrainSeconds += time.Since(t0).Seconds()
		if err := after(); err != nil {
			return err
		}
	}
	return nil
}

// adam applies one Adam step with gradient g (m.Iter is the step count
// before it).
func (m *MAMLModel) adam(g []float64) {
	step := float64(m.Iter + 1)
	lr := m.Cfg.OuterLR * math.Sqrt(1-math.Pow(mamlAdamB2, step)) / (1 - math.Pow(mamlAdamB1, step))
	for i, gi := range g {
		m.M[i] = mamlAdamB1*m.M[i] + (1-mamlAdamB1)*gi
		m.V[i] = mamlAdamB2*m.V[i] + (1-mamlAdamB2)*gi*gi
		m.Params[i] -= lr * m.M[i] / (math.Sqrt(m.V[i]) + mamlAdamEps)
	}
}

// mamlParallelFor runs fn(worker, i) for i in [0, n) on workers goroutines,
// handing out indices one at a time (tasks cost the same, but the machine
// may be busy with other work).
func mamlParallelFor(n, workers int, fn func(worker, i int)) {
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}(w)
	}
	wg.Wait()
}

// Evaluate is the MetaKernel protocol for MAML: tasks fresh tasks from the
// evaluation stream of seed (the tasks engine.Model.Evaluate draws with
// the same seed, shot and query), each adapted by m.Cfg.TestInnerSteps SGD
// steps on its Shot support points, the MSE over its query points, and the
// mean over tasks ± 1.96·sd/√n. MAML's prediction is deterministic, so
// Draws is 1.
func (m *MAMLModel) Evaluate(tasks, query int, seed uint64) (engine.EvalResult, error) {
	return m.evaluateOn(m.src, tasks, query, seed)
}

// evaluateOn is Evaluate on tasks from src (a test split of the family).
func (m *MAMLModel) evaluateOn(src task.Source, tasks, query int, seed uint64) (engine.EvalResult, error) {
	if tasks <= 0 || query <= 0 {
		return engine.EvalResult{}, fmt.Errorf("experiments: evaluation needs positive tasks and query, got %d and %d", tasks, query)
	}
	c, net := m.Cfg, m.net
	if src.InDim() != m.src.InDim() || src.OutDim() != m.src.OutDim() {
		return engine.EvalResult{}, fmt.Errorf("experiments: MAML trained on %d→%d tasks cannot evaluate %s (%d→%d)", m.src.InDim(), m.src.OutDim(), src.Name(), src.InDim(), src.OutDim())
	}
	ns, in, out := c.Shot, src.InDim(), src.OutDim()
	// Draw every task first, in the engine's batches of MetaBatch tasks,
	// so the stream is consumed exactly as engine.Model.Evaluate does.
	rng := task.Stream(seed, mamlStreamEvalTasks, 0)
	batches := make([]task.Batch, 0, (tasks+c.MetaBatch-1)/c.MetaBatch)
	for done := 0; done < tasks; {
		T := min(c.MetaBatch, tasks-done)
		var b task.Batch
		b.Resize(T, ns, query, in, out)
		src.Sample(rng, &b)
		batches = append(batches, b)
		done += T
	}
	res := engine.EvalResult{Metric: "mse", Tasks: tasks, Query: query, Draws: 1, PerTask: make([]float64, tasks)}
	type scratch struct {
		p           *mamlPass
		grad, theta []float64
	}
	workers := min(runtime.GOMAXPROCS(0), tasks)
	ws := make([]scratch, workers)
	for i := range ws {
		ws[i] = scratch{net.newPass(max(ns, query)), make([]float64, net.n), make([]float64, net.n)}
	}
	mamlParallelFor(tasks, workers, func(w, i int) {
		b, t := &batches[i/c.MetaBatch], i%c.MetaBatch
		s := ws[w]
		net.adapt(m.Params, b.XS[t*ns*in:(t+1)*ns*in], b.YS[t*ns*out:(t+1)*ns*out], c.TestInnerSteps, c.InnerLR, s.p, s.grad, s.theta)
		s.p.resize(net, query)
		pred := net.forward(s.theta, b.XQ[t*query*in:(t+1)*query*in], s.p)
		var se float64
		for k, y := range b.YQ[t*query*out : (t+1)*query*out] {
			se += (pred[k] - y) * (pred[k] - y)
		}
		res.PerTask[i] = se / float64(query*out)
	})
	res.Mean, res.CI95 = engine.MeanCI(res.PerTask)
	if math.IsNaN(res.Mean) || math.IsInf(res.Mean, 0) {
		return res, fmt.Errorf("experiments: MAML evaluation produced %g: %w", res.Mean, engine.ErrNonFinite)
	}
	return res, nil
}

// Predict adapts the initialization by steps SGD steps (rate InnerLR) on
// the support set (xs, ys) and returns the adapted network's predictions at
// xq: the MAML curve of the sine-fit figure. It panics when len(xs) !=
// len(ys) (a programming error).
func (m *MAMLModel) Predict(xs, ys, xq []float64, steps int) []float64 {
	if len(xs) != len(ys) {
		panic(fmt.Sprintf("experiments: MAMLModel.Predict: %d support inputs, %d targets", len(xs), len(ys)))
	}
	net := m.net
	theta, grad := make([]float64, net.n), make([]float64, net.n)
	p := net.newPass(len(ys))
	net.adapt(m.Params, xs, ys, steps, m.Cfg.InnerLR, p, grad, theta)
	p.resize(net, len(xq))
	return append([]float64(nil), net.forward(theta, xq, p)...)
}
