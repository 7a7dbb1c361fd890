package engine

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ErrNotPD is returned (wrapped, naming the task index and λ) when K+λI is
// not positive definite or contains NaN/Inf. gorgonia's VM wraps op errors in
// a type without Unwrap, so test errors coming out of vm.RunAll with IsNotPD
// rather than errors.Is.
var ErrNotPD = errors.New("engine: K+λI is not positive definite")

// krrNotPDAdvice tells the user what usually fixes a failed factorization:
// λ collapsing towards 0 (a too large step on log λ) or NaN features.
const krrNotPDAdvice = "lower the learning rate or raise the minimum λ; check the input features for NaN"

// IsNotPD reports whether err was caused by ErrNotPD, also when err comes
// from vm.RunAll: gorgonia wraps op errors in a type that exposes the cause
// only through an Err method, which errors.Is does not follow.
func IsNotPD(err error) bool {
	// The bound only guards against a pathological Err() cycle.
	for range 64 {
		if err == nil {
			return false
		}
		if errors.Is(err, ErrNotPD) {
			return true
		}
		var ce interface{ Err() error }
		if !errors.As(err, &ce) {
			return false
		}
		next := ce.Err()
		if next == err {
			return false
		}
		err = next
	}
	return false
}

// krrState holds the Cholesky factors of K_t+λI computed by the forward op,
// shared by pointer with the backward ops so that the backward pass re-uses
// them instead of refactoring.
type krrState struct {
	T, n   int
	lambda float64
	chol   []float64 // T×n×n; lower triangles hold L_t with A_t = L_t L_tᵀ
	errs   []error   // per task, so the reported failure is the lowest task index
	valid  bool      // chol matches the last forward run
}

func (s *krrState) ensure(T, n int) {
	if s.T != T || s.n != n || len(s.chol) != T*n*n {
		s.T, s.n = T, n
		s.chol = make([]float64, T*n*n)
		s.errs = make([]error, T)
		s.valid = false
	}
}

// factorTask writes the lower Cholesky factor of K_t+λI into s.chol.
func (s *krrState) factorTask(t int, k []float64) error {
	n := s.n
	kt := k[t*n*n : (t+1)*n*n]
	lt := s.chol[t*n*n : (t+1)*n*n]
	// Potrf reads only the lower triangle, so a NaN in the upper one would
	// slip through: check the whole matrix.
	for i, v := range kt {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w (task %d, λ=%g): K[%d,%d]=%g is not finite; %s",
				ErrNotPD, t, s.lambda, i/n, i%n, v, krrNotPDAdvice)
		}
	}
	copy(lt, kt)
	for i := range n {
		lt[i*n+i] += s.lambda
	}
	if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Lower, N: n, Stride: n, Data: lt}); !ok {
		return fmt.Errorf("%w (task %d, λ=%g, n=%d): %s", ErrNotPD, t, s.lambda, n, krrNotPDAdvice)
	}
	return nil
}

// solveTask overwrites the n×o block b_t with A_t⁻¹ b_t using the cached factor.
func (s *krrState) solveTask(t int, b []float64, o int) {
	n := s.n
	lt := s.chol[t*n*n : (t+1)*n*n]
	lapack64.Potrs(
		blas64.Triangular{Uplo: blas.Lower, Diag: blas.NonUnit, N: n, Stride: n, Data: lt},
		blas64.General{Rows: n, Cols: o, Stride: o, Data: b[t*n*o : (t+1)*n*o]},
	)
}

// factor computes the Cholesky factors of all K_t+λI (k is T×n×n) and, when
// y and x are non-nil, also x_t = (K_t+λI)⁻¹ y_t (both T×n×o). It returns the
// error of the lowest failing task.
func (s *krrState) factor(k []float64, lambda float64, T, n int, y, x []float64, o int) error {
	s.ensure(T, n)
	s.lambda = lambda
	s.valid = false
	if math.IsNaN(lambda) || math.IsInf(lambda, 0) {
		return fmt.Errorf("%w (λ=%g): λ is not finite; %s", ErrNotPD, lambda, krrNotPDAdvice)
	}
	nf := float64(n)
	flops := nf*nf*nf/3 + 2*nf*nf*float64(o)
	forTasks(T, float64(T)*flops, func(t int) {
		if err := s.factorTask(t, k); err != nil {
			s.errs[t] = err
			return
		}
		s.errs[t] = nil
		if x != nil {
			copy(x[t*n*o:(t+1)*n*o], y[t*n*o:(t+1)*n*o])
			s.solveTask(t, x, o)
		}
	})
	for _, err := range s.errs {
		if err != nil {
			return err
		}
	}
	s.valid = true
	return nil
}

