package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bnProblem is a batch norm's input, γ, β, running statistics and an output
// gradient R, for loss = Σ out ⊙ R.
type bnProblem struct {
	c, p              int
	lay               BNLayout
	x, gamma, beta, r []float64
	run               BNStats
}

func newBNProblem(c, p int, lay BNLayout, seed uint64) *bnProblem {
	rng := rand.New(rand.NewPCG(seed, 5))
	b := &bnProblem{c: c, p: p, lay: lay, run: NewBNStats(c)}
	n := lay.Images() * p * c
	b.x, b.r = make([]float64, n), make([]float64, n)
	for i := range b.x {
		// Channel offsets and scales unlike 0 and 1.
		ch := i % c
		b.x[i] = float64(ch) - 1 + (1+0.5*float64(ch))*rng.NormFloat64()
		b.r[i] = rng.NormFloat64()
	}
	b.gamma, b.beta = make([]float64, c), make([]float64, c)
	for ch := range c {
		b.gamma[ch] = 0.5 + rng.Float64()
		b.beta[ch] = rng.NormFloat64()
		b.run.Mean[ch] = rng.NormFloat64()
		b.run.Var[ch] = 0.5 + rng.Float64()
	}
	return b
}

func (b *bnProblem) forward(t *testing.T, k *BatchNorm, mode BNMode) []float64 {
	t.Helper()
	out := make([]float64, len(b.x))
	if err := k.Forward(b.x, b.gamma, b.beta, b.lay, mode, &b.run, out); err != nil {
		t.Fatal(err)
	}
	return out
}

var bnLayouts = []struct {
	name string
	lay  BNLayout
	mode BNMode
}{
	{"batch", BNBatch(4), BNTrain},
	{"episodes", BNLayout{Episodes: 3, Support: 2, Query: 2}, BNTrain},
	{"episode mode", BNLayout{Episodes: 2, Support: 3, Query: 1}, BNEpisode},
	{"transductive", BNLayout{Episodes: 2, Support: 1, Query: 2, Transductive: true}, BNTrain},
	{"no query", BNLayout{Episodes: 2, Support: 2}, BNTrain},
	{"running", BNLayout{Episodes: 2, Support: 1, Query: 2}, BNRunning},
}

// TestBatchNormForward: each episode's images normalized with the moments
// of its statistics images, computed here directly.
func TestBatchNormForward(t *testing.T) {
	const c, p = 3, 5
	for _, l := range bnLayouts {
		b := newBNProblem(c, p, l.lay, 1)
		k, err := NewBatchNorm(c, p)
		if err != nil {
			t.Fatal(err)
		}
		got := b.forward(t, k, l.mode)
		want, _ := refBN(refMaps{l.lay.Images(), 1, p, c, b.x}, l.lay, l.mode, &b.run, b.gamma, b.beta)
		if e := convRelErr(got, want.v); e > 1e-13 {
			t.Errorf("%s: relative error %g", l.name, e)
		}
	}
	// The query of an episode is normalized with its support's moments:
	// a query equal to the support's mean maps to β.
	lay := BNLayout{Episodes: 1, Support: 2, Query: 1}
	b := newBNProblem(1, 1, lay, 2)
	b.x[2] = (b.x[0] + b.x[1]) / 2
	k, _ := NewBatchNorm(1, 1)
	if out := b.forward(t, k, BNTrain); math.Abs(out[2]-b.beta[0]) > 1e-12 {
		t.Errorf("query at the support mean: %g, want β = %g", out[2], b.beta[0])
	}
}

// TestBatchNormGradFD checks the gradients w.r.t. x, γ and β against
// central finite differences in every layout and mode.
func TestBatchNormGradFD(t *testing.T) {
	const c, p = 3, 4
	for _, l := range bnLayouts {
		b := newBNProblem(c, p, l.lay, 3)
		k, _ := NewBatchNorm(c, p)
		b.forward(t, k, l.mode)
		gx, gg, gb := make([]float64, len(b.x)), make([]float64, c), make([]float64, c)
		if err := k.Backward(b.r, b.gamma, gx, gg, gb); err != nil {
			t.Fatal(err)
		}
		loss := func() float64 {
			s := 0.0
			for i, o := range b.forward(t, k, l.mode) {
				s += o * b.r[i]
			}
			return s
		}
		for _, v := range []struct {
			name string
			x, g []float64
		}{{"x", b.x, gx}, {"γ", b.gamma, gg}, {"β", b.beta, gb}} {
			e := convRelErr(v.g, fdGrad(v.x, loss))
			t.Logf("%s: d/d%s relative error %.3g", l.name, v.name, e)
			if e > 1e-7 {
				t.Errorf("%s: d/d%s relative error %g vs finite differences", l.name, v.name, e)
			}
		}
	}
}

