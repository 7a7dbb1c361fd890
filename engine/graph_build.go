package engine

import (
	"fmt"

	"github.com/mkbench/mkbench/engine/ops"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// builder adds the model's computation to one graph. Parameter nodes are
// created on first use, so a stage's graph holds (and differentiates) only
// the parameters it reads.
type builder struct {
	*graph
	ps    *Params
	bn    []ops.BNStats
	pool  *ops.Pool
	nodes map[string]*G.Node
}

// blueprint is what every graph of a model is built from: its
// configuration, the parameters the graphs bind, the pool their ops spread
// work over, and the widths of the task family's inputs and targets.
type blueprint struct {
	cfg           Config
	ps            *Params
	bn            []ops.BNStats // a ResNet's running statistics (Model.BN)
	pool          *ops.Pool
	inDim, outDim int
}

// out is the width of the targets of a graph of shape sh.
func (bp blueprint) out(sh shape) int {
	if sh.Way > 0 {
		return sh.Way
	}
	return bp.outDim
}

func (bp blueprint) builder(sh shape) *builder {
	return &builder{graph: &graph{shape: sh, cfg: bp.cfg, g: G.NewGraph(), r: &graphReads{}},
		ps: bp.ps, bn: bp.bn, pool: bp.pool, nodes: map[string]*G.Node{}}
}

// p returns the node of parameter name, bound to its master data.
func (b *builder) p(name string) *G.Node {
	if n, ok := b.nodes[name]; ok {
		return n
	}
	for i, prm := range b.ps.List {
		if prm.Name != name {
			continue
		}
		val := tensor.New(tensor.WithShape(prm.Shape...), tensor.WithBacking(prm.Data))
		n := G.NewTensor(b.g, G.Float64, len(prm.Shape), G.WithShape(prm.Shape...), G.WithName(prm.Name), G.WithValue(val))
		b.params = append(b.params, n)
		b.paramIdx = append(b.paramIdx, i)
		b.paramVals = append(b.paramVals, val)
		b.nodes[name] = n
		return n
	}
	panic("engine: no parameter " + name)
}

func (b *builder) input(name string, s ...int) *G.Node {
	return G.NewTensor(b.g, G.Float64, len(s), G.WithShape(s...), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float64))))
}

func must(n *G.Node, e error) *G.Node {
	if e != nil {
		panic(e)
	}
	return n
}

// catchBuild turns gorgonia's build-time panics (some shape mismatches)
// and must's into an error.
func catchBuild(sh shape, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("engine: building graph %+v: %v", sh, r)
	}
}

// buildGraph builds the MetaKernel computation for one shape in one graph.
//
// Shapes (T tasks, n support, m query, f features = d, D bases):
//
//	x (T·n+T·m, in) → ψ → F;  Fs (T,n,f), Fq (T,m,f)
//	inference:  [Fs, ys] → MLP(ELU) → mean over support → s̄ (T,H)
//	context:    h = s̄ | LSTM(s̄) | [LSTM→(s̄), LSTM←(s̄)]  (over the T tasks)
//	q(ω|h):     μ, log σ² (T,d);  ω₀ = μ + σ⊙ε (T,D,d);  ω_K = flow(ω₀; h)
//	features:   z = √(2/D)·cos(ω_K·f + b);  K = Zs·Zsᵀ;  α = (K+λI)⁻¹ ys;  ŷ = Zq·Zsᵀ·α
//	prior:      p(ω|x_i,S) = N(MLP(ops.LaplaceAttention(b.pool, Fq_i, Fs)))
//	KL:         closed form without flows; with flows the Monte Carlo estimate
//	            E_q0[log q0(ω₀) − Σ log|det| − log p(ω_K|x_i)] (paper eq. 22),
//	            averaged over query points (not summed, see REFERENCE-NOTES)
//
// The model is written in parts (ψ, inference network, context LSTM, and
// back: everything from h on) so that training can run them as stages (see
// staged); here they are joined in one graph.
func buildGraph(bp blueprint, sh shape) (gr *graph, err error) {
	defer catchBuild(sh, &err)
	b := bp.builder(sh)
	inDim, outDim := bp.inDim, bp.out(sh)
	T, NS := sh.T, sh.NS
	b.x = b.input("x", T*(NS+sh.NQ), inDim)
	b.ys = b.input("ys", T*NS, outDim)
	b.yq = b.input("yq", T*sh.NQ, outDim)
	F, h, err := b.front()
	if err != nil {
		return nil, err
	}
	Fs2 := must(ops.Rows(F, 0, T*NS))
	Fq2 := must(ops.Rows(F, T*NS, T*(NS+sh.NQ)))
	if err := b.back(Fs2, Fq2, h, outDim, 1); err != nil {
		return nil, err
	}
	return b.finish(b.params)
}

