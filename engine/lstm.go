package engine

import (
	"fmt"
	"hash"
	"math"
	"math/rand/v2"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LSTMCache holds what LSTMBackward needs from the LSTMForward call that
// filled it, plus the scratch space of the backward pass. Reusing one cache
// across calls keeps the steady state allocation-free. The zero value is
// ready to use.
type LSTMCache struct {
	// T, In, Hid and Reverse describe the most recent forward call.
	T, In, Hid int
	Reverse    bool

	gates []float64 // (T, 4·hid): activated [i, f, g, o] of each row
	c     []float64 // (T, hid): cell state after each row
	tc    []float64 // (T, hid): tanh of c
	hPrev []float64 // (T, hid): hidden state each row started from
	cPrev []float64 // (T, hid): cell state each row started from
	hLast []float64 // state after the last processed row
	cLast []float64

	dz     []float64 // (T, 4·hid): gradient w.r.t. the gate pre-activations
	dhNext []float64 // gradient flowing into the previously processed row
	dcNext []float64
}

func lstmGrow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func (cc *LSTMCache) resize(T, in, hid int) {
	cc.T, cc.In, cc.Hid = T, in, hid
	cc.gates = lstmGrow(cc.gates, T*4*hid)
	cc.c = lstmGrow(cc.c, T*hid)
	cc.tc = lstmGrow(cc.tc, T*hid)
	cc.hPrev = lstmGrow(cc.hPrev, T*hid)
	cc.cPrev = lstmGrow(cc.cPrev, T*hid)
	cc.hLast = lstmGrow(cc.hLast, hid)
	cc.cLast = lstmGrow(cc.cLast, hid)
	cc.dz = lstmGrow(cc.dz, T*4*hid)
	cc.dhNext = lstmGrow(cc.dhNext, hid)
	cc.dcNext = lstmGrow(cc.dcNext, hid)
}

// row returns the input row consumed at step s.
func (cc *LSTMCache) row(s int) int {
	if cc.Reverse {
		return cc.T - 1 - s
	}
	return s
}

// FinalState returns copies of (h, c) after the last step of the most recent
// forward call (zero vectors of length Hid before any call).
func (cc *LSTMCache) FinalState() (h, c []float64) {
	h = make([]float64, cc.Hid)
	c = make([]float64, cc.Hid)
	copy(h, cc.hLast)
	copy(c, cc.cLast)
	return h, c
}

func lstmSigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// LSTMForward runs an LSTM cell over the T rows of x (T×in, row-major) from
// the state (h0, c0) and writes the hidden state after each step to h (T×hid);
// row t of h always belongs to row t of x. With reverse the rows are consumed
// in the order T-1, …, 0. w is (in+hid)×4hid applied to [x_t, h_{t-1}], b has
// 4·hid entries; gates are laid out [i, f, g, o]. cache receives what
// LSTMBackward needs. Slices of the wrong length panic.
func LSTMForward(cache *LSTMCache, x, w, b, h0, c0 []float64, T, in, hid int, reverse bool, h []float64) {
	g4 := 4 * hid
	switch {
	case T < 1 || in < 1 || hid < 1:
		panic(fmt.Sprintf("engine: LSTMForward: bad sizes T=%d in=%d hid=%d", T, in, hid))
	case len(x) != T*in, len(w) != (in+hid)*g4, len(b) != g4, len(h0) != hid, len(c0) != hid, len(h) != T*hid:
		panic(fmt.Sprintf("engine: LSTMForward: slice lengths x=%d w=%d b=%d h0=%d c0=%d h=%d do not match T=%d in=%d hid=%d",
			len(x), len(w), len(b), len(h0), len(c0), len(h), T, in, hid))
	}
	cache.resize(T, in, hid)
	cache.Reverse = reverse
	impl := blas64.Implementation()

	// The input projection does not depend on the recurrence, so one GEMM
	// over all rows replaces T small products.
	gates := cache.gates
	for t := 0; t < T; t++ {
		copy(gates[t*g4:(t+1)*g4], b)
	}
	impl.Dgemm(blas.NoTrans, blas.NoTrans, T, g4, in, 1, x, in, w[:in*g4], g4, 1, gates, g4)
	wh := w[in*g4:]

	hp, cp := h0, c0
	for s := 0; s < T; s++ {
		r := cache.row(s)
		z := gates[r*g4 : (r+1)*g4]
		hpr := cache.hPrev[r*hid : (r+1)*hid]
		cpr := cache.cPrev[r*hid : (r+1)*hid]
		copy(hpr, hp)
		copy(cpr, cp)
		impl.Dgemv(blas.Trans, hid, g4, 1, wh, g4, hpr, 1, 1, z, 1)
		zi, zf, zg, zo := z[:hid], z[hid:2*hid], z[2*hid:3*hid], z[3*hid:]
		cr := cache.c[r*hid : (r+1)*hid]
		tcr := cache.tc[r*hid : (r+1)*hid]
		hr := h[r*hid : (r+1)*hid]
		for j := 0; j < hid; j++ {
			i := lstmSigmoid(zi[j])
			f := lstmSigmoid(zf[j])
			g := math.Tanh(zg[j])
			o := lstmSigmoid(zo[j])
			zi[j], zf[j], zg[j], zo[j] = i, f, g, o
			c := f*cpr[j] + i*g
			tc := math.Tanh(c)
			cr[j], tcr[j] = c, tc
			hr[j] = o * tc
		}
		hp, cp = hr, cr
	}
	copy(cache.hLast, hp)
	copy(cache.cLast, cp)
}

// lstmBackwardCore fills cache.dz from dH (T×hid), the gradient of the loss
// w.r.t. the output of the forward call that filled cache. The initial state
// is detached, so no gradient is carried past the first processed row.
func lstmBackwardCore(cache *LSTMCache, w, dH []float64) {
	T, in, hid := cache.T, cache.In, cache.Hid
	g4 := 4 * hid
	if len(dH) != T*hid || len(w) != (in+hid)*g4 {
		panic(fmt.Sprintf("engine: LSTMBackward: slice lengths dH=%d w=%d do not match T=%d in=%d hid=%d",
			len(dH), len(w), T, in, hid))
	}
	impl := blas64.Implementation()
	wh := w[in*g4:]
	dhNext, dcNext := cache.dhNext, cache.dcNext
	clear(dhNext)
	clear(dcNext)
	for s := T - 1; s >= 0; s-- {
		r := cache.row(s)
		a := cache.gates[r*g4 : (r+1)*g4]
		ai, af, ag, ao := a[:hid], a[hid:2*hid], a[2*hid:3*hid], a[3*hid:]
		dz := cache.dz[r*g4 : (r+1)*g4]
		dzi, dzf, dzg, dzo := dz[:hid], dz[hid:2*hid], dz[2*hid:3*hid], dz[3*hid:]
		tcr := cache.tc[r*hid : (r+1)*hid]
		cpr := cache.cPrev[r*hid : (r+1)*hid]
		dhr := dH[r*hid : (r+1)*hid]
		for j := 0; j < hid; j++ {
			i, f, g, o, tc := ai[j], af[j], ag[j], ao[j], tcr[j]
			dh := dhr[j] + dhNext[j]
			dc := dcNext[j] + dh*o*(1-tc*tc)
			dzi[j] = dc * g * i * (1 - i)
			dzf[j] = dc * cpr[j] * f * (1 - f)
			dzg[j] = dc * i * (1 - g*g)
			dzo[j] = dh * tc * o * (1 - o)
			dcNext[j] = dc * f
		}
		if s > 0 {
			impl.Dgemv(blas.NoTrans, hid, g4, 1, wh, g4, dz, 1, 0, dhNext, 1)
		}
	}
}

func lstmGradX(cache *LSTMCache, w, dx []float64) {
	in, g4 := cache.In, 4*cache.Hid
	if len(dx) != cache.T*in {
		panic(fmt.Sprintf("engine: LSTMBackward: len(dx)=%d, want %d", len(dx), cache.T*in))
	}
	blas64.Implementation().Dgemm(blas.NoTrans, blas.Trans, cache.T, in, g4, 1, cache.dz, g4, w[:in*g4], g4, 0, dx, in)
}

func lstmGradW(cache *LSTMCache, x, dw []float64) {
	T, in, hid := cache.T, cache.In, cache.Hid
	g4 := 4 * hid
	if len(dw) != (in+hid)*g4 || len(x) != T*in {
		panic(fmt.Sprintf("engine: LSTMBackward: slice lengths dw=%d x=%d do not match T=%d in=%d hid=%d",
			len(dw), len(x), T, in, hid))
	}
	impl := blas64.Implementation()
	impl.Dgemm(blas.Trans, blas.NoTrans, in, g4, T, 1, x, in, cache.dz, g4, 0, dw[:in*g4], g4)
	impl.Dgemm(blas.Trans, blas.NoTrans, hid, g4, T, 1, cache.hPrev, hid, cache.dz, g4, 0, dw[in*g4:], g4)
}

func lstmGradB(cache *LSTMCache, db []float64) {
	g4 := 4 * cache.Hid
	if len(db) != g4 {
		panic(fmt.Sprintf("engine: LSTMBackward: len(db)=%d, want %d", len(db), g4))
	}
	// Rows are summed in index order so the result does not depend on the
	// direction of the recurrence.
	clear(db)
	for t := 0; t < cache.T; t++ {
		for k, v := range cache.dz[t*g4 : (t+1)*g4] {
			db[k] += v
		}
	}
}

// LSTMBackward computes the gradients of the loss w.r.t. x, w and b given dH,
// its gradient w.r.t. the output h of the LSTMForward call that filled cache
// (x and w must be the values that call saw). dx, dw and db are overwritten;
// any of them may be nil to skip it. No gradient flows to h0 and c0: the
// carried state is detached.
func LSTMBackward(cache *LSTMCache, x, w, dH, dx, dw, db []float64) {
	lstmBackwardCore(cache, w, dH)
	if dx != nil {
		lstmGradX(cache, w, dx)
	}
	if dw != nil {
		lstmGradW(cache, x, dw)
	}
	if db != nil {
		lstmGradB(cache, db)
	}
}

// InitLSTM fills w ((in+hid)×4hid) and b (4·hid) uniformly in ±1/√hid, then
// sets the forget-gate biases to 1 so that early training does not wipe the
// cell state.
func InitLSTM(rng *rand.Rand, in, hid int, w, b []float64) {
	if len(w) != (in+hid)*4*hid || len(b) != 4*hid {
		panic(fmt.Sprintf("engine: InitLSTM: len(w)=%d len(b)=%d do not match in=%d hid=%d", len(w), len(b), in, hid))
	}
	k := 1 / math.Sqrt(float64(hid))
	for i := range w {
		w[i] = (2*rng.Float64() - 1) * k
	}
	for i := range b {
		b[i] = (2*rng.Float64() - 1) * k
	}
	for i := hid; i < 2*hid; i++ {
		b[i] = 1
	}
}

// LSTMOp is the gorgonia op behind LSTMSeq. Besides implementing
// gorgonia.Op and gorgonia.SDOp it keeps the forward intermediates for its
// gradient nodes and the final state for the next batch.
type LSTMOp struct {
	id           uint64
	t, in, hid   int
	reverse      bool
	cache        LSTMCache
	gen, bwdGen  uint64 // forward runs so far; run whose backward core is in cache.dz
	diffed       bool   // SymDiff has created the gradient nodes
	xs, ws, bs   []float64
	h0s, c0s, gs []float64 // scratch for inputs that are not plain contiguous float64 tensors
	out          *tensor.Dense
}

// LSTMSeq runs a standard LSTM cell over the T rows of x (T,in) — T is the
// sequence axis — starting from the state (h0, c0), and returns H (T,hid),
// the hidden state after each step; row t always corresponds to input row t.
// With reverse=true the cell consumes rows T-1, …, 0 (so row t holds the
// state after consuming rows T-1…t).
//
// w: (in+hid, 4*hid) applied to [x_t, h_{t-1}]; b: (4*hid). Gate layout
// along the 4*hid axis: [i, f, g, o]; i, f, o sigmoid, g tanh;
// c' = f⊙c + i⊙g; h' = o⊙tanh(c'). h0, c0: (hid) nodes treated as constants
// (no gradient: the carried state is detached). Differentiable w.r.t. x, w
// and b. All nodes must be float64.
func LSTMSeq(x, w, b, h0, c0 *gorgonia.Node, reverse bool) (*gorgonia.Node, *LSTMOp, error) {
	names := [...]string{"x", "w", "b", "h0", "c0"}
	for i, n := range []*gorgonia.Node{x, w, b, h0, c0} {
		if n == nil {
			return nil, nil, fmt.Errorf("engine: LSTMSeq: %s is nil", names[i])
		}
		if n.Dtype() != tensor.Float64 {
			return nil, nil, fmt.Errorf("engine: LSTMSeq: %s has dtype %v, want float64", names[i], n.Dtype())
		}
	}
	xs, ws, bs, hs, cs := x.Shape(), w.Shape(), b.Shape(), h0.Shape(), c0.Shape()
	if len(xs) != 2 || xs[0] < 1 || xs[1] < 1 {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: x has shape %v, want (T, in) with T, in ≥ 1", xs)
	}
	if len(hs) != 1 || hs[0] < 1 {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: h0 has shape %v, want (hid) with hid ≥ 1", hs)
	}
	T, in, hid := xs[0], xs[1], hs[0]
	if len(cs) != 1 || cs[0] != hid {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: c0 has shape %v, want (%d)", cs, hid)
	}
	if len(ws) != 2 || ws[0] != in+hid || ws[1] != 4*hid {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: w has shape %v, want (%d, %d) for in=%d hid=%d", ws, in+hid, 4*hid, in, hid)
	}
	if len(bs) != 1 || bs[0] != 4*hid {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: b has shape %v, want (%d)", bs, 4*hid)
	}
	op := &LSTMOp{id: opSeq.Add(1), t: T, in: in, hid: hid, reverse: reverse}
	op.cache.Hid = hid
	out, err := gorgonia.ApplyOp(op, x, w, b, h0, c0)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: LSTMSeq: %w", err)
	}
	return out, op, nil
}