// gradY writes dy = A⁻¹ g for every task (A symmetric, so no transpose).
func (s *krrState) gradY(g, dy []float64, o int) {
	n := s.n
	copy(dy, g[:s.T*n*o])
	forTasks(s.T, 2*float64(s.T*n*n*o), func(t int) { s.solveTask(t, dy, o) })
}

// krrGradK writes dK_t = −½(dY_t X_tᵀ + X_t dY_tᵀ) for every task. The exact
// gradient of the lower-triangle-only factorization would be one-sided;
// symmetrizing it is the gradient w.r.t. a symmetric K, which is what the
// upstream kernel ops produce and what they must be differentiated against.
func krrGradK(dy, x, dk []float64, T, n, o int) {
	forTasks(T, 2*float64(T*n*n*o), func(t int) {
		kt := dk[t*n*n : (t+1)*n*n]
		blas64.Syr2k(blas.NoTrans, -0.5,
			blas64.General{Rows: n, Cols: o, Stride: o, Data: dy[t*n*o : (t+1)*n*o]},
			blas64.General{Rows: n, Cols: o, Stride: o, Data: x[t*n*o : (t+1)*n*o]},
			0, blas64.Symmetric{Uplo: blas.Lower, N: n, Stride: n, Data: kt})
		for i := range n {
			for j := i + 1; j < n; j++ {
				kt[i*n+j] = kt[j*n+i]
			}
		}
	})
}

// krrGradLambda returns −Σ_t Σ (dY_t ∘ X_t), summing per-task partials in task
// order so that the value does not depend on the batch split.
func krrGradLambda(dy, x []float64, T, size int) float64 {
	total := 0.0
	for t := range T {
		p := 0.0
		for i := t * size; i < (t+1)*size; i++ {
			p += dy[i] * x[i]
		}
		total -= p
	}
	return total
}

// krrT3 is the gorgonia type of a rank-3 float64 tensor.
func krrT3() hm.Type { return gorgonia.TensorType{Dims: 3, Of: tensor.Float64} }

// krrLambdaType returns the gorgonia type of a λ node of the given shape: a
// plain float64 for a 0-d scalar, a tensor type otherwise.
func krrLambdaType(shape tensor.Shape) hm.Type {
	if len(shape) == 0 {
		return tensor.Float64
	}
	return gorgonia.TensorType{Dims: len(shape), Of: tensor.Float64}
}

