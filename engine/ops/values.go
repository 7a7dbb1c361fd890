package ops

import (
	"errors"
	"fmt"

	"github.com/mkbench/mkbench/internal/task"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Reading the values an op is given and choosing where it writes its
// output. Every op reads its inputs as contiguous row-major float64 data
// and checks their shapes before its kernel runs, and writes into the
// machine's preallocated value or into storage of its own.

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

// errPrealloc is UsePreallocDo's error for a preallocated value that is
// not a contiguous float64 tensor of the op's output shape: gorgonia hands
// over whatever last lived in the output register, and on this error the
// machine runs Do instead. That may happen on any run, so the error is a
// plain value, cheap to return, rather than a message that formats the
// offered tensor.
var errPrealloc = errors.New("engine: the preallocated value does not fit the output")

// preallocData returns the storage of a preallocated output if it is a
// contiguous float64 tensor of the wanted shape, else errPrealloc.
func preallocData(p G.Value, shape tensor.Shape) ([]float64, error) {
	d, ok := p.(*tensor.Dense)
	if !ok || d == nil || d.Dtype() != tensor.Float64 || d.RequiresIterator() || d.IsView() || !d.Shape().Eq(shape) ||
		len(d.Float64s()) < shape.TotalSize() {
		return nil, errPrealloc
	}
	return d.Float64s()[:shape.TotalSize()], nil
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
