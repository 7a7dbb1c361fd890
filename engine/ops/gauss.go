package ops

import (
	"fmt"
	"math"

	"github.com/mkbench/mkbench/internal/task"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var log2Pi = math.Log(2 * math.Pi)

// Reparam draws ω[t,j] = μ[t] + exp(½·logvar[t]) ⊙ ε[t,j]: the D bases of
// task t as reparametrized samples of its spectral distribution q(ω|S,C).
// mu, logvar: (T,d); eps: (T,D,d) standard normal noise.
func Reparam(mu, logvar, eps *G.Node) (*G.Node, error) {
	return reparam(mu, logvar, eps, false)
}

// ScaleShift is Reparam for a z that carries gradient: ω = μ + σ⊙z with z
// the output of a flow run on ε. z may be (T,D,d) or the flow's own output
// (T,D,d+1), whose last column (the log-determinants) it skips: reading the
// flow output in place saves gorgonia's strided slice, whose copy and
// gradient ran through generic iterators and cost ~3 ms per metakernel step.
func ScaleShift(mu, logvar, z *G.Node) (*G.Node, error) {
	return reparam(mu, logvar, z, true)
}

func reparam(mu, logvar, eps *G.Node, diffEps bool) (*G.Node, error) {
	var sd []float64
	return newKernelOp(kernelOp{
		name: "reparam", inDims: []int{2, 2, 3}, outDims: 3, diff: []bool{true, true, diffEps},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			d := s[0][1]
			if !s[0].Eq(s[1]) || s[2][0] != s[0][0] || !(s[2][2] == d || diffEps && s[2][2] == d+1) {
				return nil, fmt.Errorf("mu %v, logvar %v and eps %v do not match", s[0], s[1], s[2])
			}
			return tensor.Shape{s[2][0], s[2][1], d}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			mu, lv, eps := in[0], in[1], in[2]
			T, D, d, ld := s[2][0], s[2][1], s[0][1], s[2][2]
			sd = task.Grow(sd, d)
			for t := 0; t < T; t++ {
				m := mu[t*d : (t+1)*d]
				for k := range sd {
					sd[k] = math.Exp(0.5 * lv[t*d+k])
				}
				for j := 0; j < D; j++ {
					o, e := out[(t*D+j)*d:(t*D+j+1)*d], eps[(t*D+j)*ld:(t*D+j)*ld+d]
					o, e, sd := o[:len(m)], e[:len(m)], sd[:len(m)] // no bounds checks in the loop
					for k, mk := range m {
						o[k] = mk + sd[k]*e[k]
					}
				}
			}
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			// gr arrives zeroed; both gradients are sums over the D samples.
			lv, eps := in[1], in[2]
			T, D, d, ld := s[2][0], s[2][1], s[0][1], s[2][2]
			for t := 0; t < T; t++ {
				gm, gl := gr[0][t*d:(t+1)*d], gr[1][t*d:(t+1)*d]
				for j := 0; j < D; j++ {
					gj, ej := g[(t*D+j)*d:(t*D+j+1)*d], eps[(t*D+j)*ld:(t*D+j)*ld+d]
					gj, ej, gl := gj[:len(gm)], ej[:len(gm)], gl[:len(gm)] // no bounds checks below
					for k, gk := range gj {
						gm[k] += gk
						gl[k] += gk * ej[k]
					}
				}
				for k := range gl {
					gl[k] *= 0.5 * math.Exp(0.5*lv[t*d+k])
				}
				if gr[2] == nil {
					continue
				}
				for k := range sd {
					sd[k] = math.Exp(0.5 * lv[t*d+k])
				}
				for j := 0; j < D; j++ {
					ge, gj := gr[2][(t*D+j)*ld:(t*D+j)*ld+d], g[(t*D+j)*d:(t*D+j+1)*d]
					ge, gj = ge[:len(sd)], gj[:len(sd)]
					for k, sk := range sd {
						ge[k] = gj[k] * sk
					}
				}
			}
		},
	}).apply(mu, logvar, eps)
}

// FlowLogDetMean is the mean over the D bases of the log-determinant column
// of a flow output (T,D,d+1): (T). See ScaleShift for why not a slice.
func FlowLogDetMean(out *G.Node) (*G.Node, error) {
	return newKernelOp(kernelOp{
		name: "flowLogDetMean", inDims: []int{3}, outDims: 1, diff: []bool{true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			if s[0][2] < 2 {
				return nil, fmt.Errorf("flow output %v has no log-determinant column", s[0])
			}
			return tensor.Shape{s[0][0]}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			T, D, w := s[0][0], s[0][1], s[0][2]
			for t := 0; t < T; t++ {
				var sum float64
				for j := 0; j < D; j++ {
					sum += in[0][(t*D+j)*w+w-1]
				}
				out[t] = sum / float64(D)
			}
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			T, D, w := s[0][0], s[0][1], s[0][2]
			for t := 0; t < T; t++ {
				for j := 0; j < D; j++ {
					gr[0][(t*D+j)*w+w-1] = g[t] / float64(D)
				}
			}
		},
	}).apply(out)
}

