package ops

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"sync/atomic"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// opSeq gives every op instance its own identity: gorgonia merges nodes
// whose ops hash equal over equal children, and these ops keep
// per-instance caches.
var opSeq atomic.Uint64

// opBase is embedded by every op of the package and supplies the parts of
// gorgonia's Op interface that they all share: no pointer returns, no
// external calls, no overwritten inputs, and an identity (unique per
// instance, which WriteHash writes and Hashcode hashes) beside a name for
// messages.
type opBase struct {
	ident string // WriteHash's bytes
	name  string // String
}

// base returns the opBase of an op identified by ident and called name
// ("" for ident) in messages.
func base(ident, name string) opBase {
	if name == "" {
		name = ident
	}
	return opBase{ident: ident, name: name}
}

// ReturnsPtr implements gorgonia.Op: outputs never alias an input.
func (opBase) ReturnsPtr() bool { return false }

// CallsExtern implements gorgonia.Op.
func (opBase) CallsExtern() bool { return false }

// OverwritesInput implements gorgonia.Op: no input is overwritten.
func (opBase) OverwritesInput() int { return -1 }

// WriteHash implements gorgonia.Op with the op's identity.
func (b *opBase) WriteHash(h hash.Hash) { io.WriteString(h, b.ident) }

// Hashcode implements gorgonia.Op: the FNV-32a of what WriteHash writes.
func (b *opBase) Hashcode() uint32 {
	h := fnv.New32a()
	b.WriteHash(h)
	return h.Sum32()
}

func (b *opBase) String() string { return b.name }

// signature is embedded by ops whose types and output shape are fixed when
// they are built.
type signature struct {
	types []hm.Type    // the inputs', then the output's
	shape tensor.Shape // the output's
}

func (s *signature) Arity() int    { return len(s.types) - 1 }
func (s *signature) Type() hm.Type { return hm.NewFnType(s.types...) }
func (s *signature) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return s.shape.Clone(), nil
}

// wrtInput is embedded by gradient ops whose output has the shape of input
// wrt of their arity inputs; fn names the op in messages.
type wrtInput struct {
	fn         string
	arity, wrt int
}

func (w wrtInput) Arity() int { return w.arity }

func (w wrtInput) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	if len(ds) != w.arity {
		return nil, fmt.Errorf("engine: %s: want %d inputs, got %d", w.fn, w.arity, len(ds))
	}
	s, ok := ds[w.wrt].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("engine: %s: input %d is not a shape", w.fn, w.wrt)
	}
	return s.Clone(), nil
}

// gradNodes applies the gradient ops made by mk for wrt = 0 … n−1 to
// children, in that order.
func gradNodes(n int, children G.Nodes, mk func(wrt int) G.Op) (G.Nodes, error) {
	ds := make(G.Nodes, n)
	for wrt := range ds {
		var err error
		if ds[wrt], err = G.ApplyOp(mk(wrt), children...); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// noSecondDerivative is the SymDiff of the gradient ops, which are not
// differentiated again.
type noSecondDerivative struct{}

// DiffWRT implements gorgonia.SDOp: no input.
func (noSecondDerivative) DiffWRT(n int) []bool { return make([]bool, n) }

// SymDiff implements gorgonia.SDOp.
func (noSecondDerivative) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, errors.New("engine: second derivatives are not implemented")
}

// tensorType is the type of a float tensor of rank dims (a scalar for 0).
func tensorType(dims int) hm.Type {
	if dims == 0 {
		return hm.TypeVariable('a')
	}
	return G.TensorType{Dims: dims, Of: hm.TypeVariable('a')}
}

// Rank-1 to rank-3 float64 tensor types.
var (
	f64T1 = G.TensorType{Dims: 1, Of: G.Float64}
	f64T2 = G.TensorType{Dims: 2, Of: G.Float64}
	f64T3 = G.TensorType{Dims: 3, Of: G.Float64}
)

// paramsDiffWRT is the DiffWRT of a network op whose first input is the
// data and the others its parameters: every parameter, not the data.
func paramsDiffWRT(n int) []bool {
	d := make([]bool, n)
	for i := 1; i < n; i++ {
		d[i] = true
	}
	return d
}

// paramGrads is the SymDiff of such an op (name in messages, arity its
// inputs): one gradient node per parameter, made by grad(i, w) with w the
// node's wrtInput, each taking the op's inputs, output and output
// gradient. The gradient nodes share the op's one set of gradient
// buffers, so the op is differentiated once: diffed records it.
func paramGrads(name string, arity int, diffed *bool, inputs G.Nodes, output, grad *G.Node, mk func(i int, w wrtInput) G.Op) (G.Nodes, error) {
	if len(inputs) != arity {
		return nil, fmt.Errorf("%s: SymDiff got %d inputs, want %d", name, len(inputs), arity)
	}
	if *diffed {
		return nil, fmt.Errorf("%s: already differentiated; it supports one backward pass", name)
	}
	*diffed = true
	args := append(append(G.Nodes{}, inputs...), output, grad)
	ret := make(G.Nodes, len(inputs))
	for i := 1; i < len(inputs); i++ {
		n, err := G.ApplyOp(mk(i, wrtInput{fn: name + " gradient", arity: arity + 2, wrt: i}), args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ret[i] = n
	}
	return ret, nil
}
