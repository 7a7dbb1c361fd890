package ops

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// attRandom draws q and k with every |q_il − k_jl| at least 1e-3, so that
// finite differences with h = 1e-6 never cross the kink of |·|.
func attRandom(rng *rand.Rand, d attDims, scale float64) (q, k []float64) {
	q = miscNormals(rng, d.T*d.m*d.f, scale)
	k = miscNormals(rng, d.T*d.n*d.f, scale)
	for t := range d.T {
		for i := range d.m {
			for l := range d.f {
				qi := &q[(t*d.m+i)*d.f+l]
				for attNearKey(*qi, k, t, l, d) {
					*qi = scale * rng.NormFloat64()
				}
			}
		}
	}
	return q, k
}

func attNearKey(v float64, k []float64, t, l int, d attDims) bool {
	for j := range d.n {
		if math.Abs(v-k[(t*d.n+j)*d.f+l]) < 1e-3*max(1, math.Abs(v)) {
			return true
		}
	}
	return false
}

// attDirect is an independent, deliberately naive implementation.
func attDirect(q, k []float64, d attDims) []float64 {
	out := make([]float64, d.T*d.m*d.f)
	for t := range d.T {
		for i := range d.m {
			w := make([]float64, d.n)
			var sum float64
			for j := range d.n {
				var dist float64
				for l := range d.f {
					dist += math.Abs(q[(t*d.m+i)*d.f+l] - k[(t*d.n+j)*d.f+l])
				}
				w[j] = math.Exp(-dist / math.Sqrt(float64(d.f)))
				sum += w[j]
			}
			for j := range d.n {
				for l := range d.f {
					out[(t*d.m+i)*d.f+l] += w[j] / sum * k[(t*d.n+j)*d.f+l]
				}
			}
		}
	}
	return out
}

func TestAttentionForwardMatchesDirect(t *testing.T) {
	for _, d := range []attDims{{1, 1, 1, 1}, {2, 3, 4, 5}, {3, 7, 5, 16}} {
		q, k := attRandom(miscRNG(10), d, 1)
		out := make([]float64, d.T*d.m*d.f)
		w := make([]float64, d.T*d.m*d.n)
		attForward(nil, out, w, q, k, d)
		miscCompare(t, "out", out, attDirect(q, k, d), 1e-13)
		for r := range d.T * d.m {
			var s float64
			for _, v := range w[r*d.n : (r+1)*d.n] {
				s += v
			}
			if math.Abs(s-1) > 1e-14 {
				t.Fatalf("weights of row %d sum to %v", r, s)
			}
		}
	}
}

func TestAttentionStableForFarKeys(t *testing.T) {
	// Distances of ~1e5: a naive softmax underflows to 0/0 = NaN.
	d := attDims{T: 1, m: 2, n: 3, f: 4}
	q, k := attRandom(miscRNG(11), d, 1)
	for i := range q {
		q[i] += 1e5
	}
	out := make([]float64, d.T*d.m*d.f)
	w := make([]float64, d.T*d.m*d.n)
	attForward(nil, out, w, q, k, d)
	for i, v := range out {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("out[%d] = %v", i, v)
		}
	}
	dq := make([]float64, len(q))
	dk := make([]float64, len(k))
	attBackward(nil, dq, dk, q, k, w, miscNormals(miscRNG(12), len(out), 1), make([]float64, d.T*d.n), d)
	for i, v := range append(dq, dk...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("gradient[%d] = %v", i, v)
		}
	}
}

func TestAttentionKernelGradFD(t *testing.T) {
	for _, d := range []attDims{{1, 1, 1, 1}, {1, 1, 3, 2}, {2, 3, 4, 5}, {3, 6, 5, 8}} {
		rng := miscRNG(13)
		q, k := attRandom(rng, d, 1)
		r := miscNormals(rng, d.T*d.m*d.f, 1)
		out := make([]float64, len(r))
		w := make([]float64, d.T*d.m*d.n)
		loss := func() float64 {
			attForward(nil, out, w, q, k, d)
			return miscDot(out, r)
		}
		loss()
		dq := make([]float64, len(q))
		dk := make([]float64, len(k))
		scratch := make([]float64, d.T*d.n)
		attBackward(nil, dq, dk, q, k, w, r, scratch, d)
		miscCompare(t, "dq", dq, fdGrad(q, loss), 1e-7)
		miscCompare(t, "dk", dk, fdGrad(k, loss), 1e-7)
	}
}

