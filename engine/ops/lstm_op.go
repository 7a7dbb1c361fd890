package ops

import (
	"fmt"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/internal/task"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LSTMOp is the gorgonia op behind LSTMSeq. Besides implementing
// gorgonia.Op and gorgonia.SDOp it keeps the forward intermediates for its
// gradient nodes and the final state for the next batch.
type LSTMOp struct {
	opBase
	id           uint64
	t, in, hid   int
	reverse      bool
	cache        LSTMCache
	gen, bwdGen  uint64 // forward runs so far; run whose backward core is in cache.dz
	diffed       bool   // SymDiff has created the gradient nodes
	xs, ws, bs   []float64
	h0s, c0s, gs []float64 // scratch for inputs that are not plain contiguous float64 tensors
	out          *tensor.Dense
}

// LSTMSeq runs a standard LSTM cell over the T rows of x (T,in) — T is the
// sequence axis — starting from the state (h0, c0), and returns H (T,hid),
// the hidden state after each step; row t always corresponds to input row t.
// With reverse=true the cell consumes rows T-1, …, 0 (so row t holds the
// state after consuming rows T-1…t).
//
// w: (in+hid, 4*hid) applied to [x_t, h_{t-1}]; b: (4*hid). Gate layout
// along the 4*hid axis: [i, f, g, o]; i, f, o sigmoid, g tanh;
// c' = f⊙c + i⊙g; h' = o⊙tanh(c'). h0, c0: (hid) nodes treated as constants
// (no gradient: the carried state is detached). Differentiable w.r.t. x, w
// and b. All nodes must be float64.
func LSTMSeq(x, w, b, h0, c0 *gorgonia.Node, reverse bool) (*gorgonia.Node, *LSTMOp, error) {
	names := [...]string{"x", "w", "b", "h0", "c0"}
	for i, n := range []*gorgonia.Node{x, w, b, h0, c0} {
		if n == nil {
			return nil, nil, fmt.Errorf("engine: LSTMSeq: %s is nil", names[i])
		}
		if n.Dtype() != tensor.Float64 {
			return nil, nil, fmt.Errorf("engine: LSTMSeq: %s has dtype %v, want float64", names[i], n.Dtype())
		}
	}
	xs, ws, bs, hs, cs := x.Shape(), w.Shape(), b.Shape(), h0.Shape(), c0.Shape()
	if len(xs) != 2 || xs[0] < 1 || xs[1] < 1 {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: x has shape %v, want (T, in) with T, in ≥ 1", xs)
	}
	if len(hs) != 1 || hs[0] < 1 {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: h0 has shape %v, want (hid) with hid ≥ 1", hs)
	}
	T, in, hid := xs[0], xs[1], hs[0]
	if len(cs) != 1 || cs[0] != hid {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: c0 has shape %v, want (%d)", cs, hid)
	}
	if len(ws) != 2 || ws[0] != in+hid || ws[1] != 4*hid {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: w has shape %v, want (%d, %d) for in=%d hid=%d", ws, in+hid, 4*hid, in, hid)
	}
	if len(bs) != 1 || bs[0] != 4*hid {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: b has shape %v, want (%d)", bs, 4*hid)
	}
	op := &LSTMOp{id: opSeq.Add(1), t: T, in: in, hid: hid, reverse: reverse}
	dir := "fwd"
	if reverse {
		dir = "rev"
	}
	op.opBase = base(fmt.Sprintf("LSTMSeq-%d-%d-%d-%d-%t", op.id, T, in, hid, reverse),
		fmt.Sprintf("LSTMSeq#%d(%s,T=%d,in=%d,hid=%d)", op.id, dir, T, in, hid))
	op.cache.Hid = hid
	out, err := gorgonia.ApplyOp(op, x, w, b, h0, c0)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: %w", err)
	}
	return out, op, nil
}

// FinalState returns copies of (h, c) after the last step processed by the
// most recent forward run (for reverse=true: after consuming row 0), to be
// fed as h0, c0 of the next batch. Before any run both are zero.
func (op *LSTMOp) FinalState() (h, c []float64) { return op.cache.FinalState() }

// Arity is 5: x, w, b, h0, c0.
func (op *LSTMOp) Arity() int { return 5 }

