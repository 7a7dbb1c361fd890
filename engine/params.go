package engine

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mkbench/mkbench/engine/ops"
)

// Param is one named trainable tensor. Data is the master copy: every graph
// binds its parameter nodes to tensors backed by this slice, so an optimizer
// step is seen by all graphs without copying.
type Param struct {
	Name  string    `json:"name"`
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// Size is the number of elements.
func (p *Param) Size() int { return len(p.Data) }

// Params is an ordered set of parameters; the order fixes the layout of
// optimizer state and checkpoints.
type Params struct {
	List   []*Param
	byName map[string]*Param
}

func (ps *Params) add(name string, shape ...int) *Param {
	n := 1
	for _, s := range shape {
		n *= s
	}
	if ps.byName == nil {
		ps.byName = map[string]*Param{}
	}
	if _, dup := ps.byName[name]; dup {
		panic("engine: duplicate parameter " + name)
	}
	p := &Param{Name: name, Shape: shape, Data: make([]float64, n)}
	ps.List = append(ps.List, p)
	ps.byName[name] = p
	return p
}

// Get returns the parameter called name, or nil.
func (ps *Params) Get(name string) *Param { return ps.byName[name] }

// Count is the total number of scalars.
func (ps *Params) Count() int {
	n := 0
	for _, p := range ps.List {
		n += p.Size()
	}
	return n
}

// CopyFrom overwrites the values of ps with those of src, which must have
// the same names and shapes (a checkpoint of the same configuration).
func (ps *Params) CopyFrom(src []*Param) error {
	if len(src) != len(ps.List) {
		return fmt.Errorf("engine: checkpoint has %d parameters, model has %d", len(src), len(ps.List))
	}
	for i, p := range ps.List {
		if src[i].Name != p.Name || len(src[i].Data) != len(p.Data) {
			return fmt.Errorf("engine: checkpoint parameter %d is %s[%d], model expects %s[%d]",
				i, src[i].Name, len(src[i].Data), p.Name, len(p.Data))
		}
		copy(p.Data, src[i].Data)
	}
	return nil
}

// glorot fills w (fanIn×fanOut) with a normal of variance 2/(fanIn+fanOut).
func glorot(rng *rand.Rand, w []float64, fanIn, fanOut int) {
	s := math.Sqrt(2 / float64(fanIn+fanOut))
	for i := range w {
		w[i] = s * rng.NormFloat64()
	}
}

// he fills w with a normal of variance 2/fanIn, suited to ReLU layers.
func he(rng *rand.Rand, w []float64, fanIn int) {
	s := math.Sqrt(2 / float64(fanIn))
	for i := range w {
		w[i] = s * rng.NormFloat64()
	}
}

// newParams creates and initializes every parameter the configuration
// uses; variants without an inference network have none of its weights.
func newParams(cfg Config, inDim, outDim int, rng *rand.Rand) *Params {
	ps := &Params{}
	f := cfg.FeatureDim()
	prev := inDim
	if s := cfg.Conv; s != nil {
		// PyTorch's default Conv2d initialization (see ops.InitConvParams).
		ws, bs := make([][]float64, s.Blocks), make([][]float64, s.Blocks)
		for l := range s.Blocks {
			ws[l] = ps.add(fmt.Sprintf("conv%d.w", l), s.Filters, s.FanIn(l)).Data
			bs[l] = ps.add(fmt.Sprintf("conv%d.b", l), s.Filters).Data
		}
		ops.InitConvParams(*s, rng, ws, bs)
	}
	if cfg.UsesResNet() {
		// He-initialized convolutions, γ = 1, β = 0 (see
		// ops.InitResNetParams).
		var data [][]float64
		for _, p := range cfg.ResNet.Params() {
			data = append(data, ps.add(resnetParam(p.Name), p.Shape...).Data)
		}
		ops.InitResNetParams(*cfg.ResNet, rng, data)
	}
	for i, w := range cfg.EmbedHidden {
		if cfg.Conv != nil || cfg.UsesResNet() {
			break
		}
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
	if cfg.Classify() {
		ps.add("gamma", 1).Data[0] = cfg.InitialGamma()
		ps.add("beta", 1)
	}
	if cfg.Kernel != KernelVRF {
		return ps
	}
	H := cfg.InferHidden
	// Regression encodes each support point with its target; classification
	// pools each class's support features into a prototype (the tables'
	// "instance pooling"), so the input is the feature alone.
	in := f + outDim
	if cfg.Classify() {
		in = f
	}
	for i := range cfg.inferLayers() {
		glorot(rng, ps.add(fmt.Sprintf("infer.W%d", i), in, H).Data, in, H)
		ps.add(fmt.Sprintf("infer.b%d", i), 1, H)
		in = H
	}
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
			ops.InitLSTM(rng, H, H, w.Data, b.Data)
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

// resnetParam is the model's name of a ResNet parameter (ops.ResNetSpec's
// names are the network's own).
func resnetParam(name string) string { return "resnet." + name }

// bnBuffers returns the running statistics of a ResNet's batch norms as
// named non-trainable tensors sharing bn's storage, in the network's
// convolution order: per convolution its means, then its variances.
func bnBuffers(spec *ResNetSpec, bn []ops.BNStats) []*Param {
	if spec == nil || bn == nil {
		return nil
	}
	var bs []*Param
	for l, c := range spec.Convs() {
		bs = append(bs, &Param{Name: resnetParam(c.Name + ".bn.mean"), Shape: []int{c.Out}, Data: bn[l].Mean},
			&Param{Name: resnetParam(c.Name + ".bn.var"), Shape: []int{c.Out}, Data: bn[l].Var})
	}
	return bs
}

// embedOutputGain scales the initial weights of ψ's last layer.
const embedOutputGain = 0.1

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

func flowSpec(cfg Config) ops.FlowSpec {
	return ops.FlowSpec{Layers: cfg.FlowLayers, Dim: cfg.FeatureDim(), Cond: contextDim(cfg), Hidden: cfg.FlowHidden}
}

// lstmDirs names the context LSTM's directions; contextDirs says how many
// the configuration runs.
var lstmDirs = [2]string{"fw", "bw"}

func contextDirs(cfg Config) int {
	switch cfg.Context {
	case ContextLSTM:
		return 1
	case ContextBiLSTM:
		return 2
	}
	return 0
}