// FinalState returns copies of (h, c) after the last step processed by the
// most recent forward run (for reverse=true: after consuming row 0), to be
// fed as h0, c0 of the next batch. Before any run both are zero.
func (op *LSTMOp) FinalState() (h, c []float64) { return op.cache.FinalState() }

// Arity is 5: x, w, b, h0, c0.
func (op *LSTMOp) Arity() int { return 5 }

// Type is Matrix a → Matrix a → Vector a → Vector a → Vector a → Matrix a.
func (op *LSTMOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	m := gorgonia.TensorType{Dims: 2, Of: a}
	v := gorgonia.TensorType{Dims: 1, Of: a}
	return hm.NewFnType(m, m, v, v, v, m)
}

// InferShape returns (T, hid).
func (op *LSTMOp) InferShape(shapes ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(shapes) != 5 {
		return nil, fmt.Errorf("engine: LSTMSeq: got %d input shapes, want 5", len(shapes))
	}
	T, err := shapes[0].DimSize(0)
	if err != nil {
		return nil, err
	}
	hid, err := shapes[3].DimSize(0)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{T, hid}, nil
}

// Do runs the forward pass into a (T, hid) tensor owned by the op, which the
// next run overwrites.
func (op *LSTMOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(lstmOwned(&op.out, op.t, op.hid), inputs...)
}

