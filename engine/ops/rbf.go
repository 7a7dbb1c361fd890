package ops

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MeanPairwiseDistance writes into out[t] the mean Euclidean distance over all
// pairs i<j of the n rows of task t in x (T*n*f values, row-major). This is
// the paper's RBF bandwidth heuristic. For n<2 or a zero mean distance, it
// writes 1 so the kernel stays defined. A NaN in x gives a NaN bandwidth,
// which RBFKernel then rejects instead of hiding. It panics if x or out is
// too short.
func MeanPairwiseDistance(x []float64, T, n, f int, out []float64) {
	if T < 0 || n < 0 || f < 0 || len(x) < T*n*f || len(out) < T {
		panic(fmt.Sprintf("engine: MeanPairwiseDistance: len(x)=%d, len(out)=%d too short for T=%d n=%d f=%d",
			len(x), len(out), T, n, f))
	}
	for t := range T {
		if n < 2 {
			out[t] = 1
			continue
		}
		xt := x[t*n*f : (t+1)*n*f]
		sum := 0.0
		for i := range n {
			xi := xt[i*f : (i+1)*f]
			for j := i + 1; j < n; j++ {
				xj := xt[j*f : (j+1)*f]
				d2 := 0.0
				for k, v := range xi {
					d := v - xj[k]
					d2 += d * d
				}
				sum += math.Sqrt(d2)
			}
		}
		mean := sum / float64(n*(n-1)/2)
		if mean == 0 {
			mean = 1
		}
		out[t] = mean
	}
}

// rbfCheckBandwidths rejects bandwidths for which the kernel is undefined.
func rbfCheckBandwidths(bw []float64) error {
	for t, s := range bw {
		if !(s > 0) || math.IsInf(s, 0) {
			return fmt.Errorf("engine: RBFKernel: bandwidth of task %d is %g, want a finite positive value; check the input features for NaN", t, s)
		}
	}
	return nil
}

// rbfForward writes k[t] = exp(-‖a_i-b_j‖²/(2σ_t²)) for a (T,n,f), b (T,m,f).
// sq is scratch of at least T*(n+m) values. same says a and b hold the same
// values (n == m), which lets the kernel be computed on one triangle and come
// out exactly symmetric with a unit diagonal, as KRR expects of K(S,S).
func rbfForward(p *Pool, a, b, bw []float64, T, n, m, f int, same bool, k, sq []float64) {
	p.For(T, 2*float64(T*n*m*f), func(t int) {
		at := blas64.General{Rows: n, Cols: f, Stride: f, Data: a[t*n*f : (t+1)*n*f]}
		kt := k[t*n*m : (t+1)*n*m]
		c := -1 / (2 * bw[t] * bw[t])
		if same {
			blas64.Syrk(blas.NoTrans, 1, at, 0, blas64.Symmetric{Uplo: blas.Lower, N: n, Stride: n, Data: kt})
			// Taking the squared norms from the Gram diagonal makes d_ii
			// exactly 0, whatever rounding the Gram product had.
			for i := range n {
				for j := range i {
					d := max(0, kt[i*n+i]+kt[j*n+j]-2*kt[i*n+j])
					kt[i*n+j] = math.Exp(c * d)
				}
			}
			for i := range n {
				kt[i*n+i] = 1
				for j := i + 1; j < n; j++ {
					kt[i*n+j] = kt[j*n+i]
				}
			}
			return
		}
		bt := blas64.General{Rows: m, Cols: f, Stride: f, Data: b[t*m*f : (t+1)*m*f]}
		sa := sq[t*(n+m) : t*(n+m)+n]
		sb := sq[t*(n+m)+n : (t+1)*(n+m)]
		for i := range n {
			v := blas64.Vector{N: f, Inc: 1, Data: at.Data[i*f : (i+1)*f]}
			sa[i] = blas64.Dot(v, v)
		}
		for j := range m {
			v := blas64.Vector{N: f, Inc: 1, Data: bt.Data[j*f : (j+1)*f]}
			sb[j] = blas64.Dot(v, v)
		}
		blas64.Gemm(blas.NoTrans, blas.Trans, 1, at, bt, 0, blas64.General{Rows: n, Cols: m, Stride: m, Data: kt})
		for i := range n {
			row := kt[i*m : (i+1)*m]
			for j, g := range row {
				// Cancellation can make a tiny distance negative.
				row[j] = math.Exp(c * max(0, sa[i]+sb[j]-2*g))
			}
		}
	})
}

