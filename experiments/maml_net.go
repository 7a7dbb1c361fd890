package experiments

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
)

// mamlNet describes a fully connected ReLU network in → hidden… → out with a
// linear output, its parameters flat in one []float64: per layer l the
// weights W_l (rows = outputs, row-major) followed by the biases b_l. One
// flat vector makes the inner SGD step, Adam and the Hessian-vector
// products plain loops over a single slice.
type mamlNet struct {
	dims []int // d_0 = in, d_1 … d_L = out
	w, b []int // offsets of W_l and b_l for layer l = 1…L (index 0 unused)
	n    int   // parameter count
}

func newMAMLNet(in int, hidden []int, out int) *mamlNet {
	dims := append(append([]int{in}, hidden...), out)
	L := len(dims) - 1
	m := &mamlNet{dims: dims, w: make([]int, L+1), b: make([]int, L+1)}
	for l := 1; l <= L; l++ {
		m.w[l] = m.n
		m.n += dims[l] * dims[l-1]
		m.b[l] = m.n
		m.n += dims[l]
	}
	return m
}

func (m *mamlNet) layers() int { return len(m.dims) - 1 }

// init draws MAML's reference initialization (Finn et al.'s code for the
// sine experiment): weights from a normal with sd 0.01 truncated at two
// standard deviations (as tf.truncated_normal), biases zero.
func (m *mamlNet) init(theta []float64, rng *rand.Rand) {
	clear(theta)
	for l := 1; l <= m.layers(); l++ {
		for i := m.w[l]; i < m.b[l]; i++ {
			z := rng.NormFloat64()
			for math.Abs(z) > 2 {
				z = rng.NormFloat64()
			}
			theta[i] = 0.01 * z
		}
	}
}

// mamlPass holds one forward and backward pass over n rows: acts[l] (n×d_l) are
// the layer outputs (acts[0] the inputs, hidden layers after the ReLU,
// acts[L] the linear predictions), dels[l] (n×d_l) the loss gradient with
// respect to layer l's pre-activation. A hidden unit is active exactly
// where its output is positive, so the ReLU masks need no storage.
type mamlPass struct {
	n          int
	acts, dels [][]float64
}

func (m *mamlNet) newPass(n int) *mamlPass {
	p := &mamlPass{acts: make([][]float64, len(m.dims)), dels: make([][]float64, len(m.dims))}
	p.resize(m, n)
	return p
}

func (p *mamlPass) resize(m *mamlNet, n int) {
	p.n = n
	m.sizeLayers(p.acts, n, 0)
	m.sizeLayers(p.dels, n, 1)
}

// sizeLayers sizes bufs[l] to n rows of d_l values for the layers l ≥
// from, reusing the storage that is large enough.
func (m *mamlNet) sizeLayers(bufs [][]float64, n, from int) {
	for l := from; l < len(m.dims); l++ {
		if size := n * m.dims[l]; cap(bufs[l]) >= size {
			bufs[l] = bufs[l][:size]
		} else {
			bufs[l] = make([]float64, size)
		}
	}
}

// forward computes the predictions at x (n×d_0, copied into acts[0]) and
// returns them (acts[L], n×d_L).
func (m *mamlNet) forward(theta, x []float64, p *mamlPass) []float64 {
	L := m.layers()
	copy(p.acts[0], x)
	for l := 1; l <= L; l++ {
		in, out := m.dims[l-1], m.dims[l]
		W, b := theta[m.w[l]:m.b[l]], theta[m.b[l]:m.b[l]+out]
		for r := 0; r < p.n; r++ {
			h, a := p.acts[l-1][r*in:(r+1)*in], p.acts[l][r*out:(r+1)*out]
			for o := range a {
				v := b[o] + mamlDot(W[o*in:(o+1)*in], h)
				if l < L && v < 0 {
					v = 0
				}
				a[o] = v
			}
		}
	}
	return p.acts[L]
}

// mamlMSE returns the mean squared error of pred against y and writes its
// gradient with respect to pred into d.
func mamlMSE(pred, y, d []float64) float64 {
	var s float64
	k := 2 / float64(len(pred))
	for i, v := range pred {
		e := v - y[i]
		s += e * e
		d[i] = k * e
	}
	return s / float64(len(pred))
}

