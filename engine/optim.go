package engine

import (
	"errors"
	"fmt"
	"math"
)

// Optimizer is Adam or SGD with momentum over flat parameter slices. It is
// ours rather than gorgonia's solvers because a resumed run must continue
// with exactly the moment estimates it stopped with, and gorgonia's solvers
// keep them unexported.
type Optimizer struct {
	Kind     string      `json:"kind"` // "adam" or "sgd"
	LR       float64     `json:"lr"`
	Beta1    float64     `json:"beta1"`
	Beta2    float64     `json:"beta2"`
	Eps      float64     `json:"eps"`
	Momentum float64     `json:"momentum"`
	ClipNorm float64     `json:"clip_norm"` // 0 = no clipping
	Steps    int         `json:"steps"`
	M        [][]float64 `json:"m"` // Adam first moments or SGD velocity
	V        [][]float64 `json:"v"` // Adam second moments
}

// NewOptimizer returns an optimizer with zeroed state for params.
func NewOptimizer(cfg Config, params []*Param) *Optimizer {
	o := &Optimizer{Kind: cfg.Optimizer, LR: cfg.LR, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		Momentum: cfg.Momentum, ClipNorm: cfg.ClipNorm}
	o.M = make([][]float64, len(params))
	o.V = make([][]float64, len(params))
	for i, p := range params {
		o.M[i] = make([]float64, p.Size())
		if o.Kind == "adam" {
			o.V[i] = make([]float64, p.Size())
		}
	}
	return o
}

// ErrNonFinite reports a NaN or infinite gradient or loss.
var ErrNonFinite = errors.New("engine: loss or gradient is NaN or infinite")

// Step applies one update and returns the gradient norm before clipping.
// A non-finite gradient changes nothing and returns ErrNonFinite, so the
// parameters stay at their last good values.
func (o *Optimizer) Step(params []*Param, grads [][]float64) (float64, error) {
	if len(grads) != len(params) || len(o.M) != len(params) {
		return 0, fmt.Errorf("engine: optimizer has state for %d parameters, got %d parameters and %d gradients", len(o.M), len(params), len(grads))
	}
	var sq float64
	for _, g := range grads {
		for _, v := range g {
			sq += v * v
		}
	}
	norm := math.Sqrt(sq)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, ErrNonFinite
	}
	scale := 1.0
	if o.ClipNorm > 0 && norm > o.ClipNorm {
		scale = o.ClipNorm / norm
	}
	o.Steps++
	switch o.Kind {
	case "adam":
		b1c := 1 - math.Pow(o.Beta1, float64(o.Steps))
		b2c := 1 - math.Pow(o.Beta2, float64(o.Steps))
		step := o.LR * math.Sqrt(b2c) / b1c
		for i, p := range params {
			m, v, g := o.M[i], o.V[i], grads[i]
			for j := range p.Data {
				gj := g[j] * scale
				m[j] = o.Beta1*m[j] + (1-o.Beta1)*gj
				v[j] = o.Beta2*v[j] + (1-o.Beta2)*gj*gj
				p.Data[j] -= step * m[j] / (math.Sqrt(v[j]) + o.Eps)
			}
		}
	case "sgd":
		for i, p := range params {
			m, g := o.M[i], grads[i]
			for j := range p.Data {
				m[j] = o.Momentum*m[j] + g[j]*scale
				p.Data[j] -= o.LR * m[j]
			}
		}
	default:
		return norm, fmt.Errorf("engine: unknown optimizer %q", o.Kind)
	}
	return norm, nil
}
