package engine

import (
	"fmt"

	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// shape identifies a graph: one is built per distinct shape and reused.
type shape struct {
	T, NS, NQ int
	// Way is the classes of the graph's episodes when not Config.Way (a
	// varying episode, or training at Config.TrainWay); 0 for Config.Way.
	Way int
	// Uneven marks a varying episode's graph (Config.Varying, or a fixed
	// model evaluated on varying episodes): shots differ between classes,
	// and its prototypes divide each class by its own (input yw).
	Uneven bool
	train  bool // with KL, gradients and the optimizer's loss
}

// graph is one built gorgonia graph with its machine. It is not safe for
// concurrent use: each goroutine that runs the model owns its graphs.
//
// A graph holds the whole model (evaluation, display, and the reference the
// staged training step is tested against) or one stage of it (see staged).
type graph struct {
	shape
	cfg       Config
	g         *G.ExprGraph
	vm        G.VM
	params    []*G.Node // the parameters this graph reads, in creation order
	paramIdx  []int     // index of each in Params.List
	paramVals []*tensor.Dense

	// inputs
	x, ys, yq, eps, phase, logq0c *G.Node
	yw                            *G.Node    // a varying graph's ys over each class's shots
	h0, c0                        [2]*G.Node // carried LSTM state per direction
	hIn, seedH                    *G.Node    // a task stage's context input and a seeded stage's seed

	// outputs
	loss, data, kl, lambda, pred, omega0 *G.Node
	mu, lv                               *G.Node // q's parameters (T,d), read when flows need them
	ctx                                  *G.Node // a summary stage's s̄
	// r receives the values of read nodes. It is a separate allocation on
	// purpose: gorgonia's read ops point at it, and if they pointed into
	// graph, graph → machine → graph would be a cycle through the tape
	// machine's finalizer, which the garbage collector never frees.
	r *graphReads

	lstm    [2]*ops.LSTMOp
	flow    *ops.FlowOp
	convs   []*ops.ConvNet // ψ's convolution nets, whose dropout each run sets
	resnets []*ops.ResNet  // ψ's ResNets, whose batch-norm mode each run sets
}

// setDropout sets the dropout of the graph's convolution nets for the next
// run: masks from seed in training graphs, none otherwise; and the batch
// norms of its ResNets: each task's support statistics in training graphs
// (recorded to be folded into the running ones), in evaluation those of
// the task's support (the Meta-Dataset reference) or the running ones
// (Config.BNEval).
func (gr *graph) setDropout(seed uint64) {
	for _, n := range gr.convs {
		n.SetStep(seed, gr.train)
	}
	mode := ops.BNEpisode
	switch {
	case gr.train:
		mode = ops.BNTrain
	case gr.cfg.BNEval == BNEvalRunning:
		mode = ops.BNRunning
	}
	for _, n := range gr.resnets {
		n.SetMode(mode)
	}
}

// setMemo sets whether the graph's ψ ops skip a pass whose images and
// parameters are, bit for bit, their last pass's (ops.ConvNet.SetMemo):
// on while an evaluation runs the graph once per draw of ω on the same
// tasks, where ψ would otherwise compute the same features each draw.
func (gr *graph) setMemo(on bool) {
	for _, n := range gr.convs {
		n.SetMemo(on)
	}
	for _, n := range gr.resnets {
		n.SetMemo(on)
	}
}

// memoHits is the number of passes the graph's ψ ops have skipped.
func (gr *graph) memoHits() int {
	h := 0
	for _, n := range gr.convs {
		h += n.MemoHits()
	}
	for _, n := range gr.resnets {
		h += n.MemoHits()
	}
	return h
}

type graphReads struct {
	lossV, dataV, klV, lambdaV, predV, omega0V, muV, lvV, ctxV G.Value
}

// bindParams points every parameter node at the master data again: the
// machine may have replaced a node's value with its dual value's.
func (gr *graph) bindParams() error {
	for i, n := range gr.params {
		if err := G.Let(n, gr.paramVals[i]); err != nil {
			return err
		}
	}
	return nil
}

// grads returns the gradient of every parameter, indexed like Params.List
// (nil for parameters the graph does not read), and zeroes the machine's
// accumulators (gorgonia adds into them across runs).
func (gr *graph) grads(dst [][]float64, nParams int) ([][]float64, error) {
	if len(dst) != nParams {
		dst = make([][]float64, nParams)
	}
	for i := range dst {
		dst[i] = dst[i][:0]
	}
	return dst, gr.addGrads(dst)
}

// addGrads adds the gradient of every parameter the graph reads into
// dst[index in Params.List], growing empty entries, and zeroes the
// machine's accumulators.
func (gr *graph) addGrads(dst [][]float64) error {
	for i, n := range gr.params {
		g, err := takeGrad(n)
		if err != nil {
			return err
		}
		k := gr.paramIdx[i]
		if len(dst[k]) == 0 {
			dst[k] = task.Grow(dst[k], len(g))
			copy(dst[k], g)
		} else {
			for j, v := range g {
				dst[k][j] += v
			}
		}
		clear(g)
	}
	return nil
}

// takeGrad returns the gradient accumulator of n after a run; the caller
// must clear it once read.
func takeGrad(n *G.Node) ([]float64, error) {
	gv, err := n.Grad()
	if err != nil {
		return nil, fmt.Errorf("engine: gradient of %s: %w", n.Name(), err)
	}
	gd, ok := gv.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("engine: gradient of %s has type %T", n.Name(), gv)
	}
	return gd.Data().([]float64), nil
}

// setTargets binds a batch's support targets ys (T·NS rows of gr's way)
// to gr, with a varying graph's yw: each one-hot column over the number of
// its class's support rows in the task.
func (gr *graph) setTargets(ys []float64) {
	setInput(gr.ys, ys)
	if gr.yw == nil {
		return
	}
	yw := dataOf(gr.yw.Value())
	way := gr.Way
	rows := gr.NS * way
	count := make([]float64, way)
	for t := 0; t < gr.T; t++ {
		task := ys[t*rows : (t+1)*rows]
		clear(count)
		for i, v := range task {
			count[i%way] += v
		}
		for i, v := range task {
			if c := count[i%way]; c > 0 {
				yw[t*rows+i] = v / c
			} else {
				yw[t*rows+i] = 0
			}
		}
	}
}

func setInput(n *G.Node, data []float64) {
	if n == nil {
		return
	}
	copy(n.Value().(*tensor.Dense).Data().([]float64), data)
}

func scalarOf(v G.Value) float64 {
	switch x := v.(type) {
	case *G.F64:
		return float64(*x)
	case *tensor.Dense:
		return x.Data().([]float64)[0]
	}
	return 0
}

func dataOf(v G.Value) []float64 {
	if d, ok := v.(*tensor.Dense); ok {
		return d.Data().([]float64)
	}
	return nil
}
