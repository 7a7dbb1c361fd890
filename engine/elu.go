package engine

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// eluChunk is the fixed work unit of the ELU kernels (elementwise results
// do not depend on the split).
const eluChunk = 4096

// eluChunks runs fn over [0, n) in chunks; cost is the estimated work per
// element, so that small inputs stay on the calling goroutine.
func eluChunks(n, cost int, fn func(lo, hi int)) {
	forTasks((n+eluChunk-1)/eluChunk, float64(n*cost), func(c int) {
		fn(c*eluChunk, min((c+1)*eluChunk, n))
	})
}

// eluForward computes y = x for x > 0 and exp(x) − 1 otherwise. Expm1 keeps
// full relative precision near 0, where exp(x) − 1 would cancel.
func eluForward(y, x []float64) {
	eluChunks(len(x), 10, func(lo, hi int) { // Expm1 costs ~10 ns
		for i, v := range x[lo:hi] {
			if v > 0 {
				y[lo+i] = v
			} else {
				y[lo+i] = math.Expm1(v)
			}
		}
	})
}

// eluBackward computes dx = g·ELU'(x) from the forward output y: for x ≤ 0,
// ELU'(x) = exp(x) = y + 1, which saves an exp per element (the absolute
// error of y + 1 is ~1e-16, far below what matters for a gradient). At x = 0
// both one-sided derivatives are 1, and y + 1 = 1 there too. min(y, 0) + 1
// covers both sides without a branch on the (random) sign.
func eluBackward(dx, y, g []float64) {
	eluChunks(len(y), 1, func(lo, hi int) {
		gs, dxs := g[lo:hi], dx[lo:hi]
		for i, v := range y[lo:hi] {
			dxs[i] = gs[i] * (min(v, 0) + 1)
		}
	})
}

// ELU returns x for x>0 and exp(x)−1 otherwise, elementwise, any shape. Differentiable.
func ELU(x *gorgonia.Node) (*gorgonia.Node, error) {
	if err := miscCheckNode("ELU", "x", x, -1); err != nil {
		return nil, err
	}
	return gorgonia.ApplyOp(&eluOp{id: opSeq.Add(1)}, x)
}

// eluApply runs kernel into p (if usable) or a fresh value shaped like the
// first input. Scalars stay *gorgonia.F64 so that ELU of a scalar node
// yields the scalar value gorgonia expects.
func eluApply(name string, p gorgonia.Value, vals []gorgonia.Value, kernel func(dst []float64, src [][]float64)) (gorgonia.Value, error) {
	src := make([][]float64, len(vals))
	var shape tensor.Shape
	for i, v := range vals {
		data, s, err := miscFloats(v)
		if err != nil {
			return nil, fmt.Errorf("engine: %s: input %d: %w", name, i, err)
		}
		if i == 0 {
			shape = s
		} else if len(data) != len(src[0]) {
			return nil, fmt.Errorf("engine: %s: input shapes %v and %v differ", name, shape, s)
		}
		src[i] = data
	}
	if _, ok := vals[0].(*gorgonia.F64); ok {
		var r [1]float64
		kernel(r[:], src)
		if pf, ok := p.(*gorgonia.F64); ok {
			*pf = gorgonia.F64(r[0])
			return pf, nil
		}
		return gorgonia.NewF64(r[0]), nil
	}
	if p != nil {
		data, err := miscPrealloc(p, shape)
		if err != nil {
			return nil, err
		}
		kernel(data, src)
		return p, nil
	}
	out, data := miscNewDense(shape)
	kernel(data, src)
	return out, nil
}

type eluOp struct{ id uint64 }

func (op *eluOp) Arity() int { return 1 }

func (op *eluOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}

func (op *eluOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(ds) != 1 {
		return nil, fmt.Errorf("engine: ELU: want 1 input, got %d", len(ds))
	}
	s, ok := ds[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("engine: ELU: input is not a shape")
	}
	return s.Clone(), nil
}

func (op *eluOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

func (op *eluOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vals) != 1 {
		return nil, fmt.Errorf("engine: ELU: want 1 input, got %d", len(vals))
	}
	return eluApply("ELU", p, vals, func(dst []float64, src [][]float64) { eluForward(dst, src[0]) })
}

func (op *eluOp) ReturnsPtr() bool      { return false }
func (op *eluOp) CallsExtern() bool     { return false }
func (op *eluOp) OverwritesInput() int  { return -1 }
func (op *eluOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "engine.ELU#%d", op.id) }
func (op *eluOp) Hashcode() uint32      { return opHash(op) }
func (op *eluOp) String() string        { return fmt.Sprintf("ELU#%d", op.id) }

func (op *eluOp) DiffWRT(inputs int) []bool { return []bool{true} }

func (op *eluOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("engine: ELU: want 1 input, got %d", len(inputs))
	}
	dx, err := gorgonia.ApplyOp(&eluGradOp{id: opSeq.Add(1)}, output, grad)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dx}, nil
}

// eluGradOp computes dx from (y, dy); it needs the output, not the input.
type eluGradOp struct{ id uint64 }

func (op *eluGradOp) Arity() int { return 2 }

func (op *eluGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}

func (op *eluGradOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(ds) != 2 {
		return nil, fmt.Errorf("engine: ELU grad: want 2 inputs, got %d", len(ds))
	}
	s, ok := ds[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("engine: ELU grad: input is not a shape")
	}
	return s.Clone(), nil
}

func (op *eluGradOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

func (op *eluGradOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vals) != 2 {
		return nil, fmt.Errorf("engine: ELU grad: want 2 inputs, got %d", len(vals))
	}
	return eluApply("ELU grad", p, vals, func(dst []float64, src [][]float64) { eluBackward(dst, src[0], src[1]) })
}

func (op *eluGradOp) ReturnsPtr() bool      { return false }
func (op *eluGradOp) CallsExtern() bool     { return false }
func (op *eluGradOp) OverwritesInput() int  { return -1 }
func (op *eluGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "engine.ELUGrad#%d", op.id) }
func (op *eluGradOp) Hashcode() uint32      { return opHash(op) }
func (op *eluGradOp) String() string        { return fmt.Sprintf("ELUGrad#%d", op.id) }