// rbfBackward writes the gradient of Σ G∘K w.r.t. a (wrtB false, into da
// (T,n,f)) or b (wrtB true, into da (T,m,f)). With P = −G∘K/σ²:
// dA = diag(P 1) A − P B and dB = diag(Pᵀ1) B − Pᵀ A. p is scratch of at least
// T*n*m values and sums of at least T*max(n,m).
func rbfBackward(pool *Pool, a, b, bw, k, g []float64, T, n, m, f int, wrtB bool, da, p, sums []float64) {
	r := max(n, m)
	pool.For(T, 2*float64(T*n*m*f), func(t int) {
		at := blas64.General{Rows: n, Cols: f, Stride: f, Data: a[t*n*f : (t+1)*n*f]}
		bt := blas64.General{Rows: m, Cols: f, Stride: f, Data: b[t*m*f : (t+1)*m*f]}
		pt := p[t*n*m : (t+1)*n*m]
		st := sums[t*r : (t+1)*r]
		c := -1 / (bw[t] * bw[t])
		kt, gt := k[t*n*m:(t+1)*n*m], g[t*n*m:(t+1)*n*m]
		for i := range pt {
			pt[i] = c * gt[i] * kt[i]
		}
		P := blas64.General{Rows: n, Cols: m, Stride: m, Data: pt}
		if !wrtB {
			for i := range n {
				s := 0.0
				for _, v := range pt[i*m : (i+1)*m] {
					s += v
				}
				st[i] = s
			}
			out := blas64.General{Rows: n, Cols: f, Stride: f, Data: da[t*n*f : (t+1)*n*f]}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, -1, P, bt, 0, out)
			for i := range n {
				blas64.Axpy(st[i], blas64.Vector{N: f, Inc: 1, Data: at.Data[i*f : (i+1)*f]},
					blas64.Vector{N: f, Inc: 1, Data: out.Data[i*f : (i+1)*f]})
			}
			return
		}
		for j := range m {
			st[j] = 0
		}
		for i := range n {
			for j, v := range pt[i*m : (i+1)*m] {
				st[j] += v
			}
		}
		out := blas64.General{Rows: m, Cols: f, Stride: f, Data: da[t*m*f : (t+1)*m*f]}
		blas64.Gemm(blas.Trans, blas.NoTrans, -1, P, at, 0, out)
		for j := range m {
			blas64.Axpy(st[j], blas64.Vector{N: f, Inc: 1, Data: bt.Data[j*f : (j+1)*f]},
				blas64.Vector{N: f, Inc: 1, Data: out.Data[j*f : (j+1)*f]})
		}
	})
}

// RBFKernel returns K[t,i,j] = exp(-‖a[t,i]-b[t,j]‖² / (2 σ_t²)) with a
// (T,n,f), b (T,m,f) and bw (T) the per-task bandwidths σ. Differentiable
// w.r.t. a, b and bw (see Bandwidth for why σ carries gradient); a and b may be the
// same node (K of the support set with itself), in which case the result is
// exactly symmetric with a unit diagonal. A non-positive or non-finite σ_t
// makes the run fail. Its kernels spread the tasks over p's workers.
func RBFKernel(p *Pool, a, b, bw *gorgonia.Node) (*gorgonia.Node, error) {
	if err := checkFloat64("RBFKernel", []string{"a", "b", "bw"}, a, b, bw); err != nil {
		return nil, err
	}
	as, bs, ws := a.Shape(), b.Shape(), bw.Shape()
	if len(as) != 3 || len(bs) != 3 || as[0] != bs[0] || as[2] != bs[2] {
		return nil, fmt.Errorf("engine: RBFKernel: want a (T,n,f) and b (T,m,f), got %v and %v", as, bs)
	}
	if as[0] < 1 || as[1] < 1 || bs[1] < 1 || as[2] < 1 {
		return nil, fmt.Errorf("engine: RBFKernel: empty shapes a %v, b %v", as, bs)
	}
	if len(ws) != 1 || ws[0] != as[0] {
		return nil, fmt.Errorf("engine: RBFKernel: bw must be (T)=(%d), got %v", as[0], ws)
	}
	rb := &rbfBase{pool: p, aShape: as, bShape: bs, wShape: ws, kShape: tensor.Shape{as[0], as[1], bs[1]}}
	op := &rbfOp{opBase: base(fmt.Sprintf("RBFKernel#%d", opSeq.Add(1)), ""), rbfBase: rb,
		signature: rb.sig(rb.kShape, 1)}
	return gorgonia.ApplyOp(op, a, b, bw)
}

// rbfBase carries what the forward and backward RBF ops share; it has no
// SymDiff so that the backward ops do not inherit the forward's.
type rbfBase struct {
	pool                           *Pool
	aShape, bShape, wShape, kShape tensor.Shape
}

// sig is the signature of an RBF op with an output of the given
// shape: the inputs a, b, bw, then extra rank-3 tensors, the last of them
// the output.
func (r *rbfBase) sig(shape tensor.Shape, extra int) signature {
	ts := []hm.Type{f64T3, f64T3, f64T1}
	for range extra {
		ts = append(ts, f64T3)
	}
	return signature{types: ts, shape: shape}
}

// inputs validates and unpacks (a, b, bw); same reports whether a and b are
// one array, as when both slots are fed by one node.
func (r *rbfBase) inputs(name string, vs []gorgonia.Value) (a, b, bw []float64, same bool, err error) {
	if a, err = shapedData(vs[0], r.aShape, name+" a"); err != nil {
		return
	}
	if b, err = shapedData(vs[1], r.bShape, name+" b"); err != nil {
		return
	}
	if bw, err = shapedData(vs[2], r.wShape, name+" bw"); err != nil {
		return
	}
	if err = rbfCheckBandwidths(bw); err != nil {
		return
	}
	same = len(a) == len(b) && &a[0] == &b[0]
	return
}

