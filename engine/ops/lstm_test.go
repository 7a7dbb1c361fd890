package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func lstmRandSlice(rng *rand.Rand, n int, scale float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = (2*rng.Float64() - 1) * scale
	}
	return s
}

// lstmCheckGrad compares an analytic gradient with a finite-difference one:
// each entry must agree to 1e-6 relative to max(1, |fd|).
func lstmCheckGrad(t *testing.T, name string, got, fd []float64) {
	t.Helper()
	if len(got) != len(fd) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(fd))
	}
	worst := 0.0
	for i := range got {
		e := math.Abs(got[i]-fd[i]) / math.Max(1, math.Abs(fd[i]))
		if e > worst {
			worst = e
		}
		if e > 1e-6 || math.IsNaN(got[i]) {
			t.Errorf("%s[%d]: analytic %.12g, finite difference %.12g", name, i, got[i], fd[i])
			return
		}
	}
	t.Logf("%s: worst relative error %.2g", name, worst)
}

func lstmDot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// lstmProblem is one LSTM direction with the loss Σ H⊙R.
type lstmProblem struct {
	T, in, hid      int
	reverse         bool
	x, w, b, h0, c0 []float64
	r               []float64
	cache           LSTMCache // scratch for loss evaluations
	hbuf            []float64
}

func newLSTMProblem(seed uint64, T, in, hid int, reverse bool) *lstmProblem {
	rng := rand.New(rand.NewPCG(seed, 0))
	p := &lstmProblem{T: T, in: in, hid: hid, reverse: reverse}
	p.w = make([]float64, (in+hid)*4*hid)
	p.b = make([]float64, 4*hid)
	InitLSTM(rng, in, hid, p.w, p.b)
	// Larger weights than InitLSTM's push gates away from their linear
	// regime so the check exercises the nonlinearities.
	for i := range p.w {
		p.w[i] *= 3
	}
	p.x = lstmRandSlice(rng, T*in, 1)
	p.h0 = lstmRandSlice(rng, hid, 0.5)
	p.c0 = lstmRandSlice(rng, hid, 1)
	p.r = lstmRandSlice(rng, T*hid, 1)
	p.hbuf = make([]float64, T*hid)
	return p
}

func (p *lstmProblem) loss() float64 {
	LSTMForward(&p.cache, p.x, p.w, p.b, p.h0, p.c0, p.T, p.in, p.hid, p.reverse, p.hbuf)
	return lstmDot(p.hbuf, p.r)
}

func (p *lstmProblem) grads() (dx, dw, db []float64) {
	var cache LSTMCache
	h := make([]float64, p.T*p.hid)
	LSTMForward(&cache, p.x, p.w, p.b, p.h0, p.c0, p.T, p.in, p.hid, p.reverse, h)
	dx = make([]float64, len(p.x))
	dw = make([]float64, len(p.w))
	db = make([]float64, len(p.b))
	LSTMBackward(&cache, p.x, p.w, p.r, dx, dw, db)
	return dx, dw, db
}

var lstmSizes = []struct{ T, in, hid int }{
	{1, 1, 1},
	{1, 3, 2},
	{4, 3, 5},
	{7, 2, 3},
}

func TestLSTMKernelGradFD(t *testing.T) {
	for i, sz := range lstmSizes {
		for _, rev := range []bool{false, true} {
			t.Run(fmt.Sprintf("T%d_in%d_hid%d_rev%t", sz.T, sz.in, sz.hid, rev), func(t *testing.T) {
				p := newLSTMProblem(uint64(10+i), sz.T, sz.in, sz.hid, rev)
				dx, dw, db := p.grads()
				lstmCheckGrad(t, "dx", dx, fdGrad(p.x, p.loss))
				lstmCheckGrad(t, "dw", dw, fdGrad(p.w, p.loss))
				lstmCheckGrad(t, "db", db, fdGrad(p.b, p.loss))
			})
		}
	}
}

// TestLSTMKernelSingleStep checks the gate layout and cell equations against
// a direct evaluation of one step.
func TestLSTMKernelSingleStep(t *testing.T) {
	p := newLSTMProblem(3, 1, 2, 3, false)
	h := make([]float64, p.hid)
	var cache LSTMCache
	LSTMForward(&cache, p.x, p.w, p.b, p.h0, p.c0, 1, p.in, p.hid, false, h)
	g4 := 4 * p.hid
	xh := append(append([]float64{}, p.x...), p.h0...)
	for j := 0; j < p.hid; j++ {
		var z [4]float64
		for q := 0; q < 4; q++ {
			k := q*p.hid + j
			z[q] = p.b[k]
			for r, v := range xh {
				z[q] += v * p.w[r*g4+k]
			}
		}
		sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
		c := sig(z[1])*p.c0[j] + sig(z[0])*math.Tanh(z[2])
		want := sig(z[3]) * math.Tanh(c)
		if math.Abs(h[j]-want) > 1e-14 || math.Abs(cache.cLast[j]-c) > 1e-14 {
			t.Errorf("unit %d: h %g c %g, want h %g c %g", j, h[j], cache.cLast[j], want, c)
		}
	}
}

