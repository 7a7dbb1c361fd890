package ops

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"sync/atomic"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/task"
	"gonum.org/v1/gonum/blas"
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

// inputShapes returns the shapes of the n inputs whose shapes an op's
// InferShape is given.
func inputShapes(fn string, n int, ds []G.DimSizer) ([]tensor.Shape, error) {
	if len(ds) != n {
		return nil, fmt.Errorf("engine: %s: want %d inputs, got %d", fn, n, len(ds))
	}
	return G.DimSizersToShapes(ds)
}

// gradInput returns the data of v, the output gradient a gradient op of fn
// is given, after checking it has the forward output's shape.
func gradInput(fn string, v G.Value, want tensor.Shape) ([]float64, error) {
	g, gs, err := floatsOf(v)
	if err != nil {
		return nil, err
	}
	if !gs.Eq(want) {
		return nil, fmt.Errorf("engine: %s: output gradient has shape %v, want %v", fn, gs, want)
	}
	return g, nil
}

// noSecondDerivative is the SymDiff of the gradient ops, which are not
// differentiated again.
type noSecondDerivative struct{}

// DiffWRT implements gorgonia.SDOp: no input.
func (noSecondDerivative) DiffWRT(n int) []bool { return make([]bool, n) }

// SymDiff implements gorgonia.SDOp.
func (noSecondDerivative) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, errors.New("ops: second derivatives are not implemented")
}

// ownedTensor wraps op-owned storage, grown to shape, in a fresh header.
// The tape machine drops its registers on Reset, so every op's Do runs each
// step and would otherwise allocate its output anew (megabytes per step, most
// of it large objects that are zeroed and later collected). Reuse is safe:
// gorgonia treats a value as dead after its last reader in a run, writes to
// it in place only then, and recycles headers, never backings. The price is
// that a caller who keeps a node's value across runs sees it overwritten, so
// values read out of a run are copied before the next one.
func ownedTensor(buf *[]float64, shape tensor.Shape) (*tensor.Dense, []float64) {
	*buf = task.Grow(*buf, shape.TotalSize())
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(*buf)), *buf
}

