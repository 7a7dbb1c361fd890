package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/engine/internal/vecmath"
	"github.com/mkbench/mkbench/engine/ops"
	"gonum.org/v1/gonum/floats"
)

// Optimizer is Adam or SGD with momentum over flat parameter slices. It is
// ours rather than gorgonia's solvers because a resumed run must continue
// with exactly the moment estimates it stopped with, and gorgonia's solvers
// keep them unexported.
type Optimizer struct {
	Kind     string    `json:"kind"` // "adam" or "sgd"
	LR       float64   `json:"lr"`
	Beta1    float64   `json:"beta1"`
	Beta2    float64   `json:"beta2"`
	Eps      float64   `json:"eps"`
	Momentum float64   `json:"momentum"`
	ClipNorm float64   `json:"clip_norm"` // 0 = no clipping
	Scale    []float64 `json:"scale"`     // per-parameter learning-rate multiplier
	// Decay is each parameter's decoupled weight decay (Config.PsiWeightDecay
	// on ψ's weights, else 0); nil in checkpoints from before it existed.
	Decay []float64   `json:"decay,omitempty"`
	Steps int         `json:"steps"`
	M     [][]float64 `json:"m"` // Adam first moments or SGD velocity
	V     [][]float64 `json:"v"` // Adam second moments

	chunks [][3]int // the work units of the last Step (see optimChunks)
	// pool runs the updates; they come between a model's stages, so all
	// cores are theirs, which is what a nil pool gives.
	pool *ops.Pool
}

// NewOptimizer returns an optimizer with zeroed state for params.
func NewOptimizer(cfg Config, params []*Param) *Optimizer {
	o := &Optimizer{Kind: cfg.Optimizer, LR: cfg.LR, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		Momentum: cfg.Momentum, ClipNorm: cfg.ClipNorm}
	o.M = make([][]float64, len(params))
	o.V = make([][]float64, len(params))
	o.Scale = make([]float64, len(params))
	for i, p := range params {
		o.Scale[i] = 1
		if strings.HasPrefix(p.Name, "flow.") && cfg.FlowLRScale > 0 {
			o.Scale[i] = cfg.FlowLRScale
		}
		if cfg.PsiWeightDecay > 0 && isPsiWeight(p.Name) {
			if o.Decay == nil {
				o.Decay = make([]float64, len(params))
			}
			o.Decay[i] = cfg.PsiWeightDecay
		}
		o.M[i] = make([]float64, p.Size())
		if o.Kind == "adam" {
			o.V[i] = make([]float64, p.Size())
		}
	}
	return o
}

// ErrNonFinite reports a NaN or infinite gradient or loss.
var ErrNonFinite = errors.New("engine: loss or gradient is NaN or infinite")

// NonFiniteError names a value of a training step that is not finite; it
// matches ErrNonFinite.
type NonFiniteError struct {
	What  string // e.g. "the loss", "the gradient of flow.w1"
	Value float64
}

func (e *NonFiniteError) Error() string        { return fmt.Sprintf("%s is not finite (%g)", e.What, e.Value) }
func (e *NonFiniteError) Is(target error) bool { return target == ErrNonFinite }

// Step applies one update and returns the gradient norm before clipping.
// A non-finite gradient changes nothing and returns ErrNonFinite, so the
// parameters stay at their last good values.
func (o *Optimizer) Step(params []*Param, grads [][]float64) (float64, error) {
	return o.step(params, grads, nil)
}