// backward propagates dels[L] (set by the caller) through the network run
// by forward at theta, filling dels[1…L-1] and adding the parameter
// gradient to grad.
func (m *mamlNet) backward(theta []float64, p *mamlPass, grad []float64) {
	for l := m.layers(); l >= 1; l-- {
		in, out := m.dims[l-1], m.dims[l]
		W := theta[m.w[l]:m.b[l]]
		gW, gb := grad[m.w[l]:m.b[l]], grad[m.b[l]:m.b[l]+out]
		for r := 0; r < p.n; r++ {
			h, del := p.acts[l-1][r*in:(r+1)*in], p.dels[l][r*out:(r+1)*out]
			for o, d := range del {
				gb[o] += d
				if d != 0 {
					mamlAxpy(d, h, gW[o*in:(o+1)*in])
				}
			}
			if l == 1 {
				continue
			}
			dh := p.dels[l-1][r*in : (r+1)*in]
			clear(dh)
			for o, d := range del {
				if d != 0 {
					mamlAxpy(d, W[o*in:(o+1)*in], dh)
				}
			}
			for i, v := range h { // ReLU: no gradient where the unit is off
				if v <= 0 {
					dh[i] = 0
				}
			}
		}
	}
}

// mamlRPass is the scratch of a Hessian-vector product: the directional
// derivatives (Pearlmutter's R-operator) of the activations and of the
// backpropagated deltas.
type mamlRPass struct {
	racts, rdels [][]float64
}

func (m *mamlNet) newRPass(n int) *mamlRPass {
	q := &mamlRPass{racts: make([][]float64, len(m.dims)), rdels: make([][]float64, len(m.dims))}
	m.sizeLayers(q.racts, n, 1)
	m.sizeLayers(q.rdels, n, 1)
	return q
}

// hvp adds H·v to hv, where H is the Hessian with respect to theta of the
// mean squared error whose forward and backward pass p holds (at theta).
// It is the R-operator (forward-over-reverse) applied to forward and
// backward: R{x} = d/dε x(theta + ε v) at ε = 0. ReLU's second derivative
// vanishes away from its kink, so the masks are constants of the
// derivative, and the MSE's Hessian in the predictions is 2/N·I.
func (m *mamlNet) hvp(theta, v []float64, p *mamlPass, q *mamlRPass, hv []float64) {
	L := m.layers()
	n := p.n
	// Forward: R{a_l} = V_l h_{l-1} + W_l R{h_{l-1}} + c_l, R{h_l} = mask ⊙ R{a_l}
	// (R{h_0} = 0: the inputs do not depend on theta).
	for l := 1; l <= L; l++ {
		in, out := m.dims[l-1], m.dims[l]
		W, V, c := theta[m.w[l]:m.b[l]], v[m.w[l]:m.b[l]], v[m.b[l]:m.b[l]+out]
		for r := 0; r < n; r++ {
			h, ra := p.acts[l-1][r*in:(r+1)*in], q.racts[l][r*out:(r+1)*out]
			for o := range ra {
				s := c[o] + mamlDot(V[o*in:(o+1)*in], h)
				if l > 1 {
					s += mamlDot(W[o*in:(o+1)*in], q.racts[l-1][r*in:(r+1)*in])
				}
				if l < L && p.acts[l][r*out+o] <= 0 {
					s = 0
				}
				ra[o] = s
			}
		}
	}
	// The output delta is 2/N·(f − y); its R is 2/N·R{f}.
	k := 2 / float64(n*m.dims[L])
	for i, v := range q.racts[L] {
		q.rdels[L][i] = k * v
	}
	// Backward: R{dW_l} = R{δ_l} h_{l-1}ᵀ + δ_l R{h_{l-1}}ᵀ, R{db_l} = R{δ_l},
	// R{δ_{l-1}} = mask ⊙ (V_lᵀ δ_l + W_lᵀ R{δ_l}).
	for l := L; l >= 1; l-- {
		in, out := m.dims[l-1], m.dims[l]
		W, V := theta[m.w[l]:m.b[l]], v[m.w[l]:m.b[l]]
		gW, gb := hv[m.w[l]:m.b[l]], hv[m.b[l]:m.b[l]+out]
		for r := 0; r < n; r++ {
			h := p.acts[l-1][r*in : (r+1)*in]
			del, rdel := p.dels[l][r*out:(r+1)*out], q.rdels[l][r*out:(r+1)*out]
			var rh []float64
			if l > 1 {
				rh = q.racts[l-1][r*in : (r+1)*in]
			}
			for o := range rdel {
				gb[o] += rdel[o]
				row := gW[o*in : (o+1)*in]
				if rdel[o] != 0 {
					mamlAxpy(rdel[o], h, row)
				}
				if rh != nil && del[o] != 0 {
					mamlAxpy(del[o], rh, row)
				}
			}
			if l == 1 {
				continue
			}
			rdh := q.rdels[l-1][r*in : (r+1)*in]
			clear(rdh)
			for o := range rdel {
				if del[o] != 0 {
					mamlAxpy(del[o], V[o*in:(o+1)*in], rdh)
				}
				if rdel[o] != 0 {
					mamlAxpy(rdel[o], W[o*in:(o+1)*in], rdh)
				}
			}
			for i, x := range h {
				if x <= 0 {
					rdh[i] = 0
				}
			}
		}
	}
}