// GaussKL returns KL(N(μq, e^lvq) ‖ N(μp[i], e^lvp[i])) for every query
// point i of every task: the closed form used when q has no flow.
// mq, lq: (T,d); mp, lp: (T,m,d) → (T,m).
func GaussKL(mq, lq, mp, lp *G.Node) (*G.Node, error) {
	// The exponentials dominate: e^lvq is one per task and dimension, and
	// e^-lvp is kept from the forward run for the backward, which the
	// kernelOp always runs after a forward on the same inputs.
	var vq, ip []float64
	exps := func(lq, lp []float64) {
		vq, ip = task.Grow(vq, len(lq)), task.Grow(ip, len(lp))
		for i, v := range lq {
			vq[i] = math.Exp(v)
		}
		for i, v := range lp {
			ip[i] = math.Exp(-v)
		}
	}
	return newKernelOp(kernelOp{
		name: "gausskl", inDims: []int{2, 2, 3, 3}, outDims: 2, diff: []bool{true, true, true, true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			if !s[0].Eq(s[1]) || !s[2].Eq(s[3]) || s[2][0] != s[0][0] || s[2][2] != s[0][1] {
				return nil, fmt.Errorf("posterior %v/%v and prior %v/%v do not match", s[0], s[1], s[2], s[3])
			}
			return tensor.Shape{s[2][0], s[2][1]}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			mq, lq, mp, lp := in[0], in[1], in[2], in[3]
			T, m, d := s[2][0], s[2][1], s[2][2]
			exps(lq, lp)
			for t := 0; t < T; t++ {
				mqt, lqt, vqt := mq[t*d:(t+1)*d], lq[t*d:(t+1)*d], vq[t*d:(t+1)*d]
				for i := 0; i < m; i++ {
					p := (t*m + i) * d
					mpi, lpi, ipi := mp[p:p+d], lp[p:p+d], ip[p:p+d]
					var kl float64
					for k := range mpi {
						dm := mqt[k] - mpi[k]
						kl += lpi[k] - lqt[k] + (vqt[k]+dm*dm)*ipi[k] - 1
					}
					out[t*m+i] = 0.5 * kl
				}
			}
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			mq, mp := in[0], in[2]
			T, m, d := s[2][0], s[2][1], s[2][2]
			if len(vq) != len(in[1]) || len(ip) != len(in[3]) {
				exps(in[1], in[3])
			}
			for t := 0; t < T; t++ {
				mqt, vqt := mq[t*d:(t+1)*d], vq[t*d:(t+1)*d]
				g0, g1 := gr[0][t*d:(t+1)*d], gr[1][t*d:(t+1)*d]
				for i := 0; i < m; i++ {
					gi := g[t*m+i]
					p := (t*m + i) * d
					mpi, ipi := mp[p:p+d], ip[p:p+d]
					g2, g3 := gr[2][p:p+d], gr[3][p:p+d]
					for k := range mpi {
						dm := mqt[k] - mpi[k]
						a := gi * dm * ipi[k]
						g0[k] += a
						g1[k] += gi * 0.5 * (vqt[k]*ipi[k] - 1)
						g2[k] = -a
						g3[k] = gi * 0.5 * (1 - (vqt[k]+dm*dm)*ipi[k])
					}
				}
			}
		},
	}).apply(mq, lq, mp, lp)
}

