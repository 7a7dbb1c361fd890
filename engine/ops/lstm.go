package ops

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mkbench/mkbench/internal/task"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
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

func (cc *LSTMCache) resize(T, in, hid int) {
	cc.T, cc.In, cc.Hid = T, in, hid
	cc.gates = task.Grow(cc.gates, T*4*hid)
	cc.c = task.Grow(cc.c, T*hid)
	cc.tc = task.Grow(cc.tc, T*hid)
	cc.hPrev = task.Grow(cc.hPrev, T*hid)
	cc.cPrev = task.Grow(cc.cPrev, T*hid)
	cc.hLast = task.Grow(cc.hLast, hid)
	cc.cLast = task.Grow(cc.cLast, hid)
	cc.dz = task.Grow(cc.dz, T*4*hid)
	cc.dhNext = task.Grow(cc.dhNext, hid)
	cc.dcNext = task.Grow(cc.dcNext, hid)
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