// finish differentiates a training graph's loss and starts its machine.
func (b *builder) finish(wrt []*G.Node) (*graph, error) {
	if b.loss == nil {
		b.vm = G.NewTapeMachine(b.g)
		return b.graph, nil
	}
	if _, err := G.Grad(b.loss, wrt...); err != nil {
		return nil, fmt.Errorf("engine: differentiating %+v: %w", b.shape, err)
	}
	b.vm = G.NewTapeMachine(b.g, G.BindDualValues(wrt...))
	return b.graph, nil
}

// embed is ψ applied to the rows of x.
func (b *builder) embed(x *G.Node) *G.Node {
	if b.cfg.UsesResNet() {
		return b.resnet(x)
	}
	if spec := b.cfg.Conv; spec != nil {
		net, err := ops.NewConvNet(b.pool, *spec)
		if err != nil {
			panic(err)
		}
		ws, bs := make([]*G.Node, spec.Blocks), make([]*G.Node, spec.Blocks)
		for l := range ws {
			ws[l], bs[l] = b.p(fmt.Sprintf("conv%d.w", l)), b.p(fmt.Sprintf("conv%d.b", l))
		}
		b.convs = append(b.convs, net)
		return must(net.Apply(x, ws, bs))
	}
	for i := range b.cfg.EmbedHidden {
		x = must(ops.Dense(x, b.p(fmt.Sprintf("embed.W%d", i)), b.p(fmt.Sprintf("embed.b%d", i)), ops.ActReLU, i > 0))
	}
	return x
}

// resnet is the ResNet ψ applied to the rows of x: the support rows of the
// graph's tasks, then (in graphs with queries) their query rows. Each task
// is a batch-norm episode, normalized with its support images' statistics
// as the Meta-Dataset reference does, so a task's features do not depend
// on the other tasks of its graph: the staged step's summary graphs, which
// see only support rows, compute the same features as its task graphs.
func (b *builder) resnet(x *G.Node) *G.Node {
	spec := *b.cfg.ResNet
	net, err := ops.NewResNet(b.pool, spec, b.bn)
	if err != nil {
		panic(err)
	}
	var params []*G.Node
	for _, p := range spec.Params() {
		params = append(params, b.p(resnetParam(p.Name)))
	}
	lay := ops.BNLayout{Episodes: b.T, Support: b.NS}
	switch rows := x.Shape()[0]; rows {
	case b.T * b.NS:
	case b.T * (b.NS + b.NQ):
		lay.Query = b.NQ
	default:
		panic(fmt.Sprintf("engine: ψ of %d rows, want the support rows of %d tasks (%d) or all their rows (%d)", rows, b.T, b.T*b.NS, b.T*(b.NS+b.NQ)))
	}
	b.resnets = append(b.resnets, net)
	return must(net.Apply(x, params, lay))
}

// infer is the inference network's task summary s̄ (T,H) from the support
// features Fs2 (T·n, f) and targets ys (T·n, out).
//
// For classification the rows are the class prototypes instead of the
// support points (see newParams).
func (b *builder) infer(Fs2, ys *G.Node) *G.Node {
	e, rows := Fs2, b.NS
	if b.cfg.Classify() {
		e, rows = must(G.Reshape(b.prototypes(Fs2, ys), tensor.Shape{b.T * b.way(), b.cfg.FeatureDim()})), b.way()
	} else {
		e = must(ops.ConcatCols(Fs2, ys))
	}
	for i := range b.cfg.inferLayers() {
		e = must(ops.Dense(e, b.p(fmt.Sprintf("infer.W%d", i)), b.p(fmt.Sprintf("infer.b%d", i)), ops.ActELU, true))
	}
	return must(G.Mean(must(G.Reshape(e, tensor.Shape{b.T, rows, b.cfg.InferHidden})), 1))
}

