package engine

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// newParams creates and initializes every parameter the configuration
// uses; variants without an inference network have none of its weights.
func newParams(cfg Config, inDim, outDim int, rng *rand.Rand) *Params {
	ps := &Params{}
	f := cfg.FeatureDim()
	prev := inDim
	for i, w := range cfg.EmbedHidden {
		wt := ps.add(fmt.Sprintf("embed.W%d", i), prev, w).Data
		he(rng, wt, prev)
		if i == len(cfg.EmbedHidden)-1 {
			// With He init, ‖ψ(x)‖ grows to ~17 over the sine domain, so
			// ωᵀψ(x) with ω ~ N(μ, σ²) changes phase by radians between
			// neighbouring inputs: the random-feature kernel starts almost
			// diagonal, predictions are ~0 and training sat on that plateau
			// (loss = the targets' variance) for hundreds to thousands of
			// iterations, or for good. A small output gain starts the
			// kernel smooth over the domain (measured, seed 1: vrf loss 0.49
			// after 200 iterations instead of 4.3).
			scale(wt, embedOutputGain)
		}
		ps.add(fmt.Sprintf("embed.b%d", i), 1, w)
		prev = w
	}
	ps.add("loglambda", 1).Data[0] = math.Log(cfg.LambdaInit)
	if cfg.Kernel != KernelVRF {
		return ps
	}
	H := cfg.InferHidden
	glorot(rng, ps.add("infer.W0", f+outDim, H).Data, f+outDim, H)
	ps.add("infer.b0", 1, H)
	glorot(rng, ps.add("infer.W1", H, H).Data, H, H)
	ps.add("infer.b1", 1, H)
	ctx := contextDim(cfg)
	switch cfg.Context {
	case ContextLSTM, ContextBiLSTM:
		dirs := []string{"fw"}
		if cfg.Context == ContextBiLSTM {
			dirs = append(dirs, "bw")
		}
		for _, dir := range dirs {
			w := ps.add("lstm."+dir+".W", H+H, 4*H)
			b := ps.add("lstm."+dir+".b", 4*H)
			InitLSTM(rng, H, H, w.Data, b.Data)
		}
	}
	d := f
	glorot(rng, ps.add("q.Wmu", ctx, d).Data, ctx, d)
	ps.add("q.bmu", 1, d)
	// Small weights on the log-variance head: q starts near N(μ, I), the
	// scale of the RFF baseline, instead of at a random bandwidth.
	w := ps.add("q.Wlv", ctx, d).Data
	glorot(rng, w, ctx, d)
	scale(w, 0.1)
	ps.add("q.blv", 1, d)

	P := cfg.PriorHidden
	glorot(rng, ps.add("prior.W0", f, P).Data, f, P)
	ps.add("prior.b0", 1, P)
	glorot(rng, ps.add("prior.W1", P, P).Data, P, P)
	ps.add("prior.b1", 1, P)
	glorot(rng, ps.add("prior.Wmu", P, d).Data, P, d)
	ps.add("prior.bmu", 1, d)
	w = ps.add("prior.Wlv", P, d).Data
	glorot(rng, w, P, d)
	scale(w, 0.1)
	ps.add("prior.blv", 1, d)

	if cfg.FlowLayers > 0 {
		spec := flowSpec(cfg)
		spec.Init(rng, ps.add("flow.theta", spec.NumParams()).Data)
	}
	return ps
}

// embedOutputGain scales the initial weights of ψ's last layer.
const embedOutputGain = 0.1

// logVarBound soft-bounds q's log-variance: logvar = B·tanh(raw/B).
const logVarBound = 2.0

func scale(x []float64, s float64) {
	for i := range x {
		x[i] *= s
	}
}

// contextDim is the width of h, the vector q(ω|h) and the flows condition
// on: the task summary s̄, followed by the LSTM output(s) when there is
// context.
func contextDim(cfg Config) int {
	switch cfg.Context {
	case ContextLSTM:
		return 2 * cfg.InferHidden
	case ContextBiLSTM:
		return 3 * cfg.InferHidden
	}
	return cfg.InferHidden
}

func flowSpec(cfg Config) FlowSpec {
	return FlowSpec{Layers: cfg.FlowLayers, Dim: cfg.FeatureDim(), Cond: contextDim(cfg), Hidden: cfg.FlowHidden}
}

