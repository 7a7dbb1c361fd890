package ops

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// krrLambdaType returns the gorgonia type of a λ node of the given shape: a
// plain float64 for a 0-d scalar, a tensor type otherwise.
func krrLambdaType(shape tensor.Shape) hm.Type {
	if len(shape) == 0 {
		return tensor.Float64
	}
	return gorgonia.TensorType{Dims: len(shape), Of: tensor.Float64}
}

// krrLambdaValue extracts λ from a scalar or 1-element float64 value.
func krrLambdaValue(v gorgonia.Value) (float64, error) {
	switch x := v.(type) {
	case *gorgonia.F64:
		return float64(*x), nil
	case tensor.Tensor:
		if x.Dtype() != tensor.Float64 || x.Shape().TotalSize() != 1 {
			return 0, fmt.Errorf("engine: KRRSolve: λ must be a float64 scalar, got %v %v", x.Dtype(), x.Shape())
		}
		switch d := x.Data().(type) {
		case []float64:
			return d[0], nil
		case float64:
			return d, nil
		}
	}
	return 0, fmt.Errorf("engine: KRRSolve: λ must be a float64 scalar, got %T", v)
}

// KRRSolve returns α = (K + λI)⁻¹ Y for every task of the batch, via Cholesky.
// k: (T,n,n) symmetric PSD; y: (T,n,o); lambda: a scalar node (0-d, value
// *gorgonia.F64, e.g. the result of gorgonia.Exp on a learnable scalar) — a
// 1-element tensor is also accepted. Output (T,n,o). Differentiable w.r.t. k, y
// and lambda.
//
// Only the lower triangle of each K_t is factorized; its gradient is returned
// symmetrized, ½(M+Mᵀ), i.e. the gradient w.r.t. a symmetric K (a finite
// difference that moves K_ij and K_ji together by h changes the loss by
// h·(dK_ij+dK_ji)). A non-PD or non-finite K_t+λI makes vm.RunAll fail with an
// error wrapping ErrNotPD (see IsNotPD). The op caches the factors of its last
// run for its backward pass, so one graph must not be run by two machines at
// the same time. Its kernels spread the tasks over p's workers.
func KRRSolve(p *Pool, k, y, lambda *gorgonia.Node) (*gorgonia.Node, error) {
	if err := checkFloat64("KRRSolve", []string{"k", "y", "lambda"}, k, y, lambda); err != nil {
		return nil, err
	}
	ks, ys, ls := k.Shape(), y.Shape(), lambda.Shape()
	if len(ks) != 3 || ks[1] != ks[2] {
		return nil, fmt.Errorf("engine: KRRSolve: k must be (T,n,n), got %v", ks)
	}
	if len(ys) != 3 || ys[0] != ks[0] || ys[1] != ks[1] {
		return nil, fmt.Errorf("engine: KRRSolve: y must be (T,n,o) = (%d,%d,o) to match k %v, got %v", ks[0], ks[1], ks, ys)
	}
	if ks[0] < 1 || ks[1] < 1 || ys[2] < 1 {
		return nil, fmt.Errorf("engine: KRRSolve: empty shapes k %v, y %v", ks, ys)
	}
	if ls.TotalSize() != 1 {
		return nil, fmt.Errorf("engine: KRRSolve: lambda must be a scalar or 1-element tensor, got shape %v", ls)
	}
	if lambda.IsScalar() {
		ls = tensor.ScalarShape()
	}
	b := &krrBase{st: &krrState{pool: p}, kShape: ks, yShape: ys, lShape: ls}
	op := &krrSolveOp{b.op("KRRSolve", (*krrOp).solve, ys, f64T3, f64T3, krrLambdaType(ls), f64T3)}
	return gorgonia.ApplyOp(op, k, y, lambda)
}

// krrBase carries what the forward and backward ops share.
type krrBase struct {
	st                     *krrState
	kShape, yShape, lShape tensor.Shape
}

// krrOp is one of the ops of a KRR solve: its signature, the state it
// shares with the others, the kernel it runs (into prealloc, or into
// op-owned storage when prealloc is nil or unusable) and that storage. The
// backward ops are krrOps; the forward op adds SymDiff (krrSolveOp).
type krrOp struct {
	opBase
	signature
	*krrBase
	run func(op *krrOp, prealloc gorgonia.Value, inputs []gorgonia.Value) (gorgonia.Value, error)
	out []float64
}

var _ gorgonia.UsePreallocDoer = (*krrOp)(nil)

// op returns a new op called name that runs run, with inputs and output of
// the given types and an output of the given shape.
func (b *krrBase) op(name string, run func(*krrOp, gorgonia.Value, []gorgonia.Value) (gorgonia.Value, error),
	shape tensor.Shape, types ...hm.Type) *krrOp {
	return &krrOp{opBase: base(fmt.Sprintf("%s#%d", name, opSeq.Add(1)), ""),
		signature: signature{types: types, shape: shape}, krrBase: b, run: run}
}

func (op *krrOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.run(op, nil, inputs)
}

func (op *krrOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.run(op, prealloc, inputs)
}

// krrSolveOp is the forward KRR solve (k, y, λ) → X.
type krrSolveOp struct{ *krrOp }

