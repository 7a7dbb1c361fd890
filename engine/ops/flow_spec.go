package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// FlowSpec describes a stack of conditional affine coupling layers (RealNVP
// double coupling, conditioned on a per-task context vector).
//
// Layer k (0-based) splits the Dim coordinates into a first target set A and
// a second target set B: for even k, A = [0, ⌊Dim/2⌋) and B = [⌊Dim/2⌋, Dim);
// for odd k, A = even indices and B = odd indices. Coordinates are never
// permuted, so dimension j of every intermediate ω keeps its meaning. Each
// layer maps x to y by
//
//	y_A = x_A ⊙ exp(s1) + t1,  (s1, t1) = net1(x_B, h)
//	y_B = x_B ⊙ exp(s2) + t2,  (s2, t2) = net2(y_A, h)
//
// where net(x, h): hid = ReLU(W1ᵀx + Wcᵀh + b1), out = W2ᵀhid + b2,
// s = tanh(out[:m]), t = out[m:], m = |target|. Its log|det| is Σs1 + Σs2.
//
// Theta layout: for k = 0..Layers-1, the block of net1 then the block of
// net2; each block is, row-major and contiguous,
//
//	W1 (nIn × Hidden), Wc (Cond × Hidden), b1 (Hidden), W2 (Hidden × 2m), b2 (2m)
//
// with nIn = |other half| and m = |target half|. Row i of W1 weighs the i-th
// coordinate of the other half in increasing index order; columns [0, m) of
// W2 and b2 produce s and columns [m, 2m) produce t, column j of each for
// the j-th coordinate of the target half.
type FlowSpec struct {
	Layers int // K, number of coupling layers (each with two halves)
	Dim    int // d, dimension of ω
	Cond   int // c, dimension of the context vector h
	Hidden int // H, hidden width of each coupling network
}

// Validate reports whether the spec describes a flow the kernels support.
// Layers == 0 is rejected rather than treated as the identity: a model
// without a flow should use ω0 directly with log-det 0 and skip the op.
func (s FlowSpec) Validate() error {
	switch {
	case s.Layers < 1:
		return fmt.Errorf("flow: Layers = %d, want ≥ 1 (without a flow use ω0 itself, log-det 0)", s.Layers)
	case s.Dim < 2:
		return fmt.Errorf("flow: Dim = %d, want ≥ 2 (both coupling halves need a coordinate)", s.Dim)
	case s.Cond < 1:
		return fmt.Errorf("flow: Cond = %d, want ≥ 1", s.Cond)
	case s.Hidden < 1:
		return fmt.Errorf("flow: Hidden = %d, want ≥ 1", s.Hidden)
	}
	return nil
}

// flowHalf locates one coupling network inside theta.
type flowHalf struct {
	nIn, m             int // input width (other half) and target width
	w1, wc, b1, w2, b2 int // offsets into theta
	end                int
}

// flowLayer holds the partition of one layer and its two networks: h[0]
// updates the coordinates in a from those in b, h[1] then updates b from the
// new a. va and vb locate a and b as rows of a feature-major matrix.
type flowLayer struct {
	a, b   []int
	va, vb flowRows
	h      [2]flowHalf
}

func (s FlowSpec) layout() []flowLayer {
	layers := make([]flowLayer, s.Layers)
	off := 0
	half := func(nIn, m int) flowHalf {
		h := flowHalf{nIn: nIn, m: m, w1: off}
		h.wc = h.w1 + nIn*s.Hidden
		h.b1 = h.wc + s.Cond*s.Hidden
		h.w2 = h.b1 + s.Hidden
		h.b2 = h.w2 + s.Hidden*2*m
		h.end = h.b2 + 2*m
		off = h.end
		return h
	}
	for k := range layers {
		var a, b []int
		if k%2 == 0 {
			for j := 0; j < s.Dim; j++ {
				if j < s.Dim/2 {
					a = append(a, j)
				} else {
					b = append(b, j)
				}
			}
		} else {
			for j := 0; j < s.Dim; j++ {
				if j%2 == 0 {
					a = append(a, j)
				} else {
					b = append(b, j)
				}
			}
		}
		l := &layers[k]
		l.a, l.b = a, b
		l.va, l.vb = flowRows{0, 1}, flowRows{len(a), 1}
		if k%2 == 1 {
			l.va, l.vb = flowRows{0, 2}, flowRows{1, 2}
		}
		l.h[0] = half(len(b), len(a))
		l.h[1] = half(len(a), len(b))
	}
	return layers
}

// NumParams returns the length of theta.
func (s FlowSpec) NumParams() int {
	if s.Layers <= 0 {
		return 0
	}
	// Per layer the two halves together hold W1: d·H, Wc: 2·c·H, b1: 2·H,
	// W2: 2·d·H, b2: 2·d.
	return s.Layers * (3*s.Dim*s.Hidden + 2*s.Cond*s.Hidden + 2*s.Hidden + 2*s.Dim)
}

// Init fills theta (len NumParams) for a near-identity start: W1 and Wc are
// He-normal over the joint fan-in nIn+Cond of the hidden pre-activation,
// b1 = 0, W2 ~ N(0, 0.01²) and b2 = 0, so s and t start small. Not exactly
// zero: with W2 = 0 the first Adam steps move every output weight of a
// coupling net in the same direction (the ReLU activations are all ≥ 0, so
// all of ∂L/∂W2's signs agree), t jumps by O(1) within a few steps and the
// sine model never recovered (measured: loss stuck at 4 after 2,000
// iterations, against 0.16 after 1,200 with this init).
func (s FlowSpec) Init(rng *rand.Rand, theta []float64) {
	if len(theta) != s.NumParams() {
		panic(fmt.Sprintf("flow: Init got %d parameters, want %d", len(theta), s.NumParams()))
	}
	for _, l := range s.layout() {
		for _, h := range l.h {
			std := math.Sqrt(2 / float64(h.nIn+s.Cond))
			for i := h.w1; i < h.b1; i++ {
				theta[i] = std * rng.NormFloat64()
			}
			for i := h.b1; i < h.w2; i++ {
				theta[i] = 0
			}
			for i := h.w2; i < h.b2; i++ {
				theta[i] = 0.01 * rng.NormFloat64()
			}
			for i := h.b2; i < h.end; i++ {
				theta[i] = 0
			}
		}
	}
}

// flowRows views the rows of a feature-major D-column matrix that belong to
// one half of a partition: row j of the view is row row0 + j·step.
type flowRows struct{ row0, step int }

func (v flowRows) of(D int) (off, ld int) { return v.row0 * D, v.step * D }

// flowSpecInfo is what a core needs of its kernel's spec.
type flowSpecInfo struct {
	FlowSpec
	layers []flowLayer
	nP     int
	nh     int // halves: 2·Layers
}