// Type is Matrix a → Matrix a → Vector a → Vector a → Vector a → Matrix a.
func (op *LSTMOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	m := gorgonia.TensorType{Dims: 2, Of: a}
	v := gorgonia.TensorType{Dims: 1, Of: a}
	return hm.NewFnType(m, m, v, v, v, m)
}

// InferShape returns (T, hid).
func (op *LSTMOp) InferShape(shapes ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(shapes) != 5 {
		return nil, fmt.Errorf("engine: LSTMSeq: got %d input shapes, want 5", len(shapes))
	}
	T, err := shapes[0].DimSize(0)
	if err != nil {
		return nil, err
	}
	hid, err := shapes[3].DimSize(0)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{T, hid}, nil
}

// Do runs the forward pass into a (T, hid) tensor owned by the op, which the
// next run overwrites.
func (op *LSTMOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(lstmOwned(&op.out, op.t, op.hid), inputs...)
}

// UsePreallocDo runs the forward pass into prealloc, which must be a
// contiguous float64 (T, hid) tensor.
func (op *LSTMOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 5 {
		return nil, fmt.Errorf("engine: %v: got %d inputs, want 5", op, len(inputs))
	}
	h, err := preallocData(prealloc, tensor.Shape{op.t, op.hid})
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	T, in, hid := op.t, op.in, op.hid
	var x, w, b, h0, c0 []float64
	if x, err = lstmInput(inputs[0], T*in, &op.xs); err == nil {
		if w, err = lstmInput(inputs[1], (in+hid)*4*hid, &op.ws); err == nil {
			if b, err = lstmInput(inputs[2], 4*hid, &op.bs); err == nil {
				if h0, err = lstmInput(inputs[3], hid, &op.h0s); err == nil {
					c0, err = lstmInput(inputs[4], hid, &op.c0s)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	LSTMForward(&op.cache, x, w, b, h0, c0, T, in, hid, op.reverse, h)
	op.gen++
	return prealloc, nil
}

// DiffWRT: x, w and b are differentiable; the carried state is not.
func (op *LSTMOp) DiffWRT(inputs int) []bool { return []bool{true, true, true, false, false} }

// SymDiff returns gradient nodes for x, w and b (nil for h0, c0). The three
// nodes share one backward pass through the recurrence.
func (op *LSTMOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 5 {
		return nil, fmt.Errorf("engine: %v: SymDiff got %d inputs, want 5", op, len(inputs))
	}
	// A second set of gradient nodes, fed a different grad, would share
	// cache.dz with the first and silently read the wrong backward pass.
	if op.diffed {
		return nil, fmt.Errorf("engine: %v: already differentiated; build a new LSTMSeq for a second gradient", op)
	}
	op.diffed = true
	// output is an input of the gradient nodes only to order them after the
	// forward pass, whose cache they read: grad alone need not depend on it.
	children := append(append(gorgonia.Nodes{}, inputs...), output, grad)
	ret := make(gorgonia.Nodes, 5)
	for which := 0; which < 3; which++ {
		g := &lstmGradOp{fwd: op, which: which, opBase: base(fmt.Sprintf("LSTMSeqGrad-%d-%d", op.id, which),
			fmt.Sprintf("∂%v/∂%s", op, [...]string{"x", "w", "b"}[which]))}
		n, err := gorgonia.ApplyOp(g, children...)
		if err != nil {
			return nil, fmt.Errorf("engine: %v: SymDiff: %w", op, err)
		}
		ret[which] = n
	}
	return ret, nil
}

// lstmGradOp produces the gradient w.r.t. input `which` (0 x, 1 w, 2 b) of
// fwd. Inputs: x, w, b, h0, c0, output, grad. Whichever of the three runs
// first after a forward run does the backward pass through time; the others
// only apply their final product to its result.
type lstmGradOp struct {
	opBase
	fwd   *LSTMOp
	which int
	out   *tensor.Dense
}

func (op *lstmGradOp) Arity() int { return 7 }

func (op *lstmGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	m := gorgonia.TensorType{Dims: 2, Of: a}
	v := gorgonia.TensorType{Dims: 1, Of: a}
	ret := m
	if op.which == 2 {
		ret = v
	}
	return hm.NewFnType(m, m, v, v, v, m, m, ret)
}

func (op *lstmGradOp) shape() tensor.Shape {
	f := op.fwd
	switch op.which {
	case 0:
		return tensor.Shape{f.t, f.in}
	case 1:
		return tensor.Shape{f.in + f.hid, 4 * f.hid}
	default:
		return tensor.Shape{4 * f.hid}
	}
}

func (op *lstmGradOp) InferShape(shapes ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(shapes) != 7 {
		return nil, fmt.Errorf("engine: %v: got %d input shapes, want 7", op, len(shapes))
	}
	return op.shape(), nil
}

func (op *lstmGradOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(lstmOwned(&op.out, op.shape()...), inputs...)
}

func (op *lstmGradOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 7 {
		return nil, fmt.Errorf("engine: %v: got %d inputs, want 7", op, len(inputs))
	}
	f := op.fwd
	if f.gen == 0 {
		return nil, fmt.Errorf("engine: %v: no forward run to differentiate", op)
	}
	dst, err := preallocData(prealloc, op.shape())
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	T, in, hid := f.t, f.in, f.hid
	w, err := lstmInput(inputs[1], (in+hid)*4*hid, &f.ws)
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	if f.bwdGen != f.gen {
		dH, err := lstmInput(inputs[6], T*hid, &f.gs)
		if err != nil {
			return nil, fmt.Errorf("engine: %v: %w", op, err)
		}
		lstmBackwardCore(&f.cache, w, dH)
		f.bwdGen = f.gen
	}
	switch op.which {
	case 0:
		lstmGradX(&f.cache, w, dst)
	case 1:
		x, err := lstmInput(inputs[0], T*in, &f.xs)
		if err != nil {
			return nil, fmt.Errorf("engine: %v: %w", op, err)
		}
		lstmGradW(&f.cache, x, dst)
	default:
		lstmGradB(&f.cache, dst)
	}
	return prealloc, nil
}

// lstmOwned returns *buf, allocating it on first use. The tape machine
// clears its registers on Reset, so Do runs every step; handing back the same
// tensor each time keeps the step from allocating. Gorgonia treats a value as
// dead after its last reader in a run, so reuse on the next run is safe, but
// a caller who keeps a node's Value across runs sees it overwritten.
func lstmOwned(buf **tensor.Dense, shape ...int) *tensor.Dense {
	if *buf == nil {
		*buf = tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float64))
	}
	return *buf
}

// lstmInput returns the n float64 values of v in row-major order. Contiguous
// tensors are read in place; views (e.g. the gradient slices that Concat
// hands back) and scalars are copied into *scratch.
func lstmInput(v gorgonia.Value, n int, scratch *[]float64) ([]float64, error) {
	switch d := v.(type) {
	case *tensor.Dense:
		if d == nil {
			return nil, fmt.Errorf("input is a nil tensor")
		}
		if d.Dtype() != tensor.Float64 {
			return nil, fmt.Errorf("input has dtype %v, want float64", d.Dtype())
		}
		if d.IsScalar() {
			return lstmFill(scratch, n, d.ScalarValue().(float64)), nil
		}
		if d.Shape().TotalSize() != n {
			return nil, fmt.Errorf("input has shape %v, want %d elements", d.Shape(), n)
		}
		data := d.Data().([]float64)
		if !d.RequiresIterator() && len(data) >= n {
			return data[:n], nil
		}
		*scratch = task.Grow(*scratch, n)
		it := tensor.FlatIteratorFromDense(d)
		k := 0
		for i, err := it.Start(); err == nil; i, err = it.Next() {
			if k == n {
				return nil, fmt.Errorf("input view yields more than %d elements", n)
			}
			(*scratch)[k] = data[i]
			k++
		}
		if k != n {
			return nil, fmt.Errorf("input view yields %d elements, want %d", k, n)
		}
		return *scratch, nil
	case *gorgonia.F64:
		if d == nil {
			return nil, fmt.Errorf("input is a nil scalar")
		}
		return lstmFill(scratch, n, float64(*d)), nil
	default:
		return nil, fmt.Errorf("input is %T, want a float64 *tensor.Dense", v)
	}
}

// lstmFill broadcasts a scalar, which gorgonia may pass for a gradient that
// is the same everywhere, to n values in *scratch.
func lstmFill(scratch *[]float64, n int, v float64) []float64 {
	*scratch = task.Grow(*scratch, n)
	for i := range *scratch {
		(*scratch)[i] = v
	}
	return *scratch
}