// mamlDot is Σ a_i·b_i (len(a) = len(b)) and mamlAxpy adds k·x to y
// (len(x) = len(y)): gonum's assembly kernels, about a quarter faster than
// unrolled Go at these lengths (40), and these loops are most of a step.
func mamlDot(a, b []float64) float64 { return floats.Dot(a, b) }

func mamlAxpy(k float64, x, y []float64) { floats.AddScaled(y, k, x) }

// mamlTaskWork is one worker's scratch for the meta-gradient of a task: the
// parameters after every inner step and the support passes at each of
// them, which the backward sweep through the inner loop needs again.
type mamlTaskWork struct {
	thetas  [][]float64 // θ_0 … θ_K; θ_0 aliases the shared parameters (read only)
	support []*mamlPass // the support pass at θ_j, j < K
	query   *mamlPass
	r       *mamlRPass
	grad    []float64 // inner-step gradient
	hv      []float64
}

func newMAMLTaskWork(net *mamlNet, steps, ns, nq int) *mamlTaskWork {
	w := &mamlTaskWork{thetas: make([][]float64, steps+1), support: make([]*mamlPass, steps),
		query: net.newPass(nq), r: net.newRPass(ns), grad: make([]float64, net.n), hv: make([]float64, net.n)}
	for j := 1; j <= steps; j++ {
		w.thetas[j] = make([]float64, net.n)
	}
	for j := range w.support {
		w.support[j] = net.newPass(ns)
	}
	return w
}

// metaGrad sets g to the gradient with respect to theta of the task's
// meta-loss F(θ) = L_Q(θ_K), θ_{j+1} = θ_j − α∇L_S(θ_j), θ_0 = θ, and
// returns L_Q(θ_K). By the chain rule
//
//	∇F = (I − α H_S(θ_0)) ⋯ (I − α H_S(θ_{K-1})) ∇L_Q(θ_K),
//
// which the backward sweep applies right to left with one Hessian-vector
// product per inner step (the Hessians are symmetric). First-order MAML
// drops the products and returns ∇L_Q(θ_K).
func (w *mamlTaskWork) metaGrad(net *mamlNet, theta, xs, ys, xq, yq []float64, alpha float64, firstOrder bool, g []float64) float64 {
	K, L := len(w.support), net.layers()
	w.thetas[0] = theta
	for j := 0; j < K; j++ {
		p := w.support[j]
		mamlMSE(net.forward(w.thetas[j], xs, p), ys, p.dels[L])
		clear(w.grad)
		net.backward(w.thetas[j], p, w.grad)
		next, cur := w.thetas[j+1], w.thetas[j]
		for i, d := range w.grad {
			next[i] = cur[i] - alpha*d
		}
	}
	loss := mamlMSE(net.forward(w.thetas[K], xq, w.query), yq, w.query.dels[L])
	clear(g)
	net.backward(w.thetas[K], w.query, g)
	if !firstOrder {
		for j := K - 1; j >= 0; j-- {
			clear(w.hv)
			net.hvp(w.thetas[j], g, w.support[j], w.r, w.hv)
			mamlAxpy(-alpha, w.hv, g)
		}
	}
	w.thetas[0] = nil
	return loss
}

// adapt writes into out the parameters after steps SGD steps of rate alpha
// from theta on the support set (xs, ys), using p (resized to the support)
// and grad as scratch.
func (net *mamlNet) adapt(theta, xs, ys []float64, steps int, alpha float64, p *mamlPass, grad, out []float64) {
	copy(out, theta)
	p.resize(net, len(ys)/net.dims[net.layers()])
	L := net.layers()
	for j := 0; j < steps; j++ {
		mamlMSE(net.forward(out, xs, p), ys, p.dels[L])
		clear(grad)
		net.backward(out, p, grad)
		mamlAxpy(-alpha, grad, out)
	}
}