// way is the number of classes of the graph's tasks.
func (b *builder) way() int {
	if b.Way > 0 {
		return b.Way
	}
	return b.cfg.Way
}

// prototypes are the class means of the support features, (T, way, f):
// Ysᵀ·Fs / shot with the one-hot support targets, the shot being the
// graph's (a training graph's is Config.TrainingShot). In a varying episode
// shots differ between classes, and the input yw (ys with each class's
// column over its shots, see setTargets) takes the place of Ys / shot.
func (b *builder) prototypes(Fs2, ys *G.Node) *G.Node {
	c := b.cfg
	f3 := must(G.Reshape(Fs2, tensor.Shape{b.T, b.NS, c.FeatureDim()}))
	if b.Uneven {
		if b.yw == nil {
			b.yw = b.input("yw", b.T*b.NS, b.Way)
		}
		return must(ops.BatchedMatMul(b.pool, must(G.Reshape(b.yw, tensor.Shape{b.T, b.NS, b.Way})), f3, true, false))
	}
	y3 := must(G.Reshape(ys, tensor.Shape{b.T, b.NS, b.way()}))
	shot := b.NS / b.way()
	return must(G.HadamardProd(must(ops.BatchedMatMul(b.pool, y3, f3, true, false)), G.NewConstant(1/float64(shot))))
}

// front computes ψ(x) for all rows of b.x (support rows of every task,
// then query rows) and, for the variational kernel, the context h (T, ·).
func (b *builder) front() (F, h *G.Node, err error) {
	cfg, T, NS := b.cfg, b.T, b.NS
	F = b.embed(b.x)
	if cfg.Kernel != KernelVRF {
		return F, nil, nil
	}
	sbar := b.infer(must(ops.Rows(F, 0, T*NS)), b.ys)
	if cfg.Context == ContextNone {
		return F, sbar, nil
	}
	H := cfg.InferHidden
	outs := make([]*G.Node, contextDirs(cfg))
	for k := range outs {
		dir := lstmDirs[k]
		b.h0[k] = b.input("h0."+dir, H)
		b.c0[k] = b.input("c0."+dir, H)
		outs[k], b.lstm[k], err = ops.LSTMSeq(sbar, b.p("lstm."+dir+".W"), must(G.Reshape(b.p("lstm."+dir+".b"), tensor.Shape{4 * H})), b.h0[k], b.c0[k], k == 1)
		if err != nil {
			return nil, nil, err
		}
	}
	// q(ω|S,C) sees the task's own summary next to the context: the LSTM
	// output alone must squeeze the current task through its gates, and
	// that measurably loses to no context at all.
	return F, must(ops.ConcatCols(append([]*G.Node{sbar}, outs...)...)), nil
}

