package ops

import (
	"fmt"

	"github.com/mkbench/mkbench/engine/internal/gemmcore"
)

// Backward propagates gOut (T×D×(Dim+1), the gradient of a loss w.r.t. the
// output of the last Forward) and overwrites gOmega0 (T×D×Dim), gCond
// (T×Cond) and gTheta (NumParams) with the loss gradients.
func (k *FlowKernel) Backward(gOut, gOmega0, gCond, gTheta []float64) error {
	if err := k.backwardCore(k.theta, gOut, gOmega0); err != nil {
		return err
	}
	if err := k.gradTheta(k.cond, gTheta); err != nil {
		return err
	}
	return k.gradCond(k.theta, gCond)
}

// backwardCore does the per-task work of Backward: it writes gOmega0 and
// leaves per-chunk parameter partials and the context gradients for
// gradTheta and gradCond. theta must hold the values of the matching
// Forward (the kernel computes with its own converted copy).
func (k *FlowKernel) backwardCore(theta, gOut, gOmega0 []float64) error {
	if !k.fwdDone {
		return fmt.Errorf("flow: Backward before Forward")
	}
	T, D, d := k.T, k.D, k.info.Dim
	switch {
	case len(theta) != k.info.nP:
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), k.info.nP)
	case len(gOut) != T*D*(d+1):
		return fmt.Errorf("flow: output gradient has %d values, want %d", len(gOut), T*D*(d+1))
	case len(gOmega0) != T*D*d:
		return fmt.Errorf("flow: omega0 gradient has %d values, want %d", len(gOmega0), T*D*d)
	}
	k.cur.backwardCore(gOut, gOmega0)
	if err := flowFailed(k.cur); err != nil {
		return err
	}
	k.bwdDone = true
	return nil
}

// flowBackward runs the backward pass of the tasks of one chunk.
type flowBackward[F float] struct {
	k             *flowCore[F]
	gOut, gOmega0 []float64
}

func (j *flowBackward[F]) run(ci int) {
	k := j.k
	p := k.part[ci]
	for l := range k.spec.layers {
		for _, h := range k.spec.layers[l].h {
			clear(p[h.w1:h.wc])
			clear(p[h.w2:h.end])
		}
	}
	sc := &k.scr[ci]
	for t := k.chunks[ci][1] - 1; t >= k.chunks[ci][0]; t-- {
		k.backwardTask(t, sc, p, j.gOut, j.gOmega0)
	}
}

func (k *flowCore[F]) backwardCore(gOut, gOmega0 []float64) {
	// Tasks run in the reverse of the forward order, so the most recently
	// written caches, still in the shared L3, are read first.
	k.jBwd = flowBackward[F]{k: k, gOut: gOut, gOmega0: gOmega0}
	k.team.parallel(len(k.chunks), true, &k.jBwd)
	k.jBwd = flowBackward[F]{}
}

func (k *flowCore[F]) backwardTask(t int, sc *flowScratch[F], part []F, gOut, gOmega0 []float64) {
	d, D := k.spec.Dim, k.D
	ft := &k.tasks[t]
	gw := sc.gw
	g := gOut[t*D*(d+1) : (t+1)*D*(d+1)]
	k.loadRows(gw, g, d+1, D, d, sc.rows)
	gl := sc.gl[:D]
	for r := range gl {
		gl[r] = F(g[r*(d+1)+d])
	}
	// gw holds the gradient w.r.t. ω_{l+1} and is turned, in place, into the
	// gradient w.r.t. ω_l: each half overwrites its target rows with the
	// gradient w.r.t. its input x and adds into the rows it was computed from.
	for l := len(k.spec.layers) - 1; l >= 0; l-- {
		L := &k.spec.layers[l]
		in, nw := ft.w[l], ft.w[l+1]
		va, vb := L.va, L.vb
		k.halfBackward(l, 1, t, nw, va, in, vb, gw, part, sc)
		k.halfBackward(l, 0, t, in, vb, in, va, gw, part, sc)
	}
	k.storeRows(gOmega0[t*D*d:(t+1)*D*d], d, gw, D, d, sc.rows)
}

// halfBackward back-propagates coupling half i of layer l for task t. src
// rows vo fed its network and xin rows vt were its target input. In gw the
// target rows hold the gradient w.r.t. its output and are overwritten with
// the gradient w.r.t. its input; the gradient w.r.t. the network input is
// added to rows vo. Parameter gradients go to the chunk partial part, the
// context gradient to gctx.
func (k *flowCore[F]) halfBackward(l, i, t int, src []F, vo flowRows, xin []F, vt flowRows, gw []F, part []F, sc *flowScratch[F]) {
	s := k.spec
	h := &s.layers[l].h[i]
	q := 2*l + i
	ft := &k.tasks[t]
	D, H, m, NH := k.D, s.Hidden, h.m, s.nh*s.Hidden
	m2 := 2 * m
	ss := ft.s[l][i]
	gout := sc.out[:m2*D]
	gl := sc.gl[:D]
	ot, ldt := vt.of(D)
	for j := 0; j < m; j++ {
		r := ot + j*ldt
		k.fm.couplingGrad(gout[j*D:(j+1)*D], gout[(m+j)*D:(m+j+1)*D], gw[r:r+D], xin[r:r+D],
			ss[j*D:(j+1)*D], gl)
	}
	k.fm.addRowSums(part[h.b2:h.b2+m2], gout, m2, D, D)
	// The same product as in the forward pass, so the same bits.
	hid := k.hidden(l, i, t, src, vo, sc)
	// W2 gradient (H×2m) += hid·goutᵀ: hid is read in place, only the
	// smaller gout is transposed into panels.
	k.fm.gemm(&sc.ws, false, true, H, m2, D, hid, D, gout, D, 1, part[h.w2:], m2, gemmcore.Epilogue[F]{})
	// ghid = W2·gout where the ReLU was active (hid > 0), in the epilogue.
	ghid := sc.ghid[:H*D]
	k.fm.gemm(&sc.ws, true, false, H, D, m2, k.w2t[q], H, gout, D, 0, ghid, D, gemmcore.Epilogue[F]{Mask: hid, LdMask: D})
	gctx := k.gctx[t*NH+q*H : t*NH+(q+1)*H]
	clear(gctx)
	k.fm.addRowSums(gctx, ghid, H, D, D)
	oo, ldo := vo.of(D)
	// W1 gradient (nIn×H) += x·ghidᵀ, and the input gradient += W1·ghid.
	k.fm.gemm(&sc.ws, false, true, h.nIn, H, D, src[oo:], ldo, ghid, D, 1, part[h.w1:], H, gemmcore.Epilogue[F]{})
	k.fm.gemm(&sc.ws, true, false, h.nIn, D, H, k.w1t[q], h.nIn, ghid, D, 1, gw[oo:], ldo, gemmcore.Epilogue[F]{})
}

