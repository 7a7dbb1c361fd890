package ops

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ResNet is the feature extractor of a ResNetSpec as gorgonia ops: Apply
// adds one op that runs the whole network (forward and, through SymDiff,
// backward) in one node, as ConvNet does, since batch norm couples every
// layer's images and gorgonia's per-op cost would dominate ~60 small nodes.
//
// SetMode chooses the batch norms' statistics for the following runs. The
// running statistics (one BNStats per convolution) belong to the caller,
// which reads and checkpoints them; the ops read them in BNRunning mode
// and FoldRunning updates them after training runs.
type ResNet struct {
	pool *Pool
	spec ResNetSpec
	mode BNMode
	memo bool
	run  []BNStats
	ops  []*ResNetOp
}

// NewResNet returns a network for spec whose ops spread their work over
// p's workers, with running statistics run (nil: none, so no BNRunning);
// it starts in BNTrain mode.
func NewResNet(p *Pool, spec ResNetSpec, run []BNStats) (*ResNet, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if run != nil {
		cs := spec.Convs()
		if len(run) != len(cs) {
			return nil, fmt.Errorf("resnet: %d running statistics, want one per convolution (%d)", len(run), len(cs))
		}
		for l, c := range cs {
			if len(run[l].Mean) != c.Out || len(run[l].Var) != c.Out {
				return nil, fmt.Errorf("resnet: running statistics of %s have %d means and %d variances, want %d", c.Name, len(run[l].Mean), len(run[l].Var), c.Out)
			}
		}
	}
	return &ResNet{pool: p, spec: spec, run: run}, nil
}

// Spec returns the network's spec.
func (n *ResNet) Spec() ResNetSpec { return n.spec }

// SetMode sets the batch norms' statistics of the following runs of every
// op of the net.
func (n *ResNet) SetMode(m BNMode) { n.mode = m }

// SetMemo sets whether the runs of every op of the net outside BNTrain
// mode remember their inputs (images, parameters, mode and, in BNRunning,
// the running statistics) and output, and return that output without a
// pass when a run's inputs are the remembered ones bit for bit, as
// ConvNet.SetMemo. Off, the ops forget what they hold.
func (n *ResNet) SetMemo(on bool) { n.memo = on }

// MemoHits is the number of passes the net's ops have skipped (SetMemo).
func (n *ResNet) MemoHits() int {
	h := 0
	for _, op := range n.ops {
		h += op.memo.hits
	}
	return h
}

// FoldRunning folds the batch statistics of each op's last run, if that
// was a training run not folded yet, into the running statistics, op by op
// in creation order. A caller folds once a training step has succeeded.
func (n *ResNet) FoldRunning() error {
	if n.run == nil {
		return nil
	}
	for _, op := range n.ops {
		if err := op.kern.FoldRunning(n.run); err != nil {
			return err
		}
	}
	return nil
}

// Apply adds the network applied to x (lay.Images(), InDim), with params
// in Spec.Params order and shapes, and returns the (lay.Images(), OutDim)
// features. x is data: no gradient flows to it. The op keeps its output
// and gradient storage between runs of a machine, so a run overwrites the
// values of the previous one. Values are float64 only.
func (n *ResNet) Apply(x *G.Node, params []*G.Node, lay BNLayout) (*G.Node, error) {
	s := n.spec
	want := s.Params()
	if len(params) != len(want) {
		return nil, fmt.Errorf("resnet: %d parameters, want %d", len(params), len(want))
	}
	if err := lay.Validate(BNTrain); err != nil {
		return nil, err
	}
	check := func(nd *G.Node, name string, shape ...int) error {
		if nd == nil {
			return fmt.Errorf("resnet: %s is nil", name)
		}
		if nd.Dtype() != G.Float64 {
			return fmt.Errorf("resnet: %s has dtype %v, want float64", name, nd.Dtype())
		}
		if sh := nd.Shape(); !sh.Eq(tensor.Shape(shape)) {
			return fmt.Errorf("resnet: %s has shape %v, want %v", name, sh, shape)
		}
		return nil
	}
	if err := check(x, "x", lay.Images(), s.InDim()); err != nil {
		return nil, err
	}
	for i, p := range want {
		if err := check(params[i], p.Name, p.Shape...); err != nil {
			return nil, err
		}
	}
	kern, err := NewResNetKernel(n.pool, s)
	if err != nil {
		return nil, err
	}
	op := &ResNetOp{id: opSeq.Add(1), net: n, kern: kern, lay: lay, shapes: want}
	op.opBase = base(fmt.Sprintf("ResNet#%d{%dx%dx%d,%v,%d}", op.id, s.Height, s.Width, s.Channels, s.Widths, s.Out), "")
	n.ops = append(n.ops, op)
	out, err := G.ApplyOp(op, append(G.Nodes{x}, params...)...)
	if err != nil {
		return nil, fmt.Errorf("resnet: %w", err)
	}
	return out, nil
}