func lstmFlipRows(a []float64, T int) []float64 {
	n := len(a) / T
	out := make([]float64, len(a))
	for t := 0; t < T; t++ {
		copy(out[t*n:(t+1)*n], a[(T-1-t)*n:(T-t)*n])
	}
	return out
}

func lstmMaxDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func TestLSTMReverseEqualsFlippedForward(t *testing.T) {
	rp := newLSTMProblem(21, 6, 4, 5, true)
	fp := newLSTMProblem(21, 6, 4, 5, false)
	fp.x = lstmFlipRows(rp.x, rp.T)
	fp.r = lstmFlipRows(rp.r, rp.T)

	rp.loss()
	fp.loss()
	if d := lstmMaxDiff(rp.hbuf, lstmFlipRows(fp.hbuf, fp.T)); d != 0 {
		t.Errorf("H differs by %g", d)
	}
	rh, rc := rp.cache.FinalState()
	fh, fc := fp.cache.FinalState()
	if lstmMaxDiff(rh, fh) != 0 || lstmMaxDiff(rc, fc) != 0 {
		t.Errorf("final states differ")
	}

	rdx, rdw, rdb := rp.grads()
	fdx, fdw, fdb := fp.grads()
	// dW and db sum over rows in index order, which the flip reverses.
	for _, c := range []struct {
		name string
		a, b []float64
	}{{"dx", rdx, lstmFlipRows(fdx, fp.T)}, {"dw", rdw, fdw}, {"db", rdb, fdb}} {
		if d := lstmMaxDiff(c.a, c.b); d > 1e-13 {
			t.Errorf("%s differs by %g", c.name, d)
		}
	}
}

func TestLSTMFinalStateChaining(t *testing.T) {
	for _, rev := range []bool{false, true} {
		t.Run(fmt.Sprintf("rev%t", rev), func(t *testing.T) {
			const T1, T2, in, hid = 3, 5, 4, 6
			p := newLSTMProblem(31, T1+T2, in, hid, rev)
			whole := make([]float64, (T1+T2)*hid)
			var cache LSTMCache
			LSTMForward(&cache, p.x, p.w, p.b, p.h0, p.c0, T1+T2, in, hid, rev, whole)
			wantH, wantC := cache.FinalState()

			x1, x2 := p.x[:T1*in], p.x[T1*in:]
			first, second := x1, x2
			n1, n2 := T1, T2
			if rev {
				// A reverse pass over [x1; x2] consumes x2 first.
				first, second, n1, n2 = x2, x1, T2, T1
			}
			h1 := make([]float64, n1*hid)
			h2 := make([]float64, n2*hid)
			LSTMForward(&cache, first, p.w, p.b, p.h0, p.c0, n1, in, hid, rev, h1)
			hc, cc := cache.FinalState()
			LSTMForward(&cache, second, p.w, p.b, hc, cc, n2, in, hid, rev, h2)
			gotH, gotC := cache.FinalState()
			got := append(append([]float64{}, h1...), h2...)
			if rev {
				got = append(append([]float64{}, h2...), h1...)
			}
			if d := lstmMaxDiff(got, whole); d > 1e-14 {
				t.Errorf("chained H differs from the single run by %g", d)
			}
			if lstmMaxDiff(gotH, wantH) > 1e-14 || lstmMaxDiff(gotC, wantC) > 1e-14 {
				t.Errorf("chained final state differs")
			}
		})
	}
}

func TestLSTMKernelNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	p := newLSTMProblem(5, 25, 40, 40, false)
	dx, dw, db := make([]float64, len(p.x)), make([]float64, len(p.w)), make([]float64, len(p.b))
	var cache LSTMCache
	allocs := testing.AllocsPerRun(20, func() {
		LSTMForward(&cache, p.x, p.w, p.b, p.h0, p.c0, p.T, p.in, p.hid, false, p.hbuf)
		LSTMBackward(&cache, p.x, p.w, p.r, dx, dw, db)
	})
	if allocs != 0 {
		t.Errorf("forward+backward allocates %v times per call, want 0", allocs)
	}
}

func TestInitLSTM(t *testing.T) {
	const in, hid = 7, 16
	w := make([]float64, (in+hid)*4*hid)
	b := make([]float64, 4*hid)
	InitLSTM(rand.New(rand.NewPCG(1, 0)), in, hid, w, b)
	k := 1 / math.Sqrt(hid)
	for i, v := range w {
		if math.Abs(v) > k {
			t.Fatalf("w[%d]=%g outside ±%g", i, v, k)
		}
	}
	for i, v := range b {
		if i >= hid && i < 2*hid {
			if v != 1 {
				t.Fatalf("forget bias b[%d]=%g, want 1", i, v)
			}
		} else if math.Abs(v) > k {
			t.Fatalf("b[%d]=%g outside ±%g", i, v, k)
		}
	}
}