// gradTheta writes the parameter gradient of the last Backward into gTheta;
// cond must be the cond of the matching Forward.
func (k *FlowKernel) gradTheta(cond, gTheta []float64) error {
	if !k.bwdDone {
		return fmt.Errorf("flow: parameter gradient requested before Backward")
	}
	if len(gTheta) != k.info.nP {
		return fmt.Errorf("flow: theta gradient has %d values, want %d", len(gTheta), k.info.nP)
	}
	if len(cond) != k.T*k.info.Cond {
		return fmt.Errorf("flow: cond has %d values, want %d", len(cond), k.T*k.info.Cond)
	}
	k.cur.gradTheta(gTheta)
	return flowFailed(k.cur)
}

// flowReduce assembles the theta gradient of one half q: the chunk
// partials summed in chunk order in float64, and the Wc and b1 gradients
// from the context gradient.
type flowReduce[F float] struct {
	k      *flowCore[F]
	gTheta []float64
}

func (j *flowReduce[F]) run(q int) {
	k, g := j.k, j.gTheta
	s := k.spec
	h := &s.layers[q/2].h[q%2]
	H, c, NH := s.Hidden, s.Cond, s.nh*s.Hidden
	sum := func(dst []float64, off int) {
		for i := range dst {
			dst[i] = float64(k.part[0][off+i])
		}
		for _, p := range k.part[1:] {
			for i, v := range p[off : off+len(dst)] {
				dst[i] += float64(v)
			}
		}
	}
	sum(g[h.w1:h.wc], h.w1)
	sum(g[h.w2:h.end], h.w2)
	for r := 0; r < c; r++ {
		for u, v := range k.gWc[r*NH+q*H : r*NH+(q+1)*H] {
			g[h.wc+r*H+u] = float64(v)
		}
	}
	gb := g[h.b1 : h.b1+H]
	clear(gb)
	for t := 0; t < k.T; t++ {
		for u, v := range k.gctx[t*NH+q*H : t*NH+(q+1)*H] {
			gb[u] += float64(v)
		}
	}
}

func (k *flowCore[F]) gradTheta(gTheta []float64) {
	s := k.spec
	c, NH := s.Cond, s.nh*s.Hidden
	// Wc gradients of all halves in one product: condᵀ·gctx (Cond×NH).
	k.splitGemm(true, false, c, NH, k.T, k.condF, c, k.gctx, NH, 0, k.gWc, NH)
	k.jReduce = flowReduce[F]{k: k, gTheta: gTheta}
	k.team.parallel(s.nh, false, &k.jReduce)
	k.jReduce = flowReduce[F]{}
}

// gradCond writes the cond gradient of the last Backward into gCond; theta
// must be the theta of the matching Forward.
func (k *FlowKernel) gradCond(theta, gCond []float64) error {
	if !k.bwdDone {
		return fmt.Errorf("flow: cond gradient requested before Backward")
	}
	if len(gCond) != k.T*k.info.Cond {
		return fmt.Errorf("flow: cond gradient has %d values, want %d", len(gCond), k.T*k.info.Cond)
	}
	if len(theta) != k.info.nP {
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), k.info.nP)
	}
	k.cur.gradCond(gCond)
	return flowFailed(k.cur)
}

func (k *flowCore[F]) gradCond(gCond []float64) {
	s := k.spec
	c, NH := s.Cond, s.nh*s.Hidden
	// Σ over halves of gctx_q·Wc_qᵀ is one product with K = NH.
	k.splitGemm(false, true, k.T, c, NH, k.gctx, NH, k.wcAll, NH, 0, k.gCond, c)
	for i, v := range k.gCond {
		gCond[i] = float64(v)
	}
}

// Steps returns, after a Forward, copies of ω for task t after steps
// 0..Layers (Layers+1 slices of D·Dim, row-major D×Dim), or nil if no
// Forward ran or t is out of range.
func (k *FlowKernel) Steps(t int) [][]float64 {
	if !k.fwdDone || t < 0 || t >= k.T {
		return nil
	}
	return k.cur.steps(t)
}

func (k *flowCore[F]) steps(t int) [][]float64 {
	D, d := k.D, k.spec.Dim
	steps := make([][]float64, len(k.spec.layers)+1)
	st := make([]F, D*d)
	for j, w := range k.tasks[t].w {
		steps[j] = make([]float64, D*d)
		k.storeRows(steps[j], d, w, D, d, st)
	}
	return steps
}