var _ gorgonia.SDOp = (*krrSolveOp)(nil)

// solve runs the forward op.
func (op *krrOp) solve(prealloc gorgonia.Value, inputs []gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: %v: want 3 inputs, got %d", op, len(inputs))
	}
	k, lambda, err := op.kLambda(inputs[0], inputs[2])
	if err != nil {
		return nil, err
	}
	y, err := shapedData(inputs[1], op.yShape, "KRRSolve y")
	if err != nil {
		return nil, err
	}
	out, x := reuseOrOwn(prealloc, op.yShape, &op.out)
	if err := op.st.factor(k, lambda, op.kShape[0], op.kShape[1], y, x, op.yShape[2]); err != nil {
		return nil, err
	}
	return out, nil
}

func (op *krrSolveOp) DiffWRT(inputs int) []bool { return []bool{true, true, true} }

func (op *krrSolveOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: %v: want 3 inputs, got %d", op, len(inputs))
	}
	b, lt := op.krrBase, krrLambdaType(op.lShape)
	// X is an input of dY so that dY (and, through it, dK and dλ) is
	// scheduled after the forward op that fills the factor cache.
	dy, err := gorgonia.ApplyOp(b.op("KRRSolveGradY", (*krrOp).gradY, b.yShape, f64T3, lt, f64T3, f64T3, f64T3),
		inputs[0], inputs[2], output, grad)
	if err != nil {
		return nil, err
	}
	dk, err := gorgonia.ApplyOp(b.op("KRRSolveGradK", (*krrOp).gradK, b.kShape, f64T3, f64T3, f64T3), dy, output)
	if err != nil {
		return nil, err
	}
	// dλ has λ's type and shape so that gorgonia can accumulate it into
	// λ's gradient.
	dl, err := gorgonia.ApplyOp(b.op("KRRSolveGradLambda", (*krrOp).gradLambda, b.lShape, f64T3, f64T3, lt), dy, output)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dk, dy, dl}, nil
}

// kLambda unpacks the K and λ inputs.
func (op *krrOp) kLambda(kv, lv gorgonia.Value) (k []float64, lambda float64, err error) {
	if k, err = shapedData(kv, op.kShape, "KRRSolve k"); err != nil {
		return nil, 0, err
	}
	lambda, err = krrLambdaValue(lv)
	return k, lambda, err
}

// gradY computes dY = (K+λI)⁻¹ G from (k, λ, X, G).
func (op *krrOp) gradY(prealloc gorgonia.Value, inputs []gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 4 {
		return nil, fmt.Errorf("engine: %v: want 4 inputs, got %d", op, len(inputs))
	}
	g, err := shapedData(inputs[3], op.yShape, "KRRSolve gradient")
	if err != nil {
		return nil, err
	}
	T, n := op.kShape[0], op.kShape[1]
	st := op.st
	if !st.valid || st.T != T || st.n != n {
		// Only reachable if the backward runs without its forward (e.g. a
		// machine that skipped it): refactor from the inputs.
		k, lambda, err := op.kLambda(inputs[0], inputs[1])
		if err != nil {
			return nil, err
		}
		if err := st.factor(k, lambda, T, n, nil, nil, op.yShape[2]); err != nil {
			return nil, err
		}
	}
	out, dy := reuseOrOwn(prealloc, op.yShape, &op.out)
	st.gradY(g, dy, op.yShape[2])
	return out, nil
}

// dyX unpacks the (dY, X) inputs of the gradient ops of K and λ.
func (op *krrOp) dyX(inputs []gorgonia.Value) (dy, x []float64, err error) {
	if len(inputs) != 2 {
		return nil, nil, fmt.Errorf("engine: %v: want 2 inputs, got %d", op, len(inputs))
	}
	if dy, err = shapedData(inputs[0], op.yShape, "KRRSolve dY"); err != nil {
		return nil, nil, err
	}
	x, err = shapedData(inputs[1], op.yShape, "KRRSolve X")
	return dy, x, err
}

// gradK computes dK from (dY, X).
func (op *krrOp) gradK(prealloc gorgonia.Value, inputs []gorgonia.Value) (gorgonia.Value, error) {
	dy, x, err := op.dyX(inputs)
	if err != nil {
		return nil, err
	}
	out, dk := reuseOrOwn(prealloc, op.kShape, &op.out)
	krrGradK(op.st.pool, dy, x, dk, op.kShape[0], op.kShape[1], op.yShape[2])
	return out, nil
}

// gradLambda computes dλ from (dY, X).
func (op *krrOp) gradLambda(prealloc gorgonia.Value, inputs []gorgonia.Value) (gorgonia.Value, error) {
	dy, x, err := op.dyX(inputs)
	if err != nil {
		return nil, err
	}
	v := krrGradLambda(dy, x, op.kShape[0], op.yShape[1]*op.yShape[2])
	if len(op.lShape) == 0 {
		if p, ok := prealloc.(*gorgonia.F64); ok && p != nil {
			*p = gorgonia.F64(v)
			return p, nil
		}
		return gorgonia.NewF64(v), nil
	}
	out, data := reuseOrOwn(prealloc, op.lShape, &op.out)
	data[0] = v
	return out, nil
}