// back computes predictions and, for training, the loss from the features
// of the support rows Fs2 (T·n, f) and query rows Fq2 (T·m, f) and the
// context h. The loss is multiplied by weight, a task stage's share of the
// meta-batch, so that the stages' losses add up to the model's.
func (b *builder) back(Fs2, Fq2, h *G.Node, outDim int, weight float64) error {
	cfg, sh := b.cfg, b.shape
	T, NS, NQ := sh.T, sh.NS, sh.NQ
	f, D := cfg.FeatureDim(), cfg.Bases
	Fs := must(G.Reshape(Fs2, tensor.Shape{T, NS, f}))
	Fq := must(G.Reshape(Fq2, tensor.Shape{T, NQ, f}))

	var omega *G.Node // (T,D,f) bases used by the features
	var mu, lv *G.Node
	switch cfg.Kernel {
	case KernelRFF:
		b.eps = b.input("eps", T, D, f)
		omega = b.eps
	case KernelVRF:
		b.eps = b.input("eps", T, D, f)
		mu = must(ops.Dense(h, b.p("q.Wmu"), b.p("q.bmu"), ops.ActNone, true))
		// log σ² is soft-bounded to (−2, 2): with the weak KL weight nothing
		// else stops σ from growing until the features are pure noise, a
		// state the flow variants fell into and did not leave (loss stuck at
		// the targets' variance). The embedding still sets the scale.
		lv = must(ops.Dense(h, b.p("q.Wlv"), b.p("q.blv"), ops.ActSoftBound, true))
		b.omega0 = must(ops.Reparam(mu, lv, b.eps))
		omega = b.omega0
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
		out, op, e := ops.CouplingFlow(b.pool, b.eps, h, b.p("flow.theta"), flowSpec(cfg))
		if e != nil {
			return e
		}
		b.flow = op
		logdet = must(ops.FlowLogDetMean(out))
		omega = must(ops.ScaleShift(mu, lv, out))
		b.mu, b.lv = mu, lv
		G.Read(mu, &b.r.muV)
		G.Read(lv, &b.r.lvV)
	}

	var K, Kq *G.Node
	if cfg.Kernel == KernelRBF {
		bw := must(ops.Bandwidth(Fs))
		K = must(ops.RBFKernel(b.pool, Fs, Fs, bw))
		Kq = must(ops.RBFKernel(b.pool, Fq, Fs, bw))
	} else {
		b.phase = b.input("phase", T, D)
		Zs := must(ops.RFFFeatures(b.pool, Fs, omega, b.phase))
		Zq := must(ops.RFFFeatures(b.pool, Fq, omega, b.phase))
		K = must(ops.BatchedMatMul(b.pool, Zs, Zs, false, true))
		Kq = must(ops.BatchedMatMul(b.pool, Zq, Zs, false, true))
	}
	b.lambda = must(G.Exp(b.p("loglambda")))
	alpha := must(ops.KRRSolve(b.pool, K, must(G.Reshape(b.ys, tensor.Shape{T, NS, outDim})), b.lambda))
	b.pred = must(ops.BatchedMatMul(b.pool, Kq, alpha, false, false))
	if cfg.Classify() {
		b.pred = must(ops.ClassLogits(must(G.Reshape(b.pred, tensor.Shape{T * NQ, outDim})), b.p("gamma"), b.p("beta")))
	}
	G.Read(b.pred, &b.r.predV)
	G.Read(b.lambda, &b.r.lambdaV)
	if b.omega0 != nil {
		G.Read(b.omega0, &b.r.omega0V)
	}
	if !sh.train {
		return nil
	}

	if cfg.Classify() {
		b.data = must(G.Mean(must(ops.SoftmaxXent(b.pred, b.yq))))
	} else {
		diff := must(G.Sub(must(G.Reshape(b.pred, tensor.Shape{T * NQ, outDim})), b.yq))
		b.data = must(G.Mean(must(G.Square(diff))))
	}
	b.loss = b.data
	if cfg.Kernel == KernelVRF {
		// The prior attends over the support features, or for
		// classification over the class prototypes (REFERENCE-NOTES).
		keys := Fs
		if cfg.Classify() {
			keys = b.prototypes(Fs2, b.ys)
		}
		att := must(G.Reshape(must(ops.LaplaceAttention(b.pool, Fq, keys)), tensor.Shape{T * NQ, f}))
		a := must(ops.Dense(att, b.p("prior.W0"), b.p("prior.b0"), ops.ActELU, true))
		a = must(ops.Dense(a, b.p("prior.W1"), b.p("prior.b1"), ops.ActELU, true))
		mup := must(G.Reshape(must(ops.Dense(a, b.p("prior.Wmu"), b.p("prior.bmu"), ops.ActNone, true)), tensor.Shape{T, NQ, f}))
		lvp := must(G.Reshape(must(ops.Dense(a, b.p("prior.Wlv"), b.p("prior.blv"), ops.ActNone, true)), tensor.Shape{T, NQ, f}))
		if cfg.FlowLayers == 0 {
			b.kl = must(G.Mean(must(ops.GaussKL(mu, lv, mup, lvp))))
		} else {
			// log q0(ω₀) = −½Σε² − ½Σ log σ² − (d/2)·log 2π; the ε part and
			// the constant come in as logq0c (T) since they carry no gradient.
			b.logq0c = b.input("logq0c", T)
			half := G.NewConstant(0.5)
			logq0 := must(G.Sub(b.logq0c, must(G.Mul(half, must(G.Sum(lv, 1))))))
			logp := must(ops.GaussLogDensity(omega, mup, lvp))
			b.kl = must(G.Sub(must(G.Mean(must(G.Sub(logq0, logdet)))), must(G.Mean(logp))))
		}
		b.loss = must(G.Add(b.data, must(G.Mul(G.NewConstant(cfg.KLWeight), b.kl))))
		G.Read(b.kl, &b.r.klV)
	}
	if weight != 1 {
		b.loss = must(G.Mul(G.NewConstant(weight), b.loss))
	}
	G.Read(b.loss, &b.r.lossV)
	G.Read(b.data, &b.r.dataV)
	return nil
}

