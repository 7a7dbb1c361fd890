package ops

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ConvNet is the convolutional feature extractor of a ConvSpec as gorgonia
// ops: Apply adds one op that runs all blocks (forward and, through
// SymDiff, backward) in one node, since gorgonia's per-op cost would
// dominate a graph of small convolution, pooling and dropout nodes.
//
// SetStep chooses the dropout masks of the next run: training steps pass
// their own seed, evaluation passes train = false (no dropout). SetMemo
// lets evaluation runs skip a pass whose inputs are the last one's.
type ConvNet struct {
	pool  *Pool
	spec  ConvSpec
	seed  uint64
	train bool
	memo  bool
	ops   []*ConvOp // op i draws dropout stream i
}

// NewConvNet returns a network for spec whose ops spread their images over
// p's workers; it starts in evaluation mode.
func NewConvNet(p *Pool, spec ConvSpec) (*ConvNet, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &ConvNet{pool: p, spec: spec}, nil
}

// Spec returns the network's spec.
func (n *ConvNet) Spec() ConvSpec { return n.spec }

// SetStep sets the dropout of the following runs of every op of the net:
// with train, masks drawn from seed (the same seed gives the same masks,
// whatever the number of cores); without, no dropout.
func (n *ConvNet) SetStep(seed uint64, train bool) { n.seed, n.train = seed, train }

// SetMemo sets whether the evaluation runs (no dropout) of every op of the
// net remember their inputs and output, and return that output, without a
// pass, when a run's images and parameters are the remembered ones bit for
// bit (featureMemo): for evaluations that run the graph once per draw of ω
// on the same tasks. Off, the ops forget what they hold.
func (n *ConvNet) SetMemo(on bool) { n.memo = on }

// MemoHits is the number of passes the net's ops have skipped (SetMemo).
func (n *ConvNet) MemoHits() int {
	h := 0
	for _, op := range n.ops {
		h += op.memo.hits
	}
	return h
}

// Apply adds the network applied to x (N, InDim), with weights ws[l]
// (Filters, FanIn(l)) and biases bs[l] (Filters), and returns the (N,
// OutDim) features. x is data: no gradient flows to it. Every Apply makes
// an op with its own caches and its own dropout stream, so the support and
// query images of a task may go through separate calls.
//
// The op and its gradient nodes keep their output storage between runs of a
// machine, so a run overwrites the values of the previous one. Values are
// float64 only.
func (n *ConvNet) Apply(x *G.Node, ws, bs []*G.Node) (*G.Node, error) {
	s := n.spec
	if len(ws) != s.Blocks || len(bs) != s.Blocks {
		return nil, fmt.Errorf("conv: %d weights and %d biases, want %d of each", len(ws), len(bs), s.Blocks)
	}
	check := func(nd *G.Node, name string, shape ...int) error {
		if nd == nil {
			return fmt.Errorf("conv: %s is nil", name)
		}
		if nd.Dtype() != G.Float64 {
			return fmt.Errorf("conv: %s has dtype %v, want float64", name, nd.Dtype())
		}
		sh := nd.Shape()
		if len(sh) != len(shape) {
			return fmt.Errorf("conv: %s has shape %v, want %d dimensions", name, sh, len(shape))
		}
		for i, d := range shape {
			if d >= 0 && sh[i] != d {
				return fmt.Errorf("conv: %s has shape %v, want %v (-1: any)", name, sh, shape)
			}
		}
		return nil
	}
	if err := check(x, "x", -1, s.InDim()); err != nil {
		return nil, err
	}
	if x.Shape()[0] < 1 {
		return nil, fmt.Errorf("conv: x has shape %v, want at least one image", x.Shape())
	}
	for l := range s.Blocks {
		if err := check(ws[l], fmt.Sprintf("weight %d", l), s.Filters, s.FanIn(l)); err != nil {
			return nil, err
		}
		if err := check(bs[l], fmt.Sprintf("bias %d", l), s.Filters); err != nil {
			return nil, err
		}
	}
	kern, err := NewConvKernel(n.pool, s)
	if err != nil {
		return nil, err
	}
	kern.stream = uint64(len(n.ops))
	op := &ConvOp{id: opSeq.Add(1), net: n, kern: kern}
	n.ops = append(n.ops, op)
	op.opBase = base(fmt.Sprintf("Conv#%d{%dx%dx%d,L=%d,F=%d}", op.id, s.Height, s.Width, s.Channels, s.Blocks, s.Filters), "")
	args := append(append(G.Nodes{x}, ws...), bs...)
	out, err := G.ApplyOp(op, args...)
	if err != nil {
		return nil, fmt.Errorf("conv: %w", err)
	}
	return out, nil
}

// ConvOp is the gorgonia op made by ConvNet.Apply: inputs x, the weights
// and the biases of every block; output the features.
type ConvOp struct {
	opBase
	id     uint64
	net    *ConvNet
	kern   *ConvKernel
	buf    []float64
	runs   uint64 // forward runs so far
	graded uint64 // the run whose gradients grads holds (0: none)
	grads  [][]float64
	diffed bool
	memo   featureMemo
	memoIn [][]float64 // the inputs as memo keys them: x, the weights, the biases
}

// Kernel returns the plain kernel the op runs.
func (op *ConvOp) Kernel() *ConvKernel { return op.kern }

func (op *ConvOp) blocks() int { return op.kern.spec.Blocks }

// Arity implements gorgonia.Op.
func (op *ConvOp) Arity() int { return 1 + 2*op.blocks() }

