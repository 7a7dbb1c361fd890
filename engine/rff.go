package engine

import (
	"errors"
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/engine/internal/dgemm"
	"github.com/mkbench/mkbench/engine/task"
	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Helpers shared by the ops of rff.go, attention.go and elu.go. They carry a
// "misc" prefix because other files of the package are written concurrently
// and generic names would collide.

// miscCheckNode validates a graph input at build time, so that misuse is
// reported by the constructor rather than by type unification deep in
// gorgonia (or by a panic at run time).
func miscCheckNode(fn, name string, n *gorgonia.Node, dims int) error {
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

// miscFloats returns the row-major float64 data and shape of a value. Strided
// views are materialized (a copy) because the kernels assume contiguous
// row-major storage.
func miscFloats(v gorgonia.Value) ([]float64, tensor.Shape, error) {
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
	case *gorgonia.F64:
		return []float64{float64(*v)}, tensor.ScalarShape(), nil
	case nil:
		return nil, nil, errors.New("engine: missing value")
	default:
		return nil, nil, fmt.Errorf("engine: expected a float64 tensor, got %T", v)
	}
}

// miscPrealloc returns the storage of a preallocated output if it is a
// contiguous float64 tensor of the wanted shape. Otherwise the machine
// falls back to Do, which allocates.
func miscPrealloc(p gorgonia.Value, shape tensor.Shape) ([]float64, error) {
	d, ok := p.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float64 || d.RequiresIterator() || d.IsView() || !d.Shape().Eq(shape) {
		return nil, fmt.Errorf("engine: unusable preallocated value %v", p)
	}
	return d.Float64s()[:shape.TotalSize()], nil
}

// miscGemm computes C = alpha·op(A)·op(B) + beta·C on row-major blocks.
func miscGemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	dgemm.Gemm(tA == blas.Trans, tB == blas.Trans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// RFF kernels. Layout: x (T,n,f), omega (T,D,f), b (T,D), z (T,n,D).

// rffDims describes one batch of random Fourier features.
type rffDims struct{ T, n, f, D int }

func (d rffDims) scale() float64 { return math.Sqrt(2 / float64(d.D)) }

// rffForward computes z = √(2/D)·cos(x·ωᵀ + b) per task. If sinOut is not
// nil it receives sin(x·ωᵀ + b), which is all the backward pass needs beyond
// the inputs; Sincos makes it nearly free compared with recomputing it.
func rffForward(z, sinOut, x, omega, b []float64, d rffDims) {
	c := d.scale()
	nD, nf, Df := d.n*d.D, d.n*d.f, d.D*d.f
	forTasks(d.T, float64(d.T*nD*(d.f+10)), func(t int) {
		zt := z[t*nD : (t+1)*nD]
		miscGemm(blas.NoTrans, blas.Trans, d.n, d.D, d.f, 1,
			x[t*nf:(t+1)*nf], d.f, omega[t*Df:(t+1)*Df], d.f, 0, zt, d.D)
		bt := b[t*d.D : (t+1)*d.D]
		var st []float64
		if sinOut != nil {
			st = sinOut[t*nD : (t+1)*nD]
		} else {
			st = make([]float64, d.D) // the sines are not kept: one row of scratch
		}
		for i := range d.n {
			row := zt[i*d.D : (i+1)*d.D]
			for j, bj := range bt {
				row[j] += bj
			}
			srow := st[:d.D]
			if sinOut != nil {
				srow = st[i*d.D : (i+1)*d.D]
			}
			dgemm.SincosScaled(srow, row, row, c)
		}
	})
}

// rffBackward computes the gradients of Σ g∘z: with S = sin(x·ωᵀ + b) ∘ g,
// dx = −√(2/D)·S·ω and dω = −√(2/D)·Sᵀ·x, per task. Either output may be
// nil. scratch holds T·n·D values; each task uses only its own slice, which
// keeps the workers independent.
func rffBackward(dx, domega, x, omega, sinv, g, scratch []float64, d rffDims) {
	alpha := -d.scale()
	nD, nf, Df := d.n*d.D, d.n*d.f, d.D*d.f
	forTasks(d.T, float64(d.T*nD*d.f), func(t int) {
		s := scratch[t*nD : (t+1)*nD]
		st, gt := sinv[t*nD:(t+1)*nD], g[t*nD:(t+1)*nD]
		for i := range s {
			s[i] = st[i] * gt[i]
		}
		if dx != nil {
			miscGemm(blas.NoTrans, blas.NoTrans, d.n, d.f, d.D, alpha,
				s, d.D, omega[t*Df:(t+1)*Df], d.f, 0, dx[t*nf:(t+1)*nf], d.f)
		}
		if domega != nil {
			miscGemm(blas.Trans, blas.NoTrans, d.D, d.f, d.n, alpha,
				s, d.D, x[t*nf:(t+1)*nf], d.f, 0, domega[t*Df:(t+1)*Df], d.f)
		}
	})
}

// rffState is the forward cache shared by a forward op and its backward ops.
type rffState struct {
	dims  rffDims
	sin   []float64
	valid bool
}

// RFFFeatures returns z[t,i,j] = √(2/D)·cos(x[t,i]·ω[t,j] + b[t,j]) for x (T,n,f), omega (T,D,f),
// b (T,D). Differentiable w.r.t. x and omega (b is a random phase: no gradient).
//
// The node keeps sin(x·ωᵀ + b) from its forward run for its gradient nodes,
// so its graph must be run by one machine at a time (as gorgonia requires
// anyway), with the forward node executed in the same run as the gradients.
func RFFFeatures(x, omega, b *gorgonia.Node) (*gorgonia.Node, error) {
	const fn = "RFFFeatures"
	if err := miscCheckNode(fn, "x", x, 3); err != nil {
		return nil, err
	}
	if err := miscCheckNode(fn, "omega", omega, 3); err != nil {
		return nil, err
	}
	if err := miscCheckNode(fn, "b", b, 2); err != nil {
		return nil, err
	}
	if _, err := rffShapes(x.Shape(), omega.Shape(), b.Shape()); err != nil {
		return nil, err
	}
	op := &rffOp{id: opSeq.Add(1), st: &rffState{}}
	return gorgonia.ApplyOp(op, x, omega, b)
}

func rffShapes(xs, os, bs tensor.Shape) (rffDims, error) {
	if xs.Dims() != 3 || os.Dims() != 3 || bs.Dims() != 2 {
		return rffDims{}, fmt.Errorf("engine: RFFFeatures: want x (T,n,f), omega (T,D,f), b (T,D); got %v, %v, %v", xs, os, bs)
	}
	d := rffDims{T: xs[0], n: xs[1], f: xs[2], D: os[1]}
	if os[0] != d.T || os[2] != d.f || bs[0] != d.T || bs[1] != d.D {
		return rffDims{}, fmt.Errorf("engine: RFFFeatures: want x (T,n,f), omega (T,D,f), b (T,D); got %v, %v, %v", xs, os, bs)
	}
	if d.T <= 0 || d.n <= 0 || d.f <= 0 || d.D <= 0 {
		return rffDims{}, fmt.Errorf("engine: RFFFeatures: empty dimension in x %v, omega %v", xs, os)
	}
	return d, nil
}

// rffInputs unpacks (x, omega, b, ...) values.
func rffInputs(vals []gorgonia.Value) (x, omega, b []float64, d rffDims, err error) {
	if len(vals) < 3 {
		return nil, nil, nil, d, fmt.Errorf("engine: RFFFeatures: want 3 inputs, got %d", len(vals))
	}
	var xs, os, bs tensor.Shape
	if x, xs, err = miscFloats(vals[0]); err != nil {
		return
	}
	if omega, os, err = miscFloats(vals[1]); err != nil {
		return
	}
	if b, bs, err = miscFloats(vals[2]); err != nil {
		return
	}
	d, err = rffShapes(xs, os, bs)
	return
}

type rffOp struct {
	id  uint64
	st  *rffState
	out []float64 // backing of the output (ownedTensor)
}

func (op *rffOp) Arity() int { return 3 }

func (op *rffOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t3 := gorgonia.TensorType{Dims: 3, Of: a}
	t2 := gorgonia.TensorType{Dims: 2, Of: a}
	return hm.NewFnType(t3, t3, t2, t3)
}

func (op *rffOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(ds) != 3 {
		return nil, fmt.Errorf("engine: RFFFeatures: want 3 inputs, got %d", len(ds))
	}
	shapes, err := gorgonia.DimSizersToShapes(ds)
	if err != nil {
		return nil, err
	}
	d, err := rffShapes(shapes[0], shapes[1], shapes[2])
	if err != nil {
		return nil, err
	}
	return tensor.Shape{d.T, d.n, d.D}, nil
}

func (op *rffOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	x, omega, b, d, err := rffInputs(vals)
	if err != nil {
		return nil, err
	}
	out, z := ownedTensor(&op.out, tensor.Shape{d.T, d.n, d.D})
	op.forward(z, x, omega, b, d)
	return out, nil
}

func (op *rffOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	x, omega, b, d, err := rffInputs(vals)
	if err != nil {
		return nil, err
	}
	z, err := miscPrealloc(p, tensor.Shape{d.T, d.n, d.D})
	if err != nil {
		return nil, err
	}
	op.forward(z, x, omega, b, d)
	return p, nil
}

func (op *rffOp) forward(z, x, omega, b []float64, d rffDims) {
	op.st.dims = d
	op.st.sin = task.Grow(op.st.sin, d.T*d.n*d.D)
	rffForward(z, op.st.sin, x, omega, b, d)
	op.st.valid = true
}

func (op *rffOp) ReturnsPtr() bool     { return false }
func (op *rffOp) CallsExtern() bool    { return false }
func (op *rffOp) OverwritesInput() int { return -1 }
func (op *rffOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "engine.RFFFeatures#%d", op.id)
}
func (op *rffOp) Hashcode() uint32 { return opHash(op) }
func (op *rffOp) String() string   { return fmt.Sprintf("RFFFeatures#%d", op.id) }

func (op *rffOp) DiffWRT(inputs int) []bool { return []bool{true, true, false} }

func (op *rffOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: RFFFeatures: want 3 inputs, got %d", len(inputs))
	}
	children := []*gorgonia.Node{inputs[0], inputs[1], inputs[2], output, grad}
	dx, err := gorgonia.ApplyOp(&rffGradOp{id: opSeq.Add(1), wrt: 0, st: op.st}, children...)
	if err != nil {
		return nil, err
	}
	dw, err := gorgonia.ApplyOp(&rffGradOp{id: opSeq.Add(1), wrt: 1, st: op.st}, children...)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dx, dw, nil}, nil
}

