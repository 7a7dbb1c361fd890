package ops

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/internal/task"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// kernelOp adapts a pair of plain float64 kernels (forward, and a backward
// that yields the gradients of all differentiable inputs at once) to
// gorgonia's Op and SDOp. Used for the small ops of the ELBO, whose
// gradients are checked by finite differences (fdCheckOp in
// fdcheck_test.go).
type kernelOp struct {
	opBase
	name    string
	id      uint64
	inDims  []int // tensor rank of each input
	outDims int
	diff    []bool
	shape   func(in []tensor.Shape) (tensor.Shape, error)
	fwd     func(in [][]float64, sh []tensor.Shape, out []float64)
	bwd     func(in [][]float64, sh []tensor.Shape, out, gout []float64, grads [][]float64)

	out   []float64 // backing of the output Do hands out (see ownedTensor)
	gen   uint64    // forward runs so far; the gradient cache is valid for one
	cache struct {
		gen   uint64
		grads [][]float64
	}
}

func newKernelOp(k kernelOp) *kernelOp {
	k.id = opSeq.Add(1)
	k.opBase = base(fmt.Sprintf("%s#%d", k.name, k.id), k.name)
	return &k
}

func (op *kernelOp) apply(in ...*G.Node) (*G.Node, error) {
	if len(in) != len(op.inDims) {
		return nil, fmt.Errorf("engine: %s takes %d inputs, got %d", op.name, len(op.inDims), len(in))
	}
	shapes := make([]tensor.Shape, len(in))
	for i, n := range in {
		if n.Dtype() != tensor.Float64 {
			return nil, fmt.Errorf("engine: %s input %d is %v, want float64", op.name, i, n.Dtype())
		}
		if n.Shape().Dims() != op.inDims[i] {
			return nil, fmt.Errorf("engine: %s input %d has shape %v, want %d dimensions", op.name, i, n.Shape(), op.inDims[i])
		}
		shapes[i] = n.Shape()
	}
	if _, err := op.shape(shapes); err != nil {
		return nil, fmt.Errorf("engine: %s: %w", op.name, err)
	}
	return G.ApplyOp(op, in...)
}

func (op *kernelOp) Arity() int { return len(op.inDims) }
func (op *kernelOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(op.inDims)+1)
	for _, d := range op.inDims {
		ts = append(ts, tensorType(d))
	}
	return hm.NewFnType(append(ts, tensorType(op.outDims))...)
}
func (op *kernelOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	sh := make([]tensor.Shape, len(in))
	for i, d := range in {
		s, ok := d.(tensor.Shape)
		if !ok {
			return nil, fmt.Errorf("engine: %s: input %d has no shape", op.name, i)
		}
		sh[i] = s
	}
	return op.shape(sh)
}

func values(name string, vs []G.Value) ([][]float64, []tensor.Shape, error) {
	data := make([][]float64, len(vs))
	sh := make([]tensor.Shape, len(vs))
	for i, v := range vs {
		switch x := v.(type) {
		case *tensor.Dense:
			d, ok := x.Data().([]float64)
			if !ok {
				return nil, nil, fmt.Errorf("engine: %s input %d is not float64", name, i)
			}
			data[i], sh[i] = d, x.Shape()
		case *G.F64:
			data[i], sh[i] = []float64{float64(*x)}, tensor.ScalarShape()
		default:
			return nil, nil, fmt.Errorf("engine: %s input %d has unsupported type %T", name, i, v)
		}
	}
	return data, sh, nil
}

// inputs unpacks the values of a run and the shape of its output.
func (op *kernelOp) inputs(vs []G.Value) (in [][]float64, sh []tensor.Shape, out tensor.Shape, err error) {
	if in, sh, err = values(op.name, vs); err != nil {
		return nil, nil, nil, err
	}
	out, err = op.shape(sh)
	return in, sh, out, err
}

