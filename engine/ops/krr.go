package ops

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// ErrNotPD is returned (wrapped, naming the task index and λ) when K+λI is
// not positive definite or contains NaN/Inf. gorgonia's VM wraps op errors in
// a type without Unwrap, so test errors coming out of vm.RunAll with IsNotPD
// rather than errors.Is.
var ErrNotPD = errors.New("engine: K+λI is not positive definite")

// ErrNotFinite is matched (errors.Is) by the errors of ops that met a NaN
// or infinite value; a KRRError of a non-finite K or λ matches it as well as
// ErrNotPD.
var ErrNotFinite = errors.New("engine: value is not finite")

// krrNotPDAdvice tells the user what usually fixes a failed factorization:
// λ collapsing towards 0 (a too large step on log λ) or NaN features.
const krrNotPDAdvice = "lower the learning rate (--set lr=…), clip the gradient (--set clip_norm=1) or raise the minimum λ; check the input features for NaN"

// KRRError is the error of a kernel ridge regression solve whose system
// K_t+λI could not be factored: not finite, or not positive definite. It
// matches ErrNotPD, and ErrNotFinite when a value was not finite.
type KRRError struct {
	Task      int     // the lowest failing task; -1 when λ itself is bad
	Lambda    float64 // λ
	N         int     // the system's size
	NonFinite bool    // K or λ held NaN or ±Inf
	Row, Col  int     // the non-finite entry of K (NonFinite, Task ≥ 0)
	Value     float64 // its value
}

func (e *KRRError) Error() string { return e.Problem() + "; " + krrNotPDAdvice }

// Problem is the error without the advice.
func (e *KRRError) Problem() string {
	switch {
	case e.NonFinite && e.Task < 0:
		return fmt.Sprintf("the KRR solve's λ=%g is not finite", e.Lambda)
	case e.NonFinite:
		return fmt.Sprintf("the KRR solve's kernel matrix of task %d is not finite: K[%d,%d]=%g (λ=%g)",
			e.Task, e.Row, e.Col, e.Value, e.Lambda)
	}
	return fmt.Sprintf("the KRR solve's system K+λI of task %d is not positive definite (λ=%g, n=%d)", e.Task, e.Lambda, e.N)
}

// Is matches ErrNotPD, and ErrNotFinite for a non-finite K or λ.
func (e *KRRError) Is(target error) bool {
	return target == ErrNotPD || e.NonFinite && target == ErrNotFinite
}

// Cause returns the error an op returned inside gorgonia's machine,
// without the machine's wrapping ("PC 62. Failed to execute instruction
// …"): it follows the wrappers' Err and Cause methods down to the first
// error that has neither. Other errors are returned as they are.
func Cause(err error) error {
	for range 64 {
		switch e := err.(type) {
		case interface{ Err() error }:
			if next := e.Err(); next != nil && next != err {
				err = next
				continue
			}
		case interface{ Cause() error }:
			if next := e.Cause(); next != nil && next != err {
				err = next
				continue
			}
		}
		return err
	}
	return err
}

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
	pool   *Pool
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
			return &KRRError{Task: t, Lambda: s.lambda, N: n, NonFinite: true, Row: i / n, Col: i % n, Value: v}
		}
	}
	copy(lt, kt)
	for i := range n {
		lt[i*n+i] += s.lambda
	}
	if _, ok := lapack64.Potrf(blas64.Symmetric{Uplo: blas.Lower, N: n, Stride: n, Data: lt}); !ok {
		return &KRRError{Task: t, Lambda: s.lambda, N: n}
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
		return &KRRError{Task: -1, Lambda: lambda, N: n, NonFinite: true}
	}
	nf := float64(n)
	flops := nf*nf*nf/3 + 2*nf*nf*float64(o)
	s.pool.For(T, float64(T)*flops, func(t int) {
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
	s.pool.For(s.T, 2*float64(s.T*n*n*o), func(t int) { s.solveTask(t, dy, o) })
}

// krrGradK writes dK_t = −½(dY_t X_tᵀ + X_t dY_tᵀ) for every task. The exact
// gradient of the lower-triangle-only factorization would be one-sided;
// symmetrizing it is the gradient w.r.t. a symmetric K, which is what the
// upstream kernel ops produce and what they must be differentiated against.
func krrGradK(p *Pool, dy, x, dk []float64, T, n, o int) {
	p.For(T, 2*float64(T*n*n*o), func(t int) {
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