// Type implements gorgonia.Op.
func (op *ConvOp) Type() hm.Type {
	ts := []hm.Type{f64T2}
	for range op.blocks() {
		ts = append(ts, f64T2)
	}
	for range op.blocks() {
		ts = append(ts, f64T1)
	}
	return hm.NewFnType(append(ts, f64T2)...)
}

// InferShape implements gorgonia.Op.
func (op *ConvOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("conv: got %d inputs, want %d", len(in), op.Arity())
	}
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("conv: x shape %v, want (N, InDim)", in[0])
	}
	return tensor.Shape{s[0], op.kern.spec.OutDim()}, nil
}

// Do implements gorgonia.Op.
func (op *ConvOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("conv: got %d inputs, want %d", len(in), op.Arity())
	}
	shape := tensor.Shape{in[0].Shape()[0], op.kern.spec.OutDim()}
	out, _ := ownedTensor(&op.buf, shape)
	return op.UsePreallocDo(out, in...)
}

// convInputs returns the data of x, the weights and the biases.
func (op *ConvOp) convInputs(in []G.Value) (x []float64, ws, bs [][]float64, err error) {
	L := op.blocks()
	if x, err = denseData(in[0], "x"); err != nil {
		return
	}
	ws, bs = make([][]float64, L), make([][]float64, L)
	for l := range L {
		if ws[l], err = denseData(in[1+l], "weight"); err != nil {
			return
		}
		if bs[l], err = denseData(in[1+L+l], "bias"); err != nil {
			return
		}
	}
	return
}

// UsePreallocDo implements gorgonia.UsePreallocDoer.
func (op *ConvOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("conv: got %d inputs, want %d", len(in), op.Arity())
	}
	xs := in[0].Shape()
	if len(xs) != 2 {
		return nil, fmt.Errorf("conv: x shape %v, want (N, InDim)", xs)
	}
	out, err := preallocData(prealloc, tensor.Shape{xs[0], op.kern.spec.OutDim()})
	if err != nil {
		return nil, err
	}
	x, ws, bs, err := op.convInputs(in)
	if err != nil {
		return nil, err
	}
	memo := op.net.memo && !op.net.train
	if memo {
		op.memoIn = append(append(append(op.memoIn[:0], x), ws...), bs...)
		if op.memo.hit(op.memoIn, out) {
			return prealloc, nil
		}
	} else if op.memo.ok {
		op.memo.forget()
	}
	if err := op.kern.Forward(xs[0], x, ws, bs, op.net.seed, op.net.train, out); err != nil {
		return nil, err
	}
	if !op.diffed {
		op.kern.releaseDevice() // no Backward follows: the device buffers go back
	}
	op.runs++
	if memo {
		op.memo.keep(op.memoIn, out)
	}
	return prealloc, nil
}

// DiffWRT implements gorgonia.SDOp: not x, every weight and bias.
func (op *ConvOp) DiffWRT(n int) []bool { return paramsDiffWRT(n) }

// SymDiff implements gorgonia.SDOp with one gradient node per weight and
// bias. The first of them to run does the whole backward pass; the others
// copy their part of it.
func (op *ConvOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	return paramGrads("conv", op.Arity(), &op.diffed, inputs, output, grad, func(i int, w wrtInput) G.Op {
		return &convGradOp{opBase: base(fmt.Sprintf("ConvGrad#%d/%d", op.id, i), ""), wrtInput: w, op: op}
	})
}

// backward runs the kernel's Backward once per forward run.
func (op *ConvOp) backward(in []G.Value) error {
	if op.graded == op.runs && op.runs > 0 {
		return nil
	}
	L := op.blocks()
	gOut, err := denseData(in[len(in)-1], "output gradient")
	if err != nil {
		return err
	}
	if op.grads == nil {
		s := op.kern.spec
		op.grads = make([][]float64, 2*L)
		for l := range L {
			op.grads[l] = make([]float64, s.Filters*s.FanIn(l))
			op.grads[L+l] = make([]float64, s.Filters)
		}
	}
	if err := op.kern.Backward(gOut, op.grads[:L], op.grads[L:]); err != nil {
		return err
	}
	op.graded = op.runs
	return nil
}

// convGradOp yields the gradient w.r.t. input which of a ConvOp; its inputs
// are the op's inputs, output and output gradient (which order it after
// the forward run).
type convGradOp struct {
	opBase
	noSecondDerivative
	wrtInput
	op  *ConvOp
	buf []float64
}

func (g *convGradOp) Type() hm.Type {
	ts := g.op.Type().(*hm.FunctionType).FlatTypes()
	ts = append(ts, f64T2)
	return hm.NewFnType(append(ts, ts[g.wrt])...)
}
func (g *convGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != g.Arity() {
		return nil, fmt.Errorf("conv: gradient got %d inputs, want %d", len(in), g.Arity())
	}
	shape := in[g.wrt].Shape()
	out, _ := ownedTensor(&g.buf, shape)
	return g.UsePreallocDo(out, in...)
}
func (g *convGradOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	if len(in) != g.Arity() {
		return nil, fmt.Errorf("conv: gradient got %d inputs, want %d", len(in), g.Arity())
	}
	out, err := preallocData(prealloc, in[g.wrt].Shape())
	if err != nil {
		return nil, err
	}
	if err := g.op.backward(in); err != nil {
		return nil, err
	}
	copy(out, g.op.grads[g.wrt-1])
	return prealloc, nil
}