// shape identifies a graph: one is built per distinct shape and reused.
type shape struct {
	T, NS, NQ int
	train     bool // with KL, gradients and the optimizer's loss
}

// graph is one built gorgonia graph with its machine. It is not safe for
// concurrent use: each goroutine that runs the model owns its graphs.
type graph struct {
	shape
	cfg       Config
	g         *G.ExprGraph
	vm        G.VM
	params    []*G.Node // parallel to Params.List
	paramVals []*tensor.Dense

	// inputs
	x, ys, yq, eps, phase, logq0c *G.Node
	h0, c0                        [2]*G.Node // carried LSTM state per direction

	// outputs
	loss, data, kl, lambda, pred, omega0 *G.Node
	mu, lv                               *G.Node // q's parameters (T,d), read when flows need them
	// r receives the values of read nodes. It is a separate allocation on
	// purpose: gorgonia's read ops point at it, and if they pointed into
	// graph, graph → machine → graph would be a cycle through the tape
	// machine's finalizer, which the garbage collector never frees.
	r *graphReads

	lstm [2]*LSTMOp
	flow *FlowOp
}

type graphReads struct {
	lossV, dataV, klV, lambdaV, predV, omega0V, muV, lvV G.Value
}

func denseLayer(x, w, b *G.Node) (*G.Node, error) {
	xw, err := G.Mul(x, w)
	if err != nil {
		return nil, err
	}
	return G.BroadcastAdd(xw, b, nil, []byte{0})
}