// step is Step with, when res is not nil, the resident parameters' update
// on the device: their host gradients are not read (their ops left them
// on the device), the norm adds the device's sum of squares (one scalar
// read, after the host's sum: a fixed order), and their update (Adam or
// SGD) runs there with the same scalars.
func (o *Optimizer) step(params []*Param, grads [][]float64, res *resident) (float64, error) {
	if len(grads) != len(params) || len(o.M) != len(params) {
		return 0, fmt.Errorf("engine: optimizer has state for %d parameters, got %d parameters and %d gradients", len(o.M), len(params), len(grads))
	}
	var sq, dsq float64
	for i, g := range grads {
		if res != nil && res.has(i) {
			continue
		}
		sq += floats.Dot(g, g) // unrolled assembly; its summation order is fixed
	}
	if res != nil {
		var err error
		if dsq, err = res.deviceNormSq(); err != nil {
			return 0, err
		}
		sq += dsq
	}
	norm := math.Sqrt(sq)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		for i, g := range grads {
			if res != nil && res.has(i) {
				continue
			}
			for _, v := range g {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return norm, &NonFiniteError{What: "the gradient of " + params[i].Name, Value: v}
				}
			}
		}
		if res != nil {
			if err := res.nonFinite(dsq); err != nil {
				return norm, err
			}
		}
		return norm, &NonFiniteError{What: "the gradient norm", Value: norm}
	}
	scale := 1.0
	if o.ClipNorm > 0 && norm > o.ClipNorm {
		scale = o.ClipNorm / norm
	}
	if o.Kind != "adam" && o.Kind != "sgd" {
		return norm, fmt.Errorf("engine: unknown optimizer %q", o.Kind)
	}
	o.Steps++
	b1c := 1 - math.Pow(o.Beta1, float64(o.Steps))
	b2c := 1 - math.Pow(o.Beta2, float64(o.Steps))
	step := o.LR * math.Sqrt(b2c) / b1c
	// The update is element-wise, so splitting the big parameters (the
	// flow's ~150k) into chunks over the cores cannot change a single bit.
	o.chunks = optimChunks(o.chunks, params)
	var work float64
	for i, p := range params {
		if res != nil && res.has(i) {
			continue
		}
		work += float64(len(p.Data))
	}
	if res != nil {
		o.chunks = slices.DeleteFunc(o.chunks, func(c [3]int) bool { return res.has(c[0]) })
	}
	o.pool.For(len(o.chunks), optimWork*work, func(c int) {
		ch := o.chunks[c]
		i, lo, hi := ch[0], ch[1], ch[2]
		p := params[i]
		lr := 1.0
		if i < len(o.Scale) {
			lr = o.Scale[i]
		}
		if i < len(o.Decay) && o.Decay[i] > 0 {
			// Decoupled: the shrink does not pass through the moments,
			// and Adam's update does not depend on the weights, so
			// shrinking first is AdamW's θ − η(u + λθ).
			floats.Scale(1-lr*o.LR*o.Decay[i], p.Data[lo:hi])
		}
		if o.Kind == "adam" {
			adamUpdate(p.Data[lo:hi], grads[i][lo:hi], o.M[i][lo:hi], o.V[i][lo:hi], scale, lr*step, o.Beta1, o.Beta2, o.Eps)
		} else {
			sgdUpdate(p.Data[lo:hi], grads[i][lo:hi], o.M[i][lo:hi], scale, lr*o.LR, o.Momentum)
		}
	})
	if res != nil {
		if err := res.update(o, scale, step); err != nil {
			return norm, err
		}
	}
	return norm, nil
}

// isPsiWeight reports whether the parameter called name is a weight of
// the feature extractor ψ: a convolution's (conv0.w, resnet.….w) or an
// MLP layer's (embed.W0).
func isPsiWeight(name string) bool {
	switch {
	case strings.HasPrefix(name, "embed.W"):
		return true
	case strings.HasPrefix(name, "conv"), strings.HasPrefix(name, "resnet."):
		return strings.HasSuffix(name, ".w")
	}
	return false
}

// optimChunk is the slice of a parameter one goroutine updates at a time.
const optimChunk = 1 << 15

// optimWork is the estimated cost of updating one element, in the units of
// ops.Pool.For's threshold (about a nanosecond).
const optimWork = 4

// optimChunks returns (into buf) the chunks of params an update is split
// into: parameter index, first and end element.
func optimChunks(buf [][3]int, params []*Param) [][3]int {
	buf = buf[:0]
	for i, p := range params {
		for lo := 0; lo < len(p.Data); lo += optimChunk {
			buf = append(buf, [3]int{i, lo, min(lo+optimChunk, len(p.Data))})
		}
	}
	return buf
}

// adamUpdate is one Adam step on a chunk; vecmath.Adam runs it four lanes
// at a time, bit-identical to the scalar loop.
func adamUpdate(p, g, m, v []float64, scale, step, b1, b2, eps float64) {
	vecmath.Adam(p, g, m, v, scale, step, b1, b2, eps)
}

// sgdUpdate is one SGD step on a chunk. The conversions round each
// product before its sum (Go may otherwise fuse them, GOAMD64=v3 does),
// as the device's res_sgd does: the resident backbone's update is these
// bits.
func sgdUpdate(p, g, m []float64, scale, lr, mom float64) {
	for j := range p {
		m[j] = float64(mom*m[j]) + float64(g[j]*scale)
		p[j] -= float64(lr * m[j])
	}
}