// buildSummary builds a task stage's forward-only pass to the task
// summaries s̄ (T,H) of its sh.T tasks, from their support rows.
func buildSummary(bp blueprint, sh shape) (gr *graph, err error) {
	defer catchBuild(sh, &err)
	b := bp.builder(sh)
	b.x = b.input("xs", sh.T*sh.NS, bp.inDim)
	b.ys = b.input("ys", sh.T*sh.NS, bp.out(sh))
	b.ctx = b.infer(b.embed(b.x), b.ys)
	G.Read(b.ctx, &b.r.ctxV)
	b.vm = G.NewTapeMachine(b.g)
	return b.graph, nil
}

// buildSeededSummary builds a task stage's pass to s̄ whose loss is
// Σ s̄⊙seed: with the seed holding ∂L/∂s̄ through the context LSTM, its
// gradients are ψ's and the inference network's share along that path.
func buildSeededSummary(bp blueprint, sh shape) (gr *graph, err error) {
	defer catchBuild(sh, &err)
	b := bp.builder(sh)
	b.x = b.input("xs", sh.T*sh.NS, bp.inDim)
	b.ys = b.input("ys", sh.T*sh.NS, bp.out(sh))
	sbar := b.infer(b.embed(b.x), b.ys)
	b.seedH = b.input("seed", sh.T, bp.cfg.InferHidden)
	b.loss = must(G.Sum(must(G.HadamardProd(sbar, b.seedH))))
	return b.finish(b.params)
}

// buildTask builds a task stage's whole model for its sh.T tasks, except
// the context LSTM, whose outputs (T, dirs·H) come in as an input whose
// gradient is read back. The loss is weighted by the stage's share of the
// meta-batch.
func buildTask(bp blueprint, sh shape, weight float64) (gr *graph, err error) {
	defer catchBuild(sh, &err)
	b := bp.builder(sh)
	cfg, inDim, outDim := bp.cfg, bp.inDim, bp.out(sh)
	T, NS, NQ := sh.T, sh.NS, sh.NQ
	b.x = b.input("x", T*(NS+NQ), inDim)
	b.ys = b.input("ys", T*NS, outDim)
	b.yq = b.input("yq", T*NQ, outDim)
	F := b.embed(b.x)
	Fs2 := must(ops.Rows(F, 0, T*NS))
	Fq2 := must(ops.Rows(F, T*NS, T*(NS+NQ)))
	var h *G.Node
	if cfg.Kernel == KernelVRF {
		h = b.infer(Fs2, b.ys)
		if dirs := contextDirs(cfg); dirs > 0 {
			b.hIn = b.input("context", T, dirs*cfg.InferHidden)
			h = must(ops.ConcatCols(h, b.hIn))
		}
	}
	if err := b.back(Fs2, Fq2, h, outDim, weight); err != nil {
		return nil, err
	}
	wrt := b.params
	if b.hIn != nil {
		wrt = append(append([]*G.Node(nil), wrt...), b.hIn)
	}
	return b.finish(wrt)
}