// buildGraph builds the MetaKernel computation for one shape.
//
// Shapes (T tasks, n support, m query, f features = d, D bases):
//
//	x (T·n+T·m, in) → ψ → F;  Fs (T,n,f), Fq (T,m,f)
//	inference:  [Fs, ys] → MLP(ELU) → mean over support → s̄ (T,H)
//	context:    h = s̄ | LSTM(s̄) | [LSTM→(s̄), LSTM←(s̄)]  (over the T tasks)
//	q(ω|h):     μ, log σ² (T,d);  ω₀ = μ + σ⊙ε (T,D,d);  ω_K = flow(ω₀; h)
//	features:   z = √(2/D)·cos(ω_K·f + b);  K = Zs·Zsᵀ;  α = (K+λI)⁻¹ ys;  ŷ = Zq·Zsᵀ·α
//	prior:      p(ω|x_i,S) = N(MLP(LaplaceAttention(Fq_i, Fs)))
//	KL:         closed form without flows; with flows the Monte Carlo estimate
//	            E_q0[log q0(ω₀) − Σ log|det| − log p(ω_K|x_i)] (paper eq. 22),
//	            averaged over query points (not summed, see REFERENCE-NOTES)
func buildGraph(cfg Config, ps *Params, inDim, outDim int, sh shape) (gr *graph, err error) {
	defer func() {
		// gorgonia reports some shape mismatches by panicking at build time.
		if r := recover(); r != nil {
			err = fmt.Errorf("engine: building graph %+v: %v", sh, r)
		}
	}()
	g := G.NewGraph()
	gr = &graph{shape: sh, cfg: cfg, g: g, r: &graphReads{}}
	T, NS, NQ := sh.T, sh.NS, sh.NQ
	f, D := cfg.FeatureDim(), cfg.Bases
	p := map[string]*G.Node{}
	for _, prm := range ps.List {
		val := tensor.New(tensor.WithShape(prm.Shape...), tensor.WithBacking(prm.Data))
		n := G.NewTensor(g, G.Float64, len(prm.Shape), G.WithShape(prm.Shape...), G.WithName(prm.Name), G.WithValue(val))
		gr.params = append(gr.params, n)
		gr.paramVals = append(gr.paramVals, val)
		p[prm.Name] = n
	}
	must := func(n *G.Node, e error) *G.Node {
		if e != nil {
			panic(e)
		}
		return n
	}
	input := func(name string, s ...int) *G.Node {
		return G.NewTensor(g, G.Float64, len(s), G.WithShape(s...), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float64))))
	}

	gr.x = input("x", T*(NS+NQ), inDim)
	gr.ys = input("ys", T*NS, outDim)
	gr.yq = input("yq", T*NQ, outDim)

	// ψ: one pass over support and query rows together.
	F := gr.x
	for i := range cfg.EmbedHidden {
		F = must(denseLayer(F, p[fmt.Sprintf("embed.W%d", i)], p[fmt.Sprintf("embed.b%d", i)]))
		F = must(G.Rectify(F))
	}
	Fs2 := must(G.Slice(F, G.S(0, T*NS)))
	Fq2 := must(G.Slice(F, G.S(T*NS, T*(NS+NQ))))
	Fs := must(G.Reshape(Fs2, tensor.Shape{T, NS, f}))
	Fq := must(G.Reshape(Fq2, tensor.Shape{T, NQ, f}))

	var omega *G.Node // (T,D,f) bases used by the features
	var h, mu, lv *G.Node
	switch cfg.Kernel {
	case KernelRFF:
		gr.eps = input("eps", T, D, f)
		omega = gr.eps
	case KernelVRF:
		gr.eps = input("eps", T, D, f)
		e := must(G.Concat(1, Fs2, gr.ys))
		e = must(ELU(must(denseLayer(e, p["infer.W0"], p["infer.b0"]))))
		e = must(ELU(must(denseLayer(e, p["infer.W1"], p["infer.b1"]))))
		H := cfg.InferHidden
		sbar := must(G.Mean(must(G.Reshape(e, tensor.Shape{T, NS, H})), 1))
		h = sbar
		if cfg.Context != ContextNone {
			dirs := 1
			if cfg.Context == ContextBiLSTM {
				dirs = 2
			}
			outs := make([]*G.Node, dirs)
			for k, dir := range []string{"fw", "bw"}[:dirs] {
				gr.h0[k] = input("h0."+dir, H)
				gr.c0[k] = input("c0."+dir, H)
				outs[k], gr.lstm[k], err = LSTMSeq(sbar, p["lstm."+dir+".W"], must(G.Reshape(p["lstm."+dir+".b"], tensor.Shape{4 * H})), gr.h0[k], gr.c0[k], k == 1)
				if err != nil {
					return nil, err
				}
			}
			// q(ω|S,C) sees the task's own summary next to the context:
			// the LSTM output alone must squeeze the current task through
			// its gates, and that measurably loses to no context at all.
			h = must(G.Concat(1, append([]*G.Node{sbar}, outs...)...))
		}
		mu = must(denseLayer(h, p["q.Wmu"], p["q.bmu"]))
		// log σ² is soft-bounded to (−2, 2): with the weak KL weight nothing
		// else stops σ from growing until the features are pure noise, a
		// state the flow variants fell into and did not leave (loss stuck at
		// the targets' variance). The embedding still sets the scale.
		lvBound := G.NewConstant(logVarBound)
		lv = must(G.HadamardProd(lvBound, must(G.Tanh(must(G.HadamardDiv(must(denseLayer(h, p["q.Wlv"], p["q.blv"])), lvBound))))))
		gr.omega0 = must(Reparam(mu, lv, gr.eps))
		omega = gr.omega0
	}

	var logdet *G.Node // (T): mean log|det| over the D bases
	if cfg.Kernel == KernelVRF && cfg.FlowLayers > 0 {
		// The flow runs on the standardized draw ε and the task's affine
		// map comes last: ω_K = μ + σ⊙f(ε; h). Both orders give a
		// normalizing flow with the same log-density bookkeeping
		// (log q = log N(ε) − Σ log σ − Σ log|det ∂f|, which is what the KL
		// below computes), but on ω₀ = μ + σε directly the coupling nets see
		// inputs whose scale moves with μ and σ during training, and the
		// sine runs regularly collapsed to predicting zero.
		out, op, e := CouplingFlow(gr.eps, h, p["flow.theta"], flowSpec(cfg))
		if e != nil {
			return nil, e
		}
		gr.flow = op
		logdet = must(FlowLogDetMean(out))
		omega = must(ScaleShift(mu, lv, out))
		gr.mu, gr.lv = mu, lv
		G.Read(mu, &gr.r.muV)
		G.Read(lv, &gr.r.lvV)
	}

	var K, Kq *G.Node
	if cfg.Kernel == KernelRBF {
		bw := must(Bandwidth(Fs))
		K = must(RBFKernel(Fs, Fs, bw))
		Kq = must(RBFKernel(Fq, Fs, bw))
	} else {
		gr.phase = input("phase", T, D)
		Zs := must(RFFFeatures(Fs, omega, gr.phase))
		Zq := must(RFFFeatures(Fq, omega, gr.phase))
		K = must(G.BatchedMatMul(Zs, Zs, false, true))
		Kq = must(G.BatchedMatMul(Zq, Zs, false, true))
	}
	gr.lambda = must(G.Exp(p["loglambda"]))
	alpha := must(KRRSolve(K, must(G.Reshape(gr.ys, tensor.Shape{T, NS, outDim})), gr.lambda))
	gr.pred = must(G.BatchedMatMul(Kq, alpha))
	G.Read(gr.pred, &gr.r.predV)
	G.Read(gr.lambda, &gr.r.lambdaV)
	if gr.omega0 != nil {
		G.Read(gr.omega0, &gr.r.omega0V)
	}

	if !sh.train {
		gr.vm = G.NewTapeMachine(g)
		return gr, nil
	}

	diff := must(G.Sub(must(G.Reshape(gr.pred, tensor.Shape{T * NQ, outDim})), gr.yq))
	gr.data = must(G.Mean(must(G.Square(diff))))
	gr.loss = gr.data
	if cfg.Kernel == KernelVRF {
		att := must(G.Reshape(must(LaplaceAttention(Fq, Fs)), tensor.Shape{T * NQ, f}))
		a := must(ELU(must(denseLayer(att, p["prior.W0"], p["prior.b0"]))))
		a = must(ELU(must(denseLayer(a, p["prior.W1"], p["prior.b1"]))))
		mup := must(G.Reshape(must(denseLayer(a, p["prior.Wmu"], p["prior.bmu"])), tensor.Shape{T, NQ, f}))
		lvp := must(G.Reshape(must(denseLayer(a, p["prior.Wlv"], p["prior.blv"])), tensor.Shape{T, NQ, f}))
		if cfg.FlowLayers == 0 {
			gr.kl = must(G.Mean(must(GaussKL(mu, lv, mup, lvp))))
		} else {
			// log q0(ω₀) = −½Σε² − ½Σ log σ² − (d/2)·log 2π; the ε part and
			// the constant come in as logq0c (T) since they carry no gradient.
			gr.logq0c = input("logq0c", T)
			half := G.NewConstant(0.5)
			logq0 := must(G.Sub(gr.logq0c, must(G.Mul(half, must(G.Sum(lv, 1))))))
			logp := must(GaussLogDensity(omega, mup, lvp))
			gr.kl = must(G.Sub(must(G.Mean(must(G.Sub(logq0, logdet)))), must(G.Mean(logp))))
		}
		gr.loss = must(G.Add(gr.data, must(G.Mul(G.NewConstant(cfg.KLWeight), gr.kl))))
		G.Read(gr.kl, &gr.r.klV)
	}
	G.Read(gr.loss, &gr.r.lossV)
	G.Read(gr.data, &gr.r.dataV)
	if _, err := G.Grad(gr.loss, gr.params...); err != nil {
		return nil, fmt.Errorf("engine: differentiating %+v: %w", sh, err)
	}
	gr.vm = G.NewTapeMachine(g, G.BindDualValues(gr.params...))
	return gr, nil
}