func TestAttentionSubgradientAtZero(t *testing.T) {
	// q equal to a key in one coordinate: that coordinate contributes no
	// distance gradient (subgradient 0), only the value path.
	d := attDims{T: 1, m: 1, n: 1, f: 1}
	q, k := []float64{0.5}, []float64{0.5}
	out := make([]float64, 1)
	w := make([]float64, 1)
	attForward(nil, out, w, q, k, d)
	dq, dk := make([]float64, 1), make([]float64, 1)
	attBackward(nil, dq, dk, q, k, w, []float64{2}, make([]float64, 1), d)
	if dq[0] != 0 || dk[0] != 2 {
		t.Fatalf("dq = %v, dk = %v; want 0, 2", dq[0], dk[0])
	}
}

func attGraph(t testing.TB, seed uint64, d attDims) *miscGraph {
	rng := miscRNG(seed)
	q, k := attRandom(rng, d, 1)
	vals := []*tensor.Dense{
		miscDense(tensor.Shape{d.T, d.m, d.f}, q),
		miscDense(tensor.Shape{d.T, d.n, d.f}, k),
	}
	return newMiscGraph(t, rng, []string{"q", "k"}, vals, 2, func(in []*gorgonia.Node) (*gorgonia.Node, error) {
		return LaplaceAttention(nil, in[0], in[1])
	})
}

func TestAttentionGraphGradFD(t *testing.T) {
	m := attGraph(t, 14, attDims{T: 3, m: 4, n: 3, f: 5})
	defer m.vm.Close()
	if s := m.out.Shape(); !s.Eq(tensor.Shape{3, 4, 5}) {
		t.Fatalf("output shape %v", s)
	}
	m.checkFD(t, 1e-7)
	// New inputs: the jointly computed gradients must be refreshed, not
	// served from the previous run.
	q := m.vals[0].Float64s()
	for i := range q {
		q[i] = -q[i]
	}
	m.checkFD(t, 1e-7)
}

func TestAttentionDeterministicAcrossProcs(t *testing.T) {
	// Large enough to pass parallelMinWork.
	d := attDims{T: 6, m: 75, n: 5, f: 256}
	miscGraphBitIdentical(t, func() *miscGraph { return attGraph(t, 15, d) })
}

func TestAttentionShapeErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	ten := func(dt tensor.Dtype, shape ...int) *gorgonia.Node {
		return gorgonia.NewTensor(g, dt, len(shape), gorgonia.WithShape(shape...))
	}
	q := ten(tensor.Float64, 2, 3, 4)
	k := ten(tensor.Float64, 2, 5, 4)
	if out, err := LaplaceAttention(nil, q, k); err != nil || !out.Shape().Eq(tensor.Shape{2, 3, 4}) {
		t.Fatalf("valid shapes: %v, %v", out, err)
	}
	for _, tc := range []struct {
		name string
		q, k *gorgonia.Node
		want string
	}{
		{"nil k", q, nil, "k is nil"},
		{"q 2-d", ten(tensor.Float64, 3, 4), k, "q must be 3-d"},
		{"float32", q, ten(tensor.Float32, 2, 5, 4), "float64"},
		{"T mismatch", ten(tensor.Float64, 1, 3, 4), k, "want q (T,m,f)"},
		{"f mismatch", q, ten(tensor.Float64, 2, 5, 3), "want q (T,m,f)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LaplaceAttention(nil, tc.q, tc.k)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// BenchmarkLaplaceAttention times forward plus both backward ops, as the
// tape machine runs them, at the sine (prior over 5 support points) and
// 5-way classification sizes.
func BenchmarkLaplaceAttention(b *testing.B) {
	for _, bc := range []struct {
		name string
		d    attDims
	}{
		{"T25_m10_n5_f40", attDims{T: 25, m: 10, n: 5, f: 40}},
		{"T6_m75_n5_f256", attDims{T: 6, m: 75, n: 5, f: 256}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := bc.d
			q, k := attRandom(miscRNG(16), d, 1)
			qv := miscDense(tensor.Shape{d.T, d.m, d.f}, q)
			kv := miscDense(tensor.Shape{d.T, d.n, d.f}, k)
			gv := miscDense(tensor.Shape{d.T, d.m, d.f}, miscNormals(miscRNG(17), d.T*d.m*d.f, 1))
			st, sh := &attState{}, &attGradShared{}
			fwd := &attOp{st: st}
			gq := &attGradOp{wrtInput: wrtInput{arity: 4, wrt: 0}, st: st, sh: sh}
			gk := &attGradOp{wrtInput: wrtInput{arity: 4, wrt: 1}, st: st, sh: sh}
			out, err := fwd.Do(qv, kv)
			if err != nil {
				b.Fatal(err)
			}
			dq, _ := gq.Do(qv, kv, out, gv)
			dk, _ := gk.Do(qv, kv, out, gv)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := fwd.UsePreallocDo(out, qv, kv); err != nil {
					b.Fatal(err)
				}
				if _, err := gq.UsePreallocDo(dq, qv, kv, out, gv); err != nil {
					b.Fatal(err)
				}
				if _, err := gk.UsePreallocDo(dk, qv, kv, out, gv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