// GaussLogDensity returns (1/D)·Σ_j log N(ω[t,j]; μ[t,i], e^lv[t,i]) for
// every query point i: the Monte Carlo estimate of E_q[log p(ω|x_i,S)] over
// the task's D flowed bases. omega: (T,D,d); mu, lv: (T,m,d) → (T,m).
// It expands the square so the cost is O(D·d + m·d) per task, not O(D·m·d).
func GaussLogDensity(omega, mu, lv *G.Node) (*G.Node, error) {
	var s1, s2 []float64 // per-task column sums of ω and ω², reused by bwd
	return newKernelOp(kernelOp{
		name: "gausslogdensity", inDims: []int{3, 3, 3}, outDims: 2, diff: []bool{true, true, true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) {
			if !s[1].Eq(s[2]) || s[0][0] != s[1][0] || s[0][2] != s[1][2] {
				return nil, fmt.Errorf("omega %v and prior %v/%v do not match", s[0], s[1], s[2])
			}
			return tensor.Shape{s[1][0], s[1][1]}, nil
		},
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			w, mu, lv := in[0], in[1], in[2]
			T, D, d, m := s[0][0], s[0][1], s[0][2], s[1][1]
			s1, s2 = task.Grow(s1, T*d), task.Grow(s2, T*d)
			clear(s1)
			clear(s2)
			for t := 0; t < T; t++ {
				a, b := s1[t*d:(t+1)*d], s2[t*d:(t+1)*d]
				for j := 0; j < D; j++ {
					row := w[(t*D+j)*d : (t*D+j+1)*d]
					for k, x := range row {
						a[k] += x
						b[k] += x * x
					}
				}
				inv := 1 / float64(D)
				for i := 0; i < m; i++ {
					var l float64
					for k := 0; k < d; k++ {
						p := (t*m+i)*d + k
						sq := b[k]*inv - 2*mu[p]*a[k]*inv + mu[p]*mu[p]
						l += sq*math.Exp(-lv[p]) + lv[p] + log2Pi
					}
					out[t*m+i] = -0.5 * l
				}
			}
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			w, mu, lv := in[0], in[1], in[2]
			T, D, d, m := s[0][0], s[0][1], s[0][2], s[1][1]
			inv := 1 / float64(D)
			gi := make([]float64, d) // Σ_i g_i e^{-lv_ik}
			gm := make([]float64, d) // Σ_i g_i μ_ik e^{-lv_ik}
			for t := 0; t < T; t++ {
				a, b := s1[t*d:(t+1)*d], s2[t*d:(t+1)*d]
				clear(gi)
				clear(gm)
				for i := 0; i < m; i++ {
					g0 := g[t*m+i]
					for k := 0; k < d; k++ {
						p := (t*m+i)*d + k
						ip := math.Exp(-lv[p])
						gi[k] += g0 * ip
						gm[k] += g0 * mu[p] * ip
						gr[1][p] = g0 * (a[k]*inv - mu[p]) * ip
						sq := b[k]*inv - 2*mu[p]*a[k]*inv + mu[p]*mu[p]
						gr[2][p] = -0.5 * g0 * (1 - sq*ip)
					}
				}
				for j := 0; j < D; j++ {
					o := (t*D + j) * d
					for k := 0; k < d; k++ {
						gr[0][o+k] = -inv * (w[o+k]*gi[k] - gm[k])
					}
				}
			}
		},
	}).apply(omega, mu, lv)
}

// Bandwidth returns the RBF bandwidth of every task: the mean pairwise
// distance of its support features (the paper's heuristic). The bandwidth
// is a function of the features, so the gradient flows through it: treating
// it as a constant biases the embedding's gradient (the whole-model
// finite-difference test catches that). feats: (T,n,f) → (T).
func Bandwidth(feats *G.Node) (*G.Node, error) {
	return newKernelOp(kernelOp{
		name: "bandwidth", inDims: []int{3}, outDims: 1, diff: []bool{true},
		shape: func(s []tensor.Shape) (tensor.Shape, error) { return tensor.Shape{s[0][0]}, nil },
		fwd: func(in [][]float64, s []tensor.Shape, out []float64) {
			MeanPairwiseDistance(in[0], s[0][0], s[0][1], s[0][2], out)
		},
		bwd: func(in [][]float64, s []tensor.Shape, out, g []float64, gr [][]float64) {
			x, dx := in[0], gr[0]
			T, n, f := s[0][0], s[0][1], s[0][2]
			if n < 2 {
				return // the bandwidth is the constant 1
			}
			pairs := float64(n * (n - 1) / 2)
			for t := 0; t < T; t++ {
				xt, dt := x[t*n*f:(t+1)*n*f], dx[t*n*f:(t+1)*n*f]
				var sum float64
				for i := 0; i < n; i++ {
					for j := i + 1; j < n; j++ {
						sum += dist(xt[i*f:(i+1)*f], xt[j*f:(j+1)*f])
					}
				}
				if sum == 0 {
					continue // all points equal: the fallback constant 1
				}
				c := g[t] / pairs
				for i := 0; i < n; i++ {
					for j := i + 1; j < n; j++ {
						xi, xj := xt[i*f:(i+1)*f], xt[j*f:(j+1)*f]
						d := dist(xi, xj)
						if d == 0 {
							continue
						}
						for k := range xi {
							v := c * (xi[k] - xj[k]) / d
							dt[i*f+k] += v
							dt[j*f+k] -= v
						}
					}
				}
			}
		},
	}).apply(feats)
}

func dist(a, b []float64) float64 {
	var s float64
	for k := range a {
		d := a[k] - b[k]
		s += d * d
	}
	return math.Sqrt(s)
}