// ResNetOp is the gorgonia op made by ResNet.Apply: inputs x and the
// parameters; output the features.
type ResNetOp struct {
	opBase
	id     uint64
	net    *ResNet
	kern   *ResNetKernel
	lay    BNLayout
	shapes []ResNetParam
	buf    []float64
	params [][]float64
	runs   uint64 // forward runs so far
	graded uint64 // the run whose gradients grads holds (0: none)
	grads  [][]float64
	diffed bool
	memo   featureMemo
	memoIn [][]float64 // the inputs as memo keys them
}

// Kernel returns the plain kernel the op runs.
func (op *ResNetOp) Kernel() *ResNetKernel { return op.kern }

// Arity implements gorgonia.Op.
func (op *ResNetOp) Arity() int { return 1 + len(op.shapes) }

// Type implements gorgonia.Op.
func (op *ResNetOp) Type() hm.Type {
	ts := []hm.Type{f64T2}
	for _, p := range op.shapes {
		ts = append(ts, G.TensorType{Dims: len(p.Shape), Of: G.Float64})
	}
	return hm.NewFnType(append(ts, f64T2)...)
}

// InferShape implements gorgonia.Op.
func (op *ResNetOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("resnet: got %d inputs, want %d", len(in), op.Arity())
	}
	return tensor.Shape{op.lay.Images(), op.kern.spec.OutDim()}, nil
}

// Do implements gorgonia.Op.
func (op *ResNetOp) Do(in ...G.Value) (G.Value, error) {
	out, _ := ownedTensor(&op.buf, tensor.Shape{op.lay.Images(), op.kern.spec.OutDim()})
	return op.UsePreallocDo(out, in...)
}

// UsePreallocDo implements gorgonia.UsePreallocDoer.
func (op *ResNetOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("resnet: got %d inputs, want %d", len(in), op.Arity())
	}
	out, err := preallocData(prealloc, tensor.Shape{op.lay.Images(), op.kern.spec.OutDim()})
	if err != nil {
		return nil, err
	}
	x, err := denseData(in[0], "x")
	if err != nil {
		return nil, err
	}
	op.params = op.params[:0]
	for i := range op.shapes {
		d, err := denseData(in[1+i], op.shapes[i].Name)
		if err != nil {
			return nil, err
		}
		op.params = append(op.params, d)
	}
	memo := op.net.memo && op.net.mode != BNTrain
	if memo {
		op.memoIn = append(append(op.memoIn[:0], x, []float64{float64(op.net.mode)}), op.params...)
		if op.net.mode == BNRunning {
			for _, st := range op.net.run {
				op.memoIn = append(op.memoIn, st.Mean, st.Var)
			}
		}
		if op.memo.hit(op.memoIn, out) {
			return prealloc, nil
		}
	} else if op.memo.ok {
		op.memo.forget()
	}
	if err := op.kern.Forward(x, op.params, op.lay, op.net.mode, op.net.run, out); err != nil {
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

// DiffWRT implements gorgonia.SDOp: not x, every parameter.
func (op *ResNetOp) DiffWRT(n int) []bool { return paramsDiffWRT(n) }

// SymDiff implements gorgonia.SDOp with one gradient node per parameter.
// The first of them to run does the whole backward pass; the others copy
// their part of it.
func (op *ResNetOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	return paramGrads("resnet", op.Arity(), &op.diffed, inputs, output, grad, func(i int, w wrtInput) G.Op {
		return &resNetGradOp{opBase: base(fmt.Sprintf("ResNetGrad#%d/%d", op.id, i), ""), wrtInput: w, op: op}
	})
}

// backward runs the kernel's Backward once per forward run.
func (op *ResNetOp) backward(in []G.Value) error {
	if op.graded == op.runs && op.runs > 0 {
		return nil
	}
	gOut, err := denseData(in[len(in)-1], "output gradient")
	if err != nil {
		return err
	}
	if op.grads == nil {
		op.grads = make([][]float64, len(op.shapes))
		for i, p := range op.shapes {
			size := 1
			for _, d := range p.Shape {
				size *= d
			}
			op.grads[i] = make([]float64, size)
		}
	}
	if err := op.kern.Backward(gOut, op.grads, nil); err != nil {
		return err
	}
	op.graded = op.runs
	return nil
}

// resNetGradOp yields the gradient w.r.t. input wrt of a ResNetOp; its
// inputs are the op's inputs, output and output gradient.
type resNetGradOp struct {
	opBase
	noSecondDerivative
	wrtInput
	op  *ResNetOp
	buf []float64
}

func (g *resNetGradOp) Type() hm.Type {
	ts := g.op.Type().(*hm.FunctionType).FlatTypes()
	ts = append(ts, f64T2)
	return hm.NewFnType(append(ts, ts[g.wrt])...)
}

func (g *resNetGradOp) Do(in ...G.Value) (G.Value, error) {
	if len(in) != g.Arity() {
		return nil, fmt.Errorf("resnet: gradient got %d inputs, want %d", len(in), g.Arity())
	}
	out, _ := ownedTensor(&g.buf, in[g.wrt].Shape())
	return g.UsePreallocDo(out, in...)
}

func (g *resNetGradOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	if len(in) != g.Arity() {
		return nil, fmt.Errorf("resnet: gradient got %d inputs, want %d", len(in), g.Arity())
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