// rffGradOp produces the gradient w.r.t. x (wrt 0) or omega (wrt 1) from
// (x, omega, b, z, dz). The two gradients are separate ops because each is
// one GEMM of its own; each recomputes the cheap S = sin∘dz product rather
// than depend on the order in which the machine runs them.
type rffGradOp struct {
	id      uint64
	wrt     int
	st      *rffState
	scratch []float64
	sin     []float64 // used only when the forward cache is unusable
	out     []float64 // backing of the output (ownedTensor)
}

func (op *rffGradOp) Arity() int { return 5 }

func (op *rffGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	t3 := gorgonia.TensorType{Dims: 3, Of: a}
	t2 := gorgonia.TensorType{Dims: 2, Of: a}
	return hm.NewFnType(t3, t3, t2, t3, t3, t3)
}

func (op *rffGradOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(ds) != 5 {
		return nil, fmt.Errorf("engine: RFFFeatures grad: want 5 inputs, got %d", len(ds))
	}
	s, ok := ds[op.wrt].(tensor.Shape)
	if !ok {
		return nil, errors.New("engine: RFFFeatures grad: input is not a shape")
	}
	return s.Clone(), nil
}

func (op *rffGradOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.do(nil, vals)
}

func (op *rffGradOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.do(p, vals)
}