// output returns where an op writes a result of shape: the preallocated
// value p of UsePreallocDo when it is given (an error if it is unusable,
// upon which the machine falls back to Do), else op-owned storage in buf.
func output(p G.Value, shape tensor.Shape, buf *[]float64) (G.Value, []float64, error) {
	if p == nil {
		out, data := ownedTensor(buf, shape)
		return out, data, nil
	}
	data, err := preallocData(p, shape)
	if err != nil {
		return nil, nil, err
	}
	return p, data, nil
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

// checkNode validates a graph input at build time, so that misuse is
// reported by the constructor rather than by type unification deep in
// gorgonia (or by a panic at run time).
func checkNode(fn, name string, n *G.Node, dims int) error {
	if n == nil {
		return fmt.Errorf("engine: %s: %s is nil", fn, name)
	}
	if n.IsScalar() && dims > 0 {
		return fmt.Errorf("engine: %s: %s must be a %d-d tensor, got a scalar", fn, name, dims)
	}
	if dt := n.Dtype(); dt != tensor.Float64 {
		return fmt.Errorf("engine: %s: %s must be float64, got %v", fn, name, dt)
	}
	if dims >= 0 && n.Dims() != dims {
		return fmt.Errorf("engine: %s: %s must be %d-d, got shape %v", fn, name, dims, n.Shape())
	}
	return nil
}

// floatsOf returns the row-major float64 data and shape of a value.
// Strided views are materialized (a copy) because the kernels assume
// contiguous row-major storage.
func floatsOf(v G.Value) ([]float64, tensor.Shape, error) {
	switch v := v.(type) {
	case *tensor.Dense:
		if v.Dtype() != tensor.Float64 {
			return nil, nil, fmt.Errorf("engine: expected float64 data, got %v", v.Dtype())
		}
		if v.RequiresIterator() {
			m, ok := v.Materialize().(*tensor.Dense)
			if !ok {
				return nil, nil, errors.New("engine: cannot materialize a strided view")
			}
			v = m
		}
		size := v.Shape().TotalSize()
		data := v.Float64s()
		if len(data) < size {
			return nil, nil, fmt.Errorf("engine: tensor holds %d values, shape %v needs %d", len(data), v.Shape(), size)
		}
		return data[:size], v.Shape(), nil
	case *G.F64:
		return []float64{float64(*v)}, tensor.ScalarShape(), nil
	case nil:
		return nil, nil, errors.New("engine: missing value")
	default:
		return nil, nil, fmt.Errorf("engine: expected a float64 tensor, got %T", v)
	}
}

// preallocData returns the storage of a preallocated output if it is a
// contiguous float64 tensor of the wanted shape. Otherwise the machine
// falls back to Do.
func preallocData(p G.Value, shape tensor.Shape) ([]float64, error) {
	d, ok := p.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float64 || d.RequiresIterator() || d.IsView() || !d.Shape().Eq(shape) {
		return nil, fmt.Errorf("engine: unusable preallocated value %v", p)
	}
	return d.Float64s()[:shape.TotalSize()], nil
}

// gemm computes C = alpha·op(A)·op(B) + beta·C on row-major blocks.
func gemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	dgemm.Gemm(tA == blas.Trans, tB == blas.Trans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// shapedData returns the values of v as a contiguous []float64 of the given shape.
// Views that need an iterator are materialized (a copy), which only happens
// when a caller feeds a strided slice.
func shapedData(v G.Value, shape tensor.Shape, what string) ([]float64, error) {
	tt, ok := v.(tensor.Tensor)
	if !ok {
		return nil, fmt.Errorf("engine: %s: want a float64 tensor, got %T", what, v)
	}
	if tt.Dtype() != tensor.Float64 {
		return nil, fmt.Errorf("engine: %s: want float64, got %v", what, tt.Dtype())
	}
	if !tt.Shape().Eq(shape) {
		return nil, fmt.Errorf("engine: %s: want shape %v, got %v", what, shape, tt.Shape())
	}
	d, ok := tt.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("engine: %s: want *tensor.Dense, got %T", what, v)
	}
	if d.RequiresIterator() {
		d = d.Materialize().(*tensor.Dense)
	}
	size := shape.TotalSize()
	data := d.Float64s()
	if len(data) < size {
		return nil, fmt.Errorf("engine: %s: backing array holds %d values, want %d", what, len(data), size)
	}
	return data[:size], nil
}

// reuseOrOwn returns prealloc's backing data when it is a dense float64 tensor of
// the wanted shape, or else a zeroed op-owned one (ownedTensor). gorgonia may
// hand an op a stale value from a reused register, so prealloc is never
// trusted blindly.
func reuseOrOwn(prealloc G.Value, shape tensor.Shape, buf *[]float64) (*tensor.Dense, []float64) {
	if d, ok := prealloc.(*tensor.Dense); ok && d.Dtype() == tensor.Float64 &&
		d.Shape().Eq(shape) && !d.IsMaterializable() && len(d.Float64s()) >= shape.TotalSize() {
		return d, d.Float64s()[:shape.TotalSize()]
	}
	d, data := ownedTensor(buf, shape)
	clear(data)
	return d, data
}

// checkFloat64 reports the first of nodes (called names) that is nil or
// not float64: fn's inputs, checked when the op is built.
func checkFloat64(fn string, names []string, nodes ...*G.Node) error {
	for _, n := range nodes {
		if n == nil {
			return fmt.Errorf("engine: %s: nil input node", fn)
		}
	}
	for i, n := range nodes {
		if dt, err := dtypeOf(n); err != nil || dt != tensor.Float64 {
			return fmt.Errorf("engine: %s: %s must be float64, got %v", fn, names[i], n.Type())
		}
	}
	return nil
}

// dtypeOf returns n's dtype without panicking on odd node types.
func dtypeOf(n *G.Node) (dt tensor.Dtype, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: no dtype for %v: %v", n, r)
		}
	}()
	return n.Dtype(), nil
}

// denseData returns the float64 data of v in row-major order.
func denseData(v G.Value, name string) ([]float64, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("flow: %s is a %T, want *tensor.Dense", name, v)
	}
	if d.Dtype() != tensor.Float64 {
		return nil, fmt.Errorf("flow: %s has dtype %v, want float64", name, d.Dtype())
	}
	if d.RequiresIterator() {
		m, ok := d.Materialize().(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("flow: cannot materialize %s", name)
		}
		d = m
	}
	data := d.Float64s()
	if len(data) != d.Shape().TotalSize() {
		return nil, fmt.Errorf("flow: %s holds %d values for shape %v", name, len(data), d.Shape())
	}
	return data, nil
}