// bindParams points every parameter node at the master data again: the
// machine may have replaced a node's value with its dual value's.
func (gr *graph) bindParams() error {
	for i, n := range gr.params {
		if err := G.Let(n, gr.paramVals[i]); err != nil {
			return err
		}
	}
	return nil
}

// grads returns the gradient of every parameter from the last run and
// zeroes the machine's accumulators (gorgonia adds into them across runs).
func (gr *graph) grads(dst [][]float64) ([][]float64, error) {
	if dst == nil {
		dst = make([][]float64, len(gr.params))
	}
	for i, n := range gr.params {
		gv, err := n.Grad()
		if err != nil {
			return nil, fmt.Errorf("engine: gradient of %s: %w", n.Name(), err)
		}
		gd, ok := gv.(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("engine: gradient of %s has type %T", n.Name(), gv)
		}
		data := gd.Data().([]float64)
		dst[i] = grow(dst[i], len(data))
		copy(dst[i], data)
		clear(data)
	}
	return dst, nil
}

func setInput(n *G.Node, data []float64) {
	if n == nil {
		return
	}
	copy(n.Value().(*tensor.Dense).Data().([]float64), data)
}

func scalarOf(v G.Value) float64 {
	switch x := v.(type) {
	case *G.F64:
		return float64(*x)
	case *tensor.Dense:
		return x.Data().([]float64)[0]
	}
	return 0
}

func dataOf(v G.Value) []float64 {
	if d, ok := v.(*tensor.Dense); ok {
		return d.Data().([]float64)
	}
	return nil
}