func (op *rffGradOp) do(p gorgonia.Value, vals []gorgonia.Value) (gorgonia.Value, error) {
	if len(vals) != 5 {
		return nil, fmt.Errorf("engine: RFFFeatures grad: want 5 inputs, got %d", len(vals))
	}
	x, omega, b, d, err := rffInputs(vals)
	if err != nil {
		return nil, err
	}
	g, gs, err := miscFloats(vals[4])
	if err != nil {
		return nil, err
	}
	if !gs.Eq(tensor.Shape{d.T, d.n, d.D}) {
		return nil, fmt.Errorf("engine: RFFFeatures grad: output gradient has shape %v, want (%d,%d,%d)", gs, d.T, d.n, d.D)
	}
	sinv := op.st.sin
	if !op.st.valid || op.st.dims != d {
		// Only reachable if the forward op did not run on these inputs
		// (e.g. a machine built on part of the graph): recompute.
		op.sin = task.Grow(op.sin, d.T*d.n*d.D)
		z := make([]float64, d.T*d.n*d.D)
		rffForward(z, op.sin, x, omega, b, d)
		sinv = op.sin
	}
	shape := tensor.Shape{d.T, d.n, d.f}
	if op.wrt == 1 {
		shape = tensor.Shape{d.T, d.D, d.f}
	}
	var out gorgonia.Value
	var data []float64
	if p != nil {
		if data, err = miscPrealloc(p, shape); err != nil {
			return nil, err
		}
		out = p
	} else {
		out, data = ownedTensor(&op.out, shape)
	}
	op.scratch = task.Grow(op.scratch, d.T*d.n*d.D)
	if op.wrt == 0 {
		rffBackward(data, nil, x, omega, sinv, g, op.scratch, d)
	} else {
		rffBackward(nil, data, x, omega, sinv, g, op.scratch, d)
	}
	return out, nil
}

func (op *rffGradOp) ReturnsPtr() bool     { return false }
func (op *rffGradOp) CallsExtern() bool    { return false }
func (op *rffGradOp) OverwritesInput() int { return -1 }
func (op *rffGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "engine.RFFFeaturesGrad%d#%d", op.wrt, op.id)
}
func (op *rffGradOp) Hashcode() uint32 { return opHash(op) }
func (op *rffGradOp) String() string {
	return fmt.Sprintf("RFFFeaturesGrad[%s]#%d", [2]string{"x", "omega"}[op.wrt], op.id)
}