// rbfOp is the forward RBF kernel (a, b, bw) → K.
type rbfOp struct {
	opBase
	signature
	*rbfBase
	sq  []float64 // squared row norms, reused across runs
	out []float64 // backing of the output when prealloc is unusable
}

var (
	_ gorgonia.SDOp            = (*rbfOp)(nil)
	_ gorgonia.UsePreallocDoer = (*rbfOp)(nil)
)

func (op *rbfOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, inputs...)
}

func (op *rbfOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: %v: want 3 inputs, got %d", op, len(inputs))
	}
	a, b, bw, same, err := op.inputs("RBFKernel", inputs)
	if err != nil {
		return nil, err
	}
	T, n, m, f := op.kShape[0], op.kShape[1], op.kShape[2], op.aShape[2]
	if len(op.sq) < T*(n+m) {
		op.sq = make([]float64, T*(n+m))
	}
	out, k := reuseOrOwn(prealloc, op.kShape, &op.out)
	rbfForward(op.pool, a, b, bw, T, n, m, f, same, k, op.sq)
	return out, nil
}

func (op *rbfOp) DiffWRT(inputs int) []bool { return []bool{true, true, true} }

func (op *rbfOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("engine: %v: want 3 inputs, got %d", op, len(inputs))
	}
	// When a and b are one node gorgonia adds the two results itself.
	children := gorgonia.Nodes{inputs[0], inputs[1], inputs[2], output, grad}
	ds, err := gradNodes(2, children, func(i int) gorgonia.Op {
		name := [2]string{"RBFKernelGradA", "RBFKernelGradB"}[i]
		return &rbfGradOp{opBase: base(fmt.Sprintf("%s#%d", name, opSeq.Add(1)), ""), rbfBase: op.rbfBase, wrtB: i == 1,
			signature: op.sig([2]tensor.Shape{op.aShape, op.bShape}[i], 3)}
	})
	if err != nil {
		return nil, err
	}
	dbw, err := rbfBandwidthGrad(inputs[2], output, grad)
	if err != nil {
		return nil, err
	}
	return append(ds, dbw), nil
}

// rbfBandwidthGrad returns the gradient of Σ G∘K w.r.t. the bandwidths:
// with K = exp(−d²/(2σ²)), d² = −2σ² ln K and ∂K/∂σ = K·d²/σ³, so
// ∂/∂σ_t = −(2/σ_t)·Σ_ij G_ij K_ij ln K_ij — no features needed.
func rbfBandwidthGrad(bw, k, g *gorgonia.Node) (*gorgonia.Node, error) {
	return newKernelOp(kernelOp{
		name: "rbfbandwidthgrad", inDims: []int{1, 3, 3}, outDims: 1, diff: []bool{false, false, false},
		shape: func(s []tensor.Shape) (tensor.Shape, error) { return s[0].Clone(), nil },
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			bw, k, g := in[0], in[1], in[2]
			per := s[1][1] * s[1][2]
			for t := range bw {
				var acc float64
				for i, kv := range k[t*per : (t+1)*per] {
					if kv > 0 {
						acc += g[t*per+i] * kv * math.Log(kv)
					}
				}
				out[t] = -2 / bw[t] * acc
			}
		},
		bwd: func([][]float64, []tensor.Shape, []float64, []float64, [][]float64) {},
	}).apply(bw, k, g)
}

// rbfGradOp computes the gradient w.r.t. a (or b when wrtB) from
// (a, b, bw, K, G).
type rbfGradOp struct {
	opBase
	signature
	*rbfBase
	wrtB    bool
	p, sums []float64 // scratch reused across runs
	out     []float64 // backing of the output when prealloc is unusable
}

var _ gorgonia.UsePreallocDoer = (*rbfGradOp)(nil)

func (op *rbfGradOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(nil, inputs...)
}

func (op *rbfGradOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 5 {
		return nil, fmt.Errorf("engine: %v: want 5 inputs, got %d", op, len(inputs))
	}
	a, b, bw, _, err := op.inputs(op.name, inputs)
	if err != nil {
		return nil, err
	}
	k, err := shapedData(inputs[3], op.kShape, op.name+" K")
	if err != nil {
		return nil, err
	}
	g, err := shapedData(inputs[4], op.kShape, op.name+" gradient")
	if err != nil {
		return nil, err
	}
	T, n, m, f := op.kShape[0], op.kShape[1], op.kShape[2], op.aShape[2]
	if len(op.p) < T*n*m {
		op.p = make([]float64, T*n*m)
	}
	if len(op.sums) < T*max(n, m) {
		op.sums = make([]float64, T*max(n, m))
	}
	out, d := reuseOrOwn(prealloc, op.shape, &op.out)
	rbfBackward(op.pool, a, b, bw, k, g, T, n, m, f, op.wrtB, d, op.p, op.sums)
	return out, nil
}