// krrF64 returns the values of v as a contiguous []float64 of the given shape.
// Views that need an iterator are materialized (a copy), which only happens
// when a caller feeds a strided slice.
func krrF64(v gorgonia.Value, shape tensor.Shape, what string) ([]float64, error) {
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

// krrOut returns prealloc's backing data when it is a dense float64 tensor of
// the wanted shape, or else a zeroed op-owned one (ownedTensor). gorgonia may
// hand an op a stale value from a reused register, so prealloc is never
// trusted blindly.
func krrOut(prealloc gorgonia.Value, shape tensor.Shape, buf *[]float64) (*tensor.Dense, []float64) {
	if d, ok := prealloc.(*tensor.Dense); ok && d.Dtype() == tensor.Float64 &&
		d.Shape().Eq(shape) && !d.IsMaterializable() && len(d.Float64s()) >= shape.TotalSize() {
		return d, d.Float64s()[:shape.TotalSize()]
	}
	d, data := ownedTensor(buf, shape)
	clear(data)
	return d, data
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

func krrWriteHash(h hash.Hash, name string, id uint64) { fmt.Fprintf(h, "%s#%d", name, id) }

func krrHashcode(name string, id uint64) uint32 {
	h := fnv.New32a()
	krrWriteHash(h, name, id)
	return h.Sum32()
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
// the same time.
func KRRSolve(k, y, lambda *gorgonia.Node) (*gorgonia.Node, error) {
	if k == nil || y == nil || lambda == nil {
		return nil, errors.New("engine: KRRSolve: nil input node")
	}
	for _, in := range []struct {
		name string
		n    *gorgonia.Node
	}{{"k", k}, {"y", y}, {"lambda", lambda}} {
		if dt, err := krrDtype(in.n); err != nil || dt != tensor.Float64 {
			return nil, fmt.Errorf("engine: KRRSolve: %s must be float64, got %v", in.name, in.n.Type())
		}
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
	op := &krrOp{
		krrBase: &krrBase{st: &krrState{}, kShape: ks, yShape: ys, lShape: ls},
		id:      opSeq.Add(1),
	}
	return gorgonia.ApplyOp(op, k, y, lambda)
}

// krrDtype returns n's dtype without panicking on odd node types.
func krrDtype(n *gorgonia.Node) (dt tensor.Dtype, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: no dtype for %v: %v", n, r)
		}
	}()
	return n.Dtype(), nil
}

// krrBase carries what the forward and backward ops share. It deliberately
// has no SymDiff: the backward ops must not inherit the forward's.
type krrBase struct {
	st                     *krrState
	kShape, yShape, lShape tensor.Shape
}

func (b *krrBase) ReturnsPtr() bool     { return false }
func (b *krrBase) CallsExtern() bool    { return false }
func (b *krrBase) OverwritesInput() int { return -1 }

// krrOp is the forward KRR solve (k, y, λ) → X.
type krrOp struct {
	*krrBase
	id  uint64
	out []float64 // backing of the output when prealloc is unusable
}

var (
	_ gorgonia.SDOp            = (*krrOp)(nil)
	_ gorgonia.UsePreallocDoer = (*krrOp)(nil)
)

func (op *krrOp) Arity() int { return 3 }
func (op *krrOp) Type() hm.Type {
	return hm.NewFnType(krrT3(), krrT3(), krrLambdaType(op.lShape), krrT3())
}
func (op *krrOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.yShape.Clone(), nil
}
func (op *krrOp) WriteHash(h hash.Hash) { krrWriteHash(h, "KRRSolve", op.id) }
func (op *krrOp) Hashcode() uint32      { return krrHashcode("KRRSolve", op.id) }
func (op *krrOp) String() string        { return fmt.Sprintf("KRRSolve#%d", op.id) }

func (op *krrOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, inputs...)
}

func (op *krrOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: %v: want 3 inputs, got %d", op, len(inputs))
	}
	k, err := krrF64(inputs[0], op.kShape, "KRRSolve k")
	if err != nil {
		return nil, err
	}
	y, err := krrF64(inputs[1], op.yShape, "KRRSolve y")
	if err != nil {
		return nil, err
	}
	lambda, err := krrLambdaValue(inputs[2])
	if err != nil {
		return nil, err
	}
	out, x := krrOut(prealloc, op.yShape, &op.out)
	if err := op.st.factor(k, lambda, op.kShape[0], op.kShape[1], y, x, op.yShape[2]); err != nil {
		return nil, err
	}
	return out, nil
}

func (op *krrOp) DiffWRT(inputs int) []bool { return []bool{true, true, true} }

func (op *krrOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: %v: want 3 inputs, got %d", op, len(inputs))
	}
	// X is an input of dY so that dY (and, through it, dK and dλ) is
	// scheduled after the forward op that fills the factor cache.
	dy, err := gorgonia.ApplyOp(&krrGradYOp{krrBase: op.krrBase, id: opSeq.Add(1)}, inputs[0], inputs[2], output, grad)
	if err != nil {
		return nil, err
	}
	dk, err := gorgonia.ApplyOp(&krrGradKOp{krrBase: op.krrBase, id: opSeq.Add(1)}, dy, output)
	if err != nil {
		return nil, err
	}
	dl, err := gorgonia.ApplyOp(&krrGradLambdaOp{krrBase: op.krrBase, id: opSeq.Add(1)}, dy, output)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dk, dy, dl}, nil
}

// krrGradYOp computes dY = (K+λI)⁻¹ G from (k, λ, X, G).
type krrGradYOp struct {
	*krrBase
	id  uint64
	out []float64 // backing of the output when prealloc is unusable
}

var _ gorgonia.UsePreallocDoer = (*krrGradYOp)(nil)

func (op *krrGradYOp) Arity() int { return 4 }
func (op *krrGradYOp) Type() hm.Type {
	return hm.NewFnType(krrT3(), krrLambdaType(op.lShape), krrT3(), krrT3(), krrT3())
}
func (op *krrGradYOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.yShape.Clone(), nil
}
func (op *krrGradYOp) WriteHash(h hash.Hash) { krrWriteHash(h, "KRRSolveGradY", op.id) }
func (op *krrGradYOp) Hashcode() uint32      { return krrHashcode("KRRSolveGradY", op.id) }
func (op *krrGradYOp) String() string        { return fmt.Sprintf("KRRSolveGradY#%d", op.id) }

func (op *krrGradYOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, inputs...)
}

