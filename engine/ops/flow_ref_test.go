package ops

import (
	"fmt"
	"math"
	"slices"
)

// The reference side of the flow's tests: an independent float64
// evaluation that needs neither the kernels nor BLAS.

// flowRef evaluates the flow sample by sample straight from the equations in
// the FlowSpec doc, returning the output and, per task, the K+1 steps.
func flowRef(spec FlowSpec, T, D int, omega0, cond, theta []float64) ([]float64, [][][]float64) {
	d, c, H := spec.Dim, spec.Cond, spec.Hidden
	out := make([]float64, T*D*(d+1))
	steps := make([][][]float64, T)
	net := func(hf flowHalf, in, h []float64) (s, t []float64) {
		m := hf.m
		o := make([]float64, 2*m)
		for v := range o {
			o[v] = theta[hf.b2+v]
		}
		for u := 0; u < H; u++ {
			pre := theta[hf.b1+u]
			for i, x := range in {
				pre += x * theta[hf.w1+i*H+u]
			}
			for q, x := range h {
				pre += x * theta[hf.wc+q*H+u]
			}
			if pre <= 0 {
				continue
			}
			for v := range o {
				o[v] += pre * theta[hf.w2+u*2*m+v]
			}
		}
		s = make([]float64, m)
		for j := range s {
			s[j] = math.Tanh(o[j])
		}
		return s, o[m:]
	}
	layers := spec.layout()
	for t := 0; t < T; t++ {
		h := cond[t*c : (t+1)*c]
		steps[t] = make([][]float64, len(layers)+1)
		for k := range steps[t] {
			steps[t][k] = make([]float64, D*d)
		}
		for r := 0; r < D; r++ {
			x := slices.Clone(omega0[(t*D+r)*d : (t*D+r+1)*d])
			copy(steps[t][0][r*d:], x)
			ld := 0.0
			for k, L := range layers {
				couple := func(hf flowHalf, tgt, src []int) {
					in := make([]float64, len(src))
					for j, i := range src {
						in[j] = x[i]
					}
					s, sh := net(hf, in, h)
					for j, i := range tgt {
						x[i] = x[i]*math.Exp(s[j]) + sh[j]
						ld += s[j]
					}
				}
				couple(L.h[0], L.a, L.b)
				couple(L.h[1], L.b, L.a)
				copy(steps[t][k+1][r*d:], x)
			}
			o := out[(t*D+r)*(d+1):]
			copy(o, x)
			o[d] = ld
		}
	}
	return out, steps
}

// flowInverse inverts the flow: given omegaK (T×D×Dim, the first Dim columns
// of a forward output without the log-det column), cond and theta it writes
// the ω0 that the forward maps onto omegaK. It evaluates sample by sample
// without BLAS, so it also serves as an independent check of the kernels.
func flowInverse(spec FlowSpec, T, D int, omegaK, cond, theta, omega0 []float64) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	d, c := spec.Dim, spec.Cond
	switch {
	case len(omegaK) != T*D*d || len(omega0) != T*D*d:
		return fmt.Errorf("flow: omegaK/omega0 have %d/%d values, want %d", len(omegaK), len(omega0), T*D*d)
	case len(cond) != T*c:
		return fmt.Errorf("flow: cond has %d values, want %d", len(cond), T*c)
	case len(theta) != spec.NumParams():
		return fmt.Errorf("flow: theta has %d values, want %d", len(theta), spec.NumParams())
	}
	layers := spec.layout()
	maxM := d - d/2
	in := make([]float64, maxM)
	st := make([]float64, 2*maxM)
	hid := make([]float64, spec.Hidden)
	for t := 0; t < T; t++ {
		h := cond[t*c : (t+1)*c]
		for r := 0; r < D; r++ {
			x := omega0[(t*D+r)*d : (t*D+r+1)*d]
			copy(x, omegaK[(t*D+r)*d:(t*D+r+1)*d])
			for l := len(layers) - 1; l >= 0; l-- {
				L := &layers[l]
				// Undo half 2 (B from A), then half 1 (A from B).
				for i, tgt, src := 1, L.b, L.a; i >= 0; i, tgt, src = i-1, L.a, L.b {
					hf := &L.h[i]
					for j, idx := range src {
						in[j] = x[idx]
					}
					flowNetEval(spec, hf, theta, in[:hf.nIn], h, hid, st[:2*hf.m])
					for j, idx := range tgt {
						x[idx] = (x[idx] - st[hf.m+j]) * math.Exp(-st[j])
					}
				}
			}
		}
	}
	return nil
}

// flowNetEval evaluates one coupling network for a single sample, writing
// s (tanh applied) to st[:m] and t to st[m:].
func flowNetEval(spec FlowSpec, hf *flowHalf, theta, in, h, hid, st []float64) {
	H, m := spec.Hidden, hf.m
	copy(hid, theta[hf.b1:hf.b1+H])
	for q, v := range h {
		w := theta[hf.wc+q*H : hf.wc+(q+1)*H]
		for u := range hid {
			hid[u] += v * w[u]
		}
	}
	for i, v := range in {
		w := theta[hf.w1+i*H : hf.w1+(i+1)*H]
		for u := range hid {
			hid[u] += v * w[u]
		}
	}
	copy(st, theta[hf.b2:hf.b2+2*m])
	for u, v := range hid {
		if v <= 0 {
			continue
		}
		w := theta[hf.w2+u*2*m : hf.w2+(u+1)*2*m]
		for j := range st {
			st[j] += v * w[j]
		}
	}
	for j := 0; j < m; j++ {
		st[j] = math.Tanh(st[j])
	}
}
