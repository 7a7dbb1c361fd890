package ops

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/engine/internal/vecmath"
	"github.com/mkbench/mkbench/internal/task"
	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// RFF kernels. Layout: x (T,n,f), omega (T,D,f), b (T,D), z (T,n,D).

// rffDims describes one batch of random Fourier features.
type rffDims struct{ T, n, f, D int }

func (d rffDims) scale() float64 { return math.Sqrt(2 / float64(d.D)) }

// rffForward computes z = √(2/D)·cos(x·ωᵀ + b) per task. If sinOut is not
// nil it receives sin(x·ωᵀ + b), which is all the backward pass needs beyond
// the inputs; Sincos makes it nearly free compared with recomputing it.
func rffForward(p *Pool, z, sinOut, x, omega, b []float64, d rffDims) {
	c := d.scale()
	nD, nf, Df := d.n*d.D, d.n*d.f, d.D*d.f
	p.For(d.T, float64(d.T*nD*(d.f+10)), func(t int) {
		zt := z[t*nD : (t+1)*nD]
		gemm(blas.NoTrans, blas.Trans, d.n, d.D, d.f, 1,
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
			vecmath.SincosScaled(srow, row, row, c)
		}
	})
}

// rffBackward computes the gradients of Σ g∘z: with S = sin(x·ωᵀ + b) ∘ g,
// dx = −√(2/D)·S·ω and dω = −√(2/D)·Sᵀ·x, per task. Either output may be
// nil. scratch holds T·n·D values; each task uses only its own slice, which
// keeps the workers independent.
func rffBackward(p *Pool, dx, domega, x, omega, sinv, g, scratch []float64, d rffDims) {
	alpha := -d.scale()
	nD, nf, Df := d.n*d.D, d.n*d.f, d.D*d.f
	p.For(d.T, float64(d.T*nD*d.f), func(t int) {
		s := scratch[t*nD : (t+1)*nD]
		st, gt := sinv[t*nD:(t+1)*nD], g[t*nD:(t+1)*nD]
		for i := range s {
			s[i] = st[i] * gt[i]
		}
		if dx != nil {
			gemm(blas.NoTrans, blas.NoTrans, d.n, d.f, d.D, alpha,
				s, d.D, omega[t*Df:(t+1)*Df], d.f, 0, dx[t*nf:(t+1)*nf], d.f)
		}
		if domega != nil {
			gemm(blas.Trans, blas.NoTrans, d.D, d.f, d.n, alpha,
				s, d.D, x[t*nf:(t+1)*nf], d.f, 0, domega[t*Df:(t+1)*Df], d.f)
		}
	})
}

// rffState is the forward cache shared by a forward op and its backward ops.
type rffState struct {
	pool  *Pool
	dims  rffDims
	sin   []float64
	valid bool
}

// RFFFeatures returns z[t,i,j] = √(2/D)·cos(x[t,i]·ω[t,j] + b[t,j]) for x (T,n,f), omega (T,D,f),
// b (T,D). Differentiable w.r.t. x and omega (b is a random phase: no
// gradient). Its kernels spread the tasks over p's workers.
//
// The node keeps sin(x·ωᵀ + b) from its forward run for its gradient nodes,
// so its graph must be run by one machine at a time (as gorgonia requires
// anyway), with the forward node executed in the same run as the gradients.
func RFFFeatures(p *Pool, x, omega, b *gorgonia.Node) (*gorgonia.Node, error) {
	const fn = "RFFFeatures"
	if err := checkNode(fn, "x", x, 3); err != nil {
		return nil, err
	}
	if err := checkNode(fn, "omega", omega, 3); err != nil {
		return nil, err
	}
	if err := checkNode(fn, "b", b, 2); err != nil {
		return nil, err
	}
	if _, err := rffShapes(x.Shape(), omega.Shape(), b.Shape()); err != nil {
		return nil, err
	}
	id := opSeq.Add(1)
	op := &rffOp{opBase: base(fmt.Sprintf("engine.RFFFeatures#%d", id), fmt.Sprintf("RFFFeatures#%d", id)),
		st: &rffState{pool: p}}
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
	if x, xs, err = floatsOf(vals[0]); err != nil {
		return
	}
	if omega, os, err = floatsOf(vals[1]); err != nil {
		return
	}
	if b, bs, err = floatsOf(vals[2]); err != nil {
		return
	}
	d, err = rffShapes(xs, os, bs)
	return
}