func (op *kernelOp) Do(vs ...G.Value) (G.Value, error) {
	in, sh, os, err := op.inputs(vs)
	if err != nil {
		return nil, err
	}
	out, data := ownedTensor(&op.out, os)
	clear(data)
	op.fwd(in, sh, data)
	op.gen++
	return out, nil
}

// UsePreallocDo is Do into the machine's buffer for this node, so that a
// graph run every step does not allocate its outputs anew.
func (op *kernelOp) UsePreallocDo(p G.Value, vs ...G.Value) (G.Value, error) {
	in, sh, os, err := op.inputs(vs)
	if err != nil {
		return nil, err
	}
	out, err := preallocData(p, os)
	if err != nil {
		return op.Do(vs...)
	}
	clear(out)
	op.fwd(in, sh, out)
	op.gen++
	return p, nil
}

func (op *kernelOp) DiffWRT(int) []bool { return op.diff }

func (op *kernelOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	ret := make(G.Nodes, len(inputs))
	for i := range inputs {
		if !op.diff[i] {
			continue
		}
		args := append(append(G.Nodes{}, inputs...), output, grad)
		n, err := G.ApplyOp(&kernelGradOp{
			opBase:   base(fmt.Sprintf("%s#%d/grad%d", op.name, op.id, i), fmt.Sprintf("∂%s/∂in%d", op.name, i)),
			wrtInput: wrtInput{fn: op.name + " grad", arity: len(op.inDims) + 2, wrt: i},
			fwd:      op}, args...)
		if err != nil {
			return nil, err
		}
		ret[i] = n
	}
	return ret, nil
}

// grads runs the backward kernel once per forward run and serves every
// input's gradient node from that one computation.
func (op *kernelOp) grads(vs []G.Value) ([][]float64, []tensor.Shape, error) {
	n := len(op.inDims)
	in, sh, err := values(op.name, vs)
	if err != nil {
		return nil, nil, err
	}
	if op.cache.gen == op.gen && op.cache.grads != nil {
		return op.cache.grads, sh, nil
	}
	g := op.cache.grads
	if g == nil {
		g = make([][]float64, n)
	}
	for i := 0; i < n; i++ {
		if op.diff[i] {
			g[i] = task.Grow(g[i], len(in[i]))
			clear(g[i])
		}
	}
	op.bwd(in[:n], sh[:n], in[n], in[n+1], g)
	op.cache.gen, op.cache.grads = op.gen, g
	return g, sh, nil
}

type kernelGradOp struct {
	opBase
	wrtInput
	fwd *kernelOp
}

func (op *kernelGradOp) Type() hm.Type {
	ts := make([]hm.Type, 0, len(op.fwd.inDims)+3)
	for _, d := range op.fwd.inDims {
		ts = append(ts, tensorType(d))
	}
	ts = append(ts, tensorType(op.fwd.outDims), tensorType(op.fwd.outDims))
	return hm.NewFnType(append(ts, tensorType(op.fwd.inDims[op.wrt]))...)
}
func (op *kernelGradOp) Do(vs ...G.Value) (G.Value, error) {
	g, sh, err := op.fwd.grads(vs)
	if err != nil {
		return nil, err
	}
	if sh[op.wrt].IsScalar() {
		return G.NewF64(g[op.wrt][0]), nil
	}
	// g[which] is handed out as is: only this node exposes it, and it is
	// rewritten whole by the next forward run's first gradient request.
	return tensor.New(tensor.WithShape(sh[op.wrt].Clone()...), tensor.WithBacking(g[op.wrt])), nil
}

// UsePreallocDo is Do into the machine's buffer for this node.
func (op *kernelGradOp) UsePreallocDo(p G.Value, vs ...G.Value) (G.Value, error) {
	g, sh, err := op.fwd.grads(vs)
	if err != nil {
		return nil, err
	}
	out, err := preallocData(p, sh[op.wrt])
	if err != nil || sh[op.wrt].IsScalar() {
		return op.Do(vs...)
	}
	copy(out, g[op.wrt])
	return p, nil
}