// UsePreallocDo runs the forward pass into prealloc, which must be a
// contiguous float64 (T, hid) tensor.
func (op *LSTMOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 5 {
		return nil, fmt.Errorf("engine: %v: got %d inputs, want 5", op, len(inputs))
	}
	h, err := lstmOutBuf(prealloc, tensor.Shape{op.t, op.hid})
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	T, in, hid := op.t, op.in, op.hid
	var x, w, b, h0, c0 []float64
	if x, err = lstmInput(inputs[0], T*in, &op.xs); err == nil {
		if w, err = lstmInput(inputs[1], (in+hid)*4*hid, &op.ws); err == nil {
			if b, err = lstmInput(inputs[2], 4*hid, &op.bs); err == nil {
				if h0, err = lstmInput(inputs[3], hid, &op.h0s); err == nil {
					c0, err = lstmInput(inputs[4], hid, &op.c0s)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	LSTMForward(&op.cache, x, w, b, h0, c0, T, in, hid, op.reverse, h)
	op.gen++
	return prealloc, nil
}

// ReturnsPtr is false: the output never aliases an input.
func (op *LSTMOp) ReturnsPtr() bool { return false }

// CallsExtern is false.
func (op *LSTMOp) CallsExtern() bool { return false }

// OverwritesInput is -1: no input is overwritten.
func (op *LSTMOp) OverwritesInput() int { return -1 }

// WriteHash writes the op's unique identity.
func (op *LSTMOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "LSTMSeq-%d-%d-%d-%d-%t", op.id, op.t, op.in, op.hid, op.reverse)
}

// Hashcode hashes WriteHash's output.
func (op *LSTMOp) Hashcode() uint32 {
	return opHash(op)
}

func (op *LSTMOp) String() string {
	dir := "fwd"
	if op.reverse {
		dir = "rev"
	}
	return fmt.Sprintf("LSTMSeq#%d(%s,T=%d,in=%d,hid=%d)", op.id, dir, op.t, op.in, op.hid)
}

// DiffWRT: x, w and b are differentiable; the carried state is not.
func (op *LSTMOp) DiffWRT(inputs int) []bool { return []bool{true, true, true, false, false} }

// SymDiff returns gradient nodes for x, w and b (nil for h0, c0). The three
// nodes share one backward pass through the recurrence.
func (op *LSTMOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 5 {
		return nil, fmt.Errorf("engine: %v: SymDiff got %d inputs, want 5", op, len(inputs))
	}
	// A second set of gradient nodes, fed a different grad, would share
	// cache.dz with the first and silently read the wrong backward pass.
	if op.diffed {
		return nil, fmt.Errorf("engine: %v: already differentiated; build a new LSTMSeq for a second gradient", op)
	}
	op.diffed = true
	// output is an input of the gradient nodes only to order them after the
	// forward pass, whose cache they read: grad alone need not depend on it.
	children := append(append(gorgonia.Nodes{}, inputs...), output, grad)
	ret := make(gorgonia.Nodes, 5)
	for which := 0; which < 3; which++ {
		n, err := gorgonia.ApplyOp(&lstmGradOp{fwd: op, which: which}, children...)
		if err != nil {
			return nil, fmt.Errorf("engine: %v: SymDiff: %w", op, err)
		}
		ret[which] = n
	}
	return ret, nil
}

// lstmGradOp produces the gradient w.r.t. input `which` (0 x, 1 w, 2 b) of
// fwd. Inputs: x, w, b, h0, c0, output, grad. Whichever of the three runs
// first after a forward run does the backward pass through time; the others
// only apply their final product to its result.
type lstmGradOp struct {
	fwd   *LSTMOp
	which int
	out   *tensor.Dense
}

func (op *lstmGradOp) Arity() int { return 7 }

func (op *lstmGradOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	m := gorgonia.TensorType{Dims: 2, Of: a}
	v := gorgonia.TensorType{Dims: 1, Of: a}
	ret := m
	if op.which == 2 {
		ret = v
	}
	return hm.NewFnType(m, m, v, v, v, m, m, ret)
}

func (op *lstmGradOp) shape() tensor.Shape {
	f := op.fwd
	switch op.which {
	case 0:
		return tensor.Shape{f.t, f.in}
	case 1:
		return tensor.Shape{f.in + f.hid, 4 * f.hid}
	default:
		return tensor.Shape{4 * f.hid}
	}
}

func (op *lstmGradOp) InferShape(shapes ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(shapes) != 7 {
		return nil, fmt.Errorf("engine: %v: got %d input shapes, want 7", op, len(shapes))
	}
	return op.shape(), nil
}

func (op *lstmGradOp) Do(inputs ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(lstmOwned(&op.out, op.shape()...), inputs...)
}

func (op *lstmGradOp) UsePreallocDo(prealloc gorgonia.Value, inputs ...gorgonia.Value) (gorgonia.Value, error) {
	if len(inputs) != 7 {
		return nil, fmt.Errorf("engine: %v: got %d inputs, want 7", op, len(inputs))
	}
	f := op.fwd
	if f.gen == 0 {
		return nil, fmt.Errorf("engine: %v: no forward run to differentiate", op)
	}
	dst, err := lstmOutBuf(prealloc, op.shape())
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	T, in, hid := f.t, f.in, f.hid
	w, err := lstmInput(inputs[1], (in+hid)*4*hid, &f.ws)
	if err != nil {
		return nil, fmt.Errorf("engine: %v: %w", op, err)
	}
	if f.bwdGen != f.gen {
		dH, err := lstmInput(inputs[6], T*hid, &f.gs)
		if err != nil {
			return nil, fmt.Errorf("engine: %v: %w", op, err)
		}
		lstmBackwardCore(&f.cache, w, dH)
		f.bwdGen = f.gen
	}
	switch op.which {
	case 0:
		lstmGradX(&f.cache, w, dst)
	case 1:
		x, err := lstmInput(inputs[0], T*in, &f.xs)
		if err != nil {
			return nil, fmt.Errorf("engine: %v: %w", op, err)
		}
		lstmGradW(&f.cache, x, dst)
	default:
		lstmGradB(&f.cache, dst)
	}
	return prealloc, nil
}

func (op *lstmGradOp) ReturnsPtr() bool     { return false }
func (op *lstmGradOp) CallsExtern() bool    { return false }
func (op *lstmGradOp) OverwritesInput() int { return -1 }

func (op *lstmGradOp) WriteHash(h hash.Hash) {
	fmt.Fprintf(h, "LSTMSeqGrad-%d-%d", op.fwd.id, op.which)
}

func (op *lstmGradOp) Hashcode() uint32 {
	return opHash(op)
}

func (op *lstmGradOp) String() string {
	return fmt.Sprintf("∂%v/∂%s", op.fwd, [...]string{"x", "w", "b"}[op.which])
}

// lstmOwned returns *buf, allocating it on first use. The tape machine
// clears its registers on Reset, so Do runs every step; handing back the same
// tensor each time keeps the step from allocating. Gorgonia treats a value as
// dead after its last reader in a run, so reuse on the next run is safe, but
// a caller who keeps a node's Value across runs sees it overwritten.
func lstmOwned(buf **tensor.Dense, shape ...int) *tensor.Dense {
	if *buf == nil {
		*buf = tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float64))
	}
	return *buf
}

// lstmOutBuf returns the data of a value the op may write its result of the
// given shape into. Gorgonia hands over whatever last lived in the output
// register, so a mismatch is an ordinary error, upon which the machine falls
// back to Do.
func lstmOutBuf(v gorgonia.Value, shape tensor.Shape) ([]float64, error) {
	d, ok := v.(*tensor.Dense)
	if !ok || d == nil || d.Dtype() != tensor.Float64 || !d.Shape().Eq(shape) || d.RequiresIterator() {
		return nil, fmt.Errorf("unusable output buffer %v (want a contiguous float64 tensor of shape %v)", lstmDescribe(v), shape)
	}
	n := shape.TotalSize()
	data := d.Data().([]float64)
	if len(data) < n {
		return nil, fmt.Errorf("output buffer holds %d elements, want %d", len(data), n)
	}
	return data[:n], nil
}

func lstmDescribe(v gorgonia.Value) string {
	if d, ok := v.(*tensor.Dense); ok && d != nil {
		return fmt.Sprintf("%v tensor of shape %v", d.Dtype(), d.Shape())
	}
	return fmt.Sprintf("%T", v)
}

// lstmInput returns the n float64 values of v in row-major order. Contiguous
// tensors are read in place; views (e.g. the gradient slices that Concat
// hands back) and scalars are copied into *scratch.
func lstmInput(v gorgonia.Value, n int, scratch *[]float64) ([]float64, error) {
	switch d := v.(type) {
	case *tensor.Dense:
		if d == nil {
			return nil, fmt.Errorf("input is a nil tensor")
		}
		if d.Dtype() != tensor.Float64 {
			return nil, fmt.Errorf("input has dtype %v, want float64", d.Dtype())
		}
		if d.IsScalar() {
			return lstmFill(scratch, n, d.ScalarValue().(float64)), nil
		}
		if d.Shape().TotalSize() != n {
			return nil, fmt.Errorf("input has shape %v, want %d elements", d.Shape(), n)
		}
		data := d.Data().([]float64)
		if !d.RequiresIterator() && len(data) >= n {
			return data[:n], nil
		}
		*scratch = lstmGrow(*scratch, n)
		it := tensor.FlatIteratorFromDense(d)
		k := 0
		for i, err := it.Start(); err == nil; i, err = it.Next() {
			if k == n {
				return nil, fmt.Errorf("input view yields more than %d elements", n)
			}
			(*scratch)[k] = data[i]
			k++
		}
		if k != n {
			return nil, fmt.Errorf("input view yields %d elements, want %d", k, n)
		}
		return *scratch, nil
	case *gorgonia.F64:
		if d == nil {
			return nil, fmt.Errorf("input is a nil scalar")
		}
		return lstmFill(scratch, n, float64(*d)), nil
	default:
		return nil, fmt.Errorf("input is %T, want a float64 *tensor.Dense", v)
	}
}

// lstmFill broadcasts a scalar, which gorgonia may pass for a gradient that
// is the same everywhere, to n values in *scratch.
func lstmFill(scratch *[]float64, n int, v float64) []float64 {
	*scratch = lstmGrow(*scratch, n)
	for i := range *scratch {
		(*scratch)[i] = v
	}
	return *scratch
}