// TestBatchNormFold: a training pass folds each episode's moments into the
// running statistics in order, with momentum 0.9, once; episode and
// running passes fold nothing.
func TestBatchNormFold(t *testing.T) {
	const c, p = 2, 3
	lay := BNLayout{Episodes: 3, Support: 2, Query: 1}
	b := newBNProblem(c, p, lay, 4)
	_, moments := refBN(refMaps{lay.Images(), 1, p, c, b.x}, lay, BNTrain, nil, b.gamma, b.beta)
	start := BNStats{slices.Clone(b.run.Mean), slices.Clone(b.run.Var)}
	k, _ := NewBatchNorm(c, p)
	for _, mode := range []BNMode{BNEpisode, BNRunning} {
		b.forward(t, k, mode)
		k.Fold(&b.run)
		if !slices.Equal(b.run.Mean, start.Mean) || !slices.Equal(b.run.Var, start.Var) {
			t.Fatalf("folding a %v pass changed the running statistics", mode)
		}
	}
	b.forward(t, k, BNTrain)
	k.Fold(&b.run)
	k.Fold(&b.run)
	for ch := range c {
		m, v := start.Mean[ch], start.Var[ch]
		for _, e := range moments {
			m = BNMomentum*m + (1-BNMomentum)*e[0][ch]
			v = BNMomentum*v + (1-BNMomentum)*e[1][ch]
		}
		if math.Abs(b.run.Mean[ch]-m) > 1e-14 || math.Abs(b.run.Var[ch]-v) > 1e-14 {
			t.Errorf("channel %d: running (%g, %g), want (%g, %g)", ch, b.run.Mean[ch], b.run.Var[ch], m, v)
		}
	}
	if s := NewBNStats(3); !slices.Equal(s.Mean, []float64{0, 0, 0}) || !slices.Equal(s.Var, []float64{1, 1, 1}) {
		t.Errorf("NewBNStats: %+v", s)
	}
}

func TestBatchNormErrors(t *testing.T) {
	if _, err := NewBatchNorm(0, 3); err == nil {
		t.Error("0 channels: no error")
	}
	lay := BNBatch(2)
	b := newBNProblem(2, 3, lay, 5)
	k, _ := NewBatchNorm(2, 3)
	g := make([]float64, len(b.x))
	if err := k.Backward(b.r, b.gamma, g, b.gamma, b.beta); err == nil {
		t.Error("Backward before Forward: no error")
	}
	out := make([]float64, len(b.x))
	for name, err := range map[string]error{
		"x":          k.Forward(b.x[1:], b.gamma, b.beta, lay, BNTrain, nil, out),
		"out":        k.Forward(b.x, b.gamma, b.beta, lay, BNTrain, nil, out[1:]),
		"γ":          k.Forward(b.x, b.gamma[1:], b.beta, lay, BNTrain, nil, out),
		"running":    k.Forward(b.x, b.gamma, b.beta, lay, BNRunning, nil, out),
		"no support": k.Forward(b.x, b.gamma, b.beta, BNLayout{Episodes: 1, Query: 2}, BNTrain, nil, out),
		"episodes":   k.Forward(b.x, b.gamma, b.beta, BNLayout{Support: 2}, BNTrain, nil, out),
		"negative":   k.Forward(b.x, b.gamma, b.beta, BNLayout{Episodes: 1, Support: 3, Query: -1}, BNTrain, nil, out),
		"mode":       k.Forward(b.x, b.gamma, b.beta, lay, BNMode(-1), nil, out),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Running mode needs no support images; transductive statistics may
	// come from the queries alone.
	for _, c := range []struct {
		lay  BNLayout
		mode BNMode
	}{{BNLayout{Episodes: 1, Query: 2}, BNRunning}, {BNLayout{Episodes: 1, Query: 2, Transductive: true}, BNTrain}} {
		if err := c.lay.Validate(c.mode); err != nil {
			t.Errorf("%+v %v: %v", c.lay, c.mode, err)
		}
	}
	if err := k.Forward(b.x, b.gamma, b.beta, lay, BNTrain, nil, out); err != nil {
		t.Fatal(err)
	}
	if err := k.Backward(b.r[1:], b.gamma, g, b.gamma, b.beta); err == nil {
		t.Error("short output gradient: no error")
	}
}