func (op *krrGradYOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 4 {
		return nil, fmt.Errorf("engine: %v: want 4 inputs, got %d", op, len(inputs))
	}
	g, err := krrF64(inputs[3], op.yShape, "KRRSolve gradient")
	if err != nil {
		return nil, err
	}
	T, n := op.kShape[0], op.kShape[1]
	st := op.st
	if !st.valid || st.T != T || st.n != n {
		// Only reachable if the backward runs without its forward (e.g. a
		// machine that skipped it): refactor from the inputs.
		k, err := krrF64(inputs[0], op.kShape, "KRRSolve k")
		if err != nil {
			return nil, err
		}
		lambda, err := krrLambdaValue(inputs[1])
		if err != nil {
			return nil, err
		}
		if err := st.factor(k, lambda, T, n, nil, nil, op.yShape[2]); err != nil {
			return nil, err
		}
	}
	out, dy := krrOut(prealloc, op.yShape, &op.out)
	st.gradY(g, dy, op.yShape[2])
	return out, nil
}

// krrGradKOp computes dK from (dY, X).
type krrGradKOp struct {
	*krrBase
	id  uint64
	out []float64 // backing of the output when prealloc is unusable
}

var _ gorgonia.UsePreallocDoer = (*krrGradKOp)(nil)

func (op *krrGradKOp) Arity() int { return 2 }
func (op *krrGradKOp) Type() hm.Type {
	return hm.NewFnType(krrT3(), krrT3(), krrT3())
}
func (op *krrGradKOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.kShape.Clone(), nil
}
func (op *krrGradKOp) WriteHash(h hash.Hash) { krrWriteHash(h, "KRRSolveGradK", op.id) }
func (op *krrGradKOp) Hashcode() uint32      { return krrHashcode("KRRSolveGradK", op.id) }
func (op *krrGradKOp) String() string        { return fmt.Sprintf("KRRSolveGradK#%d", op.id) }

func (op *krrGradKOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, inputs...)
}

func (op *krrGradKOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("engine: %v: want 2 inputs, got %d", op, len(inputs))
	}
	dy, err := krrF64(inputs[0], op.yShape, "KRRSolve dY")
	if err != nil {
		return nil, err
	}
	x, err := krrF64(inputs[1], op.yShape, "KRRSolve X")
	if err != nil {
		return nil, err
	}
	out, dk := krrOut(prealloc, op.kShape, &op.out)
	krrGradK(dy, x, dk, op.kShape[0], op.kShape[1], op.yShape[2])
	return out, nil
}

// krrGradLambdaOp computes dλ from (dY, X); its value has λ's type and shape
// so that gorgonia can accumulate it into λ's gradient.
type krrGradLambdaOp struct {
	*krrBase
	id  uint64
	out []float64 // backing of the output when prealloc is unusable
}

var _ gorgonia.UsePreallocDoer = (*krrGradLambdaOp)(nil)

func (op *krrGradLambdaOp) Arity() int { return 2 }
func (op *krrGradLambdaOp) Type() hm.Type {
	return hm.NewFnType(krrT3(), krrT3(), krrLambdaType(op.lShape))
}
func (op *krrGradLambdaOp) InferShape(...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.lShape.Clone(), nil
}
func (op *krrGradLambdaOp) WriteHash(h hash.Hash) { krrWriteHash(h, "KRRSolveGradLambda", op.id) }
func (op *krrGradLambdaOp) Hashcode() uint32      { return krrHashcode("KRRSolveGradLambda", op.id) }
func (op *krrGradLambdaOp) String() string        { return fmt.Sprintf("KRRSolveGradLambda#%d", op.id) }

func (op *krrGradLambdaOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, inputs...)
}

func (op *krrGradLambdaOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("engine: %v: want 2 inputs, got %d", op, len(inputs))
	}
	dy, err := krrF64(inputs[0], op.yShape, "KRRSolve dY")
	if err != nil {
		return nil, err
	}
	x, err := krrF64(inputs[1], op.yShape, "KRRSolve X")
	if err != nil {
		return nil, err
	}
	T := op.kShape[0]
	v := krrGradLambda(dy, x, T, op.yShape[1]*op.yShape[2])
	if len(op.lShape) == 0 {
		if p, ok := prealloc.(*gorgonia.F64); ok && p != nil {
			*p = gorgonia.F64(v)
			return p, nil
		}
		return gorgonia.NewF64(v), nil
	}
	out, data := krrOut(prealloc, op.lShape, &op.out)
	data[0] = v
	return out, nil
}
