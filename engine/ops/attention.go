package ops

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"github.com/mkbench/mkbench/internal/task"
	"gonum.org/v1/gonum/floats"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Laplace attention kernels. Layout: q (T,m,f), k (T,n,f), weights (T,m,n),
// out (T,m,f). An L1 distance has no GEMM form and n (the number of classes)
// is tiny, so the kernels work row by row, with gonum's assembly dot and
// axpy where those apply.

type attDims struct{ T, m, n, f int }

// attL1 returns ‖a − b‖₁. Four partial sums break the dependency chain of a
// single accumulator (the loop is bound by add latency otherwise).
func attL1(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += math.Abs(a[i] - b[i])
		s1 += math.Abs(a[i+1] - b[i+1])
		s2 += math.Abs(a[i+2] - b[i+2])
		s3 += math.Abs(a[i+3] - b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += math.Abs(a[i] - b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// attForward computes out[t,i] = Σ_j w_ij k[t,j] with
// w_i = softmax_j(−‖q[t,i] − k[t,j]‖₁/√f) and stores w (T·m·n values).
func attForward(p *Pool, out, w, q, k []float64, d attDims) {
	inv := 1 / math.Sqrt(float64(d.f))
	mf, nf, mn := d.m*d.f, d.n*d.f, d.m*d.n
	p.For(d.T, float64(2*d.T*mn*d.f), func(t int) {
		qt, kt := q[t*mf:(t+1)*mf], k[t*nf:(t+1)*nf]
		ot, wt := out[t*mf:(t+1)*mf], w[t*mn:(t+1)*mn]
		for i := range d.m {
			qi := qt[i*d.f : (i+1)*d.f]
			wi := wt[i*d.n : (i+1)*d.n]
			mx := math.Inf(-1)
			for j := range d.n {
				s := -attL1(qi, kt[j*d.f:(j+1)*d.f]) * inv
				wi[j] = s
				mx = max(mx, s)
			}
			// Subtracting the max keeps exp from underflowing to an all-zero
			// row when distances are large.
			var sum float64
			for j, s := range wi {
				e := math.Exp(s - mx)
				wi[j] = e
				sum += e
			}
			oi := ot[i*d.f : (i+1)*d.f]
			clear(oi)
			for j := range wi {
				wi[j] /= sum
				floats.AddScaled(oi, wi[j], kt[j*d.f:(j+1)*d.f])
			}
		}
	})
}

// attBackward computes the gradients of Σ g∘out w.r.t. q and k from the
// stored weights w. dw_ij = g_i·k_j; the softmax gives
// ds_ij = w_ij (dw_ij − Σ_j' w_ij' dw_ij'); d = −√f·s, and
// ∂‖q_i − k_j‖₁/∂q_il = sign(q_il − k_jl) with sign(0) = 0. Keys are also the
// values, so dk gets w_ij g_i in addition. Both gradients come from one
// pass: they share the weights' gradient and the sign pass, which is most
// of the work. scratch holds T·n values.
func attBackward(p *Pool, dq, dk, q, k, w, g, scratch []float64, d attDims) {
	inv := 1 / math.Sqrt(float64(d.f))
	mf, nf, mn := d.m*d.f, d.n*d.f, d.m*d.n
	p.For(d.T, float64(4*d.T*mn*d.f), func(t int) {
		qt, kt := q[t*mf:(t+1)*mf], k[t*nf:(t+1)*nf]
		wt, gt := w[t*mn:(t+1)*mn], g[t*mf:(t+1)*mf]
		dqt, dkt := dq[t*mf:(t+1)*mf], dk[t*nf:(t+1)*nf]
		clear(dqt)
		clear(dkt)
		dd := scratch[t*d.n : (t+1)*d.n]
		for i := range d.m {
			qi, gi := qt[i*d.f:(i+1)*d.f], gt[i*d.f:(i+1)*d.f]
			wi := wt[i*d.n : (i+1)*d.n]
			var ws float64
			for j, wij := range wi {
				dw := floats.Dot(gi, kt[j*d.f:(j+1)*d.f])
				floats.AddScaled(dkt[j*d.f:(j+1)*d.f], wij, gi)
				dd[j] = dw
				ws += wij * dw
			}
			for j, wij := range wi {
				dd[j] = -wij * (dd[j] - ws) * inv
			}
			dqi := dqt[i*d.f : (i+1)*d.f][:len(qi)]
			for j, ddj := range dd {
				if ddj == 0 {
					continue
				}
				kj := kt[j*d.f : (j+1)*d.f][:len(qi)]
				dkj := dkt[j*d.f : (j+1)*d.f][:len(qi)]
				// attMulSign instead of a three-way branch on the sign of the
				// difference: those signs are random, and the mispredicted
				// branches cost more than all the arithmetic. The exact-zero
				// test (subgradient 0) is predictable.
				for l, v := range qi {
					diff := v - kj[l]
					c := attMulSign(ddj, diff)
					if diff == 0 {
						c = 0
					}
					dqi[l] += c
					dkj[l] -= c
				}
			}
		}
	})
}

// attMulSign returns a·sign(s) for s ≠ 0 by flipping a's sign bit, without
// a data-dependent branch.
func attMulSign(a, s float64) float64 {
	return math.Float64frombits(math.Float64bits(a) ^ (math.Float64bits(s) & (1 << 63)))
}

// attState is the forward cache shared by a forward op and its backward ops.
// gen counts forward runs so that the backward ops can tell whether their
// jointly computed gradients belong to the current run.
type attState struct {
	pool  *Pool
	dims  attDims
	w     []float64
	gen   uint64
	valid bool
}

// attGradShared holds both gradients, computed together by whichever of the
// two backward ops of one SymDiff call runs first: they share the weights'
// gradient and the sign pass, which is most of the work.
type attGradShared struct {
	gen     uint64
	dq, dk  []float64
	scratch []float64
}

// LaplaceAttention returns, for each query q[t,i], Σ_j w_ij k[t,j] with
// w_i = softmax_j(−‖q[t,i] − k[t,j]‖₁ / √f) — keys are also the values (paper appendix, eq. for the
// prior network's cross attention). q (T,m,f), k (T,n,f) → (T,m,f). Differentiable w.r.t. q and k
// (use 0 as the subgradient of |·| at 0). Numerically stable softmax. Its
// kernels spread the tasks over p's workers.
//
// The node keeps the attention weights from its forward run, and its two
// gradient nodes compute dq and dk together once per run, so its graph must
// be run by one machine at a time (as gorgonia requires anyway).
func LaplaceAttention(p *Pool, q, k *gorgonia.Node) (*gorgonia.Node, error) {
	const fn = "LaplaceAttention"
	if err := checkNode(fn, "q", q, 3); err != nil {
		return nil, err
	}
	if err := checkNode(fn, "k", k, 3); err != nil {
		return nil, err
	}
	if _, err := attShapes(q.Shape(), k.Shape()); err != nil {
		return nil, err
	}
	id := opSeq.Add(1)
	op := &attOp{opBase: base(fmt.Sprintf("engine.LaplaceAttention#%d", id), fmt.Sprintf("LaplaceAttention#%d", id)),
		st: &attState{pool: p}}
	return gorgonia.ApplyOp(op, q, k)
}

func attShapes(qs, ks tensor.Shape) (attDims, error) {
	if qs.Dims() != 3 || ks.Dims() != 3 || qs[0] != ks[0] || qs[2] != ks[2] {
		return attDims{}, fmt.Errorf("engine: LaplaceAttention: want q (T,m,f), k (T,n,f); got %v, %v", qs, ks)
	}
	d := attDims{T: qs[0], m: qs[1], n: ks[1], f: qs[2]}
	if d.T <= 0 || d.m <= 0 || d.n <= 0 || d.f <= 0 {
		return attDims{}, fmt.Errorf("engine: LaplaceAttention: empty dimension in q %v, k %v", qs, ks)
	}
	return d, nil
}

func attInputs(vals []gorgonia.Value) (q, k []float64, d attDims, err error) {
	if len(vals) < 2 {
		return nil, nil, d, fmt.Errorf("engine: LaplaceAttention: want 2 inputs, got %d", len(vals))
	}
	var qs, ks tensor.Shape
	if q, qs, err = floatsOf(vals[0]); err != nil {
		return
	}
	if k, ks, err = floatsOf(vals[1]); err != nil {
		return
	}
	d, err = attShapes(qs, ks)
	return
}

type attOp struct {
	opBase
	st  *attState
	out []float64 // backing of the output (ownedTensor)
}

func (op *attOp) Arity() int { return 2 }

func (op *attOp) Type() hm.Type {
	t3 := tensorType(3)
	return hm.NewFnType(t3, t3, t3)
}

func (op *attOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	shapes, err := inputShapes("LaplaceAttention", 2, ds)
	if err != nil {
		return nil, err
	}
	d, err := attShapes(shapes[0], shapes[1])
	return tensor.Shape{d.T, d.m, d.f}, err
}

func (op *attOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo runs the op into p, or into op-owned storage if p is nil.
func (op *attOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	q, k, d, err := attInputs(vals)
	if err != nil {
		return nil, err
	}
	out, data, err := output(p, tensor.Shape{d.T, d.m, d.f}, &op.out)
	if err != nil {
		return nil, err
	}
	op.st.forward(data, q, k, d)
	return out, nil
}

// forward runs the kernel into out and keeps the weights.
func (st *attState) forward(out, q, k []float64, d attDims) {
	st.dims = d
	st.w = task.Grow(st.w, d.T*d.m*d.n)
	attForward(st.pool, out, st.w, q, k, d)
	st.gen++
	st.valid = true
}

func (op *attOp) DiffWRT(inputs int) []bool { return []bool{true, true} }

func (op *attOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 2 {
		return nil, fmt.Errorf("engine: LaplaceAttention: want 2 inputs, got %d", len(inputs))
	}
	sh := &attGradShared{}
	return gradNodes(2, gorgonia.Nodes{inputs[0], inputs[1], output, grad}, func(wrt int) gorgonia.Op {
		id := opSeq.Add(1)
		return &attGradOp{
			opBase: base(fmt.Sprintf("engine.LaplaceAttentionGrad%d#%d", wrt, id),
				fmt.Sprintf("LaplaceAttentionGrad[%s]#%d", [2]string{"q", "k"}[wrt], id)),
			wrtInput: wrtInput{fn: "LaplaceAttention grad", arity: 4, wrt: wrt}, st: op.st, sh: sh}
	})
}

// attGradOp produces the gradient w.r.t. q (wrt 0) or k (wrt 1) from
// (q, k, out, dout).
type attGradOp struct {
	opBase
	wrtInput
	st  *attState
	sh  *attGradShared
	out []float64 // backing of the output (ownedTensor)
}

func (op *attGradOp) Type() hm.Type {
	t3 := tensorType(3)
	return hm.NewFnType(t3, t3, t3, t3, t3)
}

func (op *attGradOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, vals...)
}

// UsePreallocDo runs the op into p, or into op-owned storage if p is nil.
func (op *attGradOp) UsePreallocDo(p gorgonia.Value, vals ...gorgonia.Value) (gorgonia.Value, error) {
	if len(vals) != 4 {
		return nil, fmt.Errorf("engine: LaplaceAttention grad: want 4 inputs, got %d", len(vals))
	}
	q, k, d, err := attInputs(vals)
	if err != nil {
		return nil, err
	}
	g, err := gradInput(op.fn, vals[3], tensor.Shape{d.T, d.m, d.f})
	if err != nil {
		return nil, err
	}
	shape := tensor.Shape{d.T, d.m, d.f}
	if op.wrt == 1 {
		shape = tensor.Shape{d.T, d.n, d.f}
	}
	out, data, err := output(p, shape, &op.out)
	if err != nil {
		return nil, err
	}
	st, sh := op.st, op.sh
	if !st.valid || st.dims != d {
		// Only reachable if the forward op did not run on these inputs:
		// recompute the weights, and do not trust the shared gradients.
		st.forward(make([]float64, d.T*d.m*d.f), q, k, d)
	}
	if sh.gen != st.gen || sh.dq == nil {
		sh.dq = task.Grow(sh.dq, d.T*d.m*d.f)
		sh.dk = task.Grow(sh.dk, d.T*d.n*d.f)
		sh.scratch = task.Grow(sh.scratch, d.T*d.n)
		attBackward(st.pool, sh.dq, sh.dk, q, k, st.w, g, sh.scratch, d)
		sh.gen = st.gen
	}
	if op.wrt == 0 {
		copy(data, sh.dq)
	} else {
		copy(data, sh.dk)
	}
	return out, nil
}