// rffType is the type of an RFF op: the inputs x, omega, b, then extra
// rank-3 tensors, the last of them the output.
func rffType(extra int) hm.Type {
	t3 := tensorType(3)
	ts := []hm.Type{t3, t3, tensorType(2)}
	for range extra {
		ts = append(ts, t3)
	}
	return hm.NewFnType(ts...)
}

type rffOp struct {
	opBase
	st  *rffState
	out []float64 // backing of the output (ownedTensor)
}

func (op *rffOp) Arity() int    { return 3 }
func (op *rffOp) Type() hm.Type { return rffType(1) }

func (op *rffOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	shapes, err := inputShapes("RFFFeatures", 3, ds)
	if err != nil {
		return nil, err
	}
	d, err := rffShapes(shapes[0], shapes[1], shapes[2])
	return tensor.Shape{d.T, d.n, d.D}, err
}

func (op *rffOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo runs the op into p, or into op-owned storage if p is nil.
func (op *rffOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	x, omega, b, d, err := rffInputs(vals)
	if err != nil {
		return nil, err
	}
	out, z, err := output(p, tensor.Shape{d.T, d.n, d.D}, &op.out)
	if err != nil {
		return nil, err
	}
	st := op.st
	st.dims = d
	st.sin = task.Grow(st.sin, d.T*d.n*d.D)
	rffForward(st.pool, z, st.sin, x, omega, b, d)
	st.valid = true
	return out, nil
}

func (op *rffOp) DiffWRT(inputs int) []bool { return []bool{true, true, false} }

func (op *rffOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: RFFFeatures: want 3 inputs, got %d", len(inputs))
	}
	children := gorgonia.Nodes{inputs[0], inputs[1], inputs[2], output, grad}
	ds, err := gradNodes(2, children, func(wrt int) gorgonia.Op {
		id := opSeq.Add(1)
		return &rffGradOp{
			opBase: base(fmt.Sprintf("engine.RFFFeaturesGrad%d#%d", wrt, id),
				fmt.Sprintf("RFFFeaturesGrad[%s]#%d", [2]string{"x", "omega"}[wrt], id)),
			wrtInput: wrtInput{fn: "RFFFeatures grad", arity: 5, wrt: wrt}, st: op.st}
	})
	if err != nil {
		return nil, err
	}
	return append(ds, nil), nil // b is a random phase: no gradient
}

// rffGradOp produces the gradient w.r.t. x (wrt 0) or omega (wrt 1) from
// (x, omega, b, z, dz). The two gradients are separate ops because each is
// one GEMM of its own; each recomputes the cheap S = sin∘dz product rather
// than depend on the order in which the machine runs them.
type rffGradOp struct {
	opBase
	wrtInput
	st      *rffState
	scratch []float64
	sin     []float64 // used only when the forward cache is unusable
	out     []float64 // backing of the output (ownedTensor)
}

func (op *rffGradOp) Type() hm.Type { return rffType(3) }

func (op *rffGradOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo runs the op into p, or into op-owned storage if p is nil.
func (op *rffGradOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vals) != 5 {
		return nil, fmt.Errorf("engine: RFFFeatures grad: want 5 inputs, got %d", len(vals))
	}
	x, omega, b, d, err := rffInputs(vals)
	if err != nil {
		return nil, err
	}
	g, err := gradInput(op.fn, vals[4], tensor.Shape{d.T, d.n, d.D})
	if err != nil {
		return nil, err
	}
	pool, sinv := op.st.pool, op.st.sin
	if !op.st.valid || op.st.dims != d {
		// Only reachable if the forward op did not run on these inputs
		// (e.g. a machine built on part of the graph): recompute.
		op.sin = task.Grow(op.sin, d.T*d.n*d.D)
		z := make([]float64, d.T*d.n*d.D)
		rffForward(pool, z, op.sin, x, omega, b, d)
		sinv = op.sin
	}
	shape := tensor.Shape{d.T, d.n, d.f}
	if op.wrt == 1 {
		shape = tensor.Shape{d.T, d.D, d.f}
	}
	out, data, err := output(p, shape, &op.out)
	if err != nil {
		return nil, err
	}
	op.scratch = task.Grow(op.scratch, d.T*d.n*d.D)
	if op.wrt == 0 {
		rffBackward(pool, data, nil, x, omega, sinv, g, op.scratch, d)
	} else {
		rffBackward(pool, nil, data, x, omega, sinv, g, op.scratch, d)
	}
	return out, nil
}
