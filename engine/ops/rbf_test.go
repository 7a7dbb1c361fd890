package ops

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// rbfDirect is the textbook kernel, computed from explicit differences.
func rbfDirect(a, b, bw []float64, T, n, m, f int) []float64 {
	k := make([]float64, T*n*m)
	for t := range T {
		for i := range n {
			for j := range m {
				d2 := 0.0
				for l := range f {
					d := a[(t*n+i)*f+l] - b[(t*m+j)*f+l]
					d2 += d * d
				}
				k[(t*n+i)*m+j] = math.Exp(-d2 / (2 * bw[t] * bw[t]))
			}
		}
	}
	return k
}

func rbfRandBW(T int, seed uint64) []float64 {
	rng := krrRNG(seed)
	bw := make([]float64, T)
	for t := range bw {
		bw[t] = 1.5 + rng.Float64()
	}
	return bw
}

func TestRBFKernelForward(t *testing.T) {
	for _, tc := range []struct {
		T, n, m, f int
		same       bool
	}{{1, 1, 1, 1, false}, {3, 4, 6, 5, false}, {25, 5, 10, 40, false}, {2, 7, 7, 3, true}, {4, 20, 20, 40, true}} {
		t.Run(fmt.Sprintf("T%dn%dm%df%d-same%v", tc.T, tc.n, tc.m, tc.f, tc.same), func(t *testing.T) {
			rng := krrRNG(11)
			a := krrRandn(rng, tc.T*tc.n*tc.f)
			b := krrRandn(rng, tc.T*tc.m*tc.f)
			if tc.same {
				b = a
			}
			bw := rbfRandBW(tc.T, 12)
			k := make([]float64, tc.T*tc.n*tc.m)
			rbfForward(nil, a, b, bw, tc.T, tc.n, tc.m, tc.f, tc.same, k, make([]float64, tc.T*(tc.n+tc.m)))
			want := rbfDirect(a, b, bw, tc.T, tc.n, tc.m, tc.f)
			for i := range k {
				if math.Abs(k[i]-want[i]) > 1e-12 {
					t.Fatalf("K[%d] = %.17g, want %.17g", i, k[i], want[i])
				}
			}
			if tc.same {
				n := tc.n
				for ti := range tc.T {
					for i := range n {
						if k[ti*n*n+i*n+i] != 1 {
							t.Fatalf("task %d: diagonal %d is %.17g, want exactly 1", ti, i, k[ti*n*n+i*n+i])
						}
						for j := range n {
							if k[ti*n*n+i*n+j] != k[ti*n*n+j*n+i] {
								t.Fatalf("task %d: K not exactly symmetric at (%d,%d)", ti, i, j)
							}
						}
					}
				}
			}
		})
	}
}

func TestRBFKernelGradFD(t *testing.T) {
	const T, n, m, f = 2, 3, 4, 5
	for _, same := range []bool{false, true} {
		t.Run(fmt.Sprintf("same%v", same), func(t *testing.T) {
			rng := krrRNG(13)
			a := krrRandn(rng, T*n*f)
			b := krrRandn(rng, T*m*f)
			mm := m
			if same {
				b, mm = a, n
			}
			bw := rbfRandBW(T, 14)
			g := krrRandn(rng, T*n*mm)
			loss := func() float64 {
				k := rbfDirect(a, b, bw, T, n, mm, f)
				s := 0.0
				for i := range k {
					s += g[i] * k[i]
				}
				return s
			}
			k := make([]float64, T*n*mm)
			rbfForward(nil, a, b, bw, T, n, mm, f, same, k, make([]float64, T*(n+mm)))
			p := make([]float64, T*n*mm)
			sums := make([]float64, T*max(n, mm))
			da := make([]float64, len(a))
			db := make([]float64, len(b))
			rbfBackward(nil, a, b, bw, k, g, T, n, mm, f, false, da, p, sums)
			rbfBackward(nil, a, b, bw, k, g, T, n, mm, f, true, db, p, sums)
			worst := 0.0
			check := func(name string, an []float64, x []float64) {
				for i := range x {
					v := x[i]
					x[i] = v + krrFDStep
					lp := loss()
					x[i] = v - krrFDStep
					lm := loss()
					x[i] = v
					fd := (lp - lm) / (2 * krrFDStep)
					e := krrRelErr(an[i], fd)
					worst = max(worst, e)
					if e > krrFDTol {
						t.Errorf("%s[%d]: analytic %.12g, FD %.12g, rel err %.3g", name, i, an[i], fd, e)
					}
				}
			}
			if same {
				// One array in both slots: its gradient is the sum.
				sum := make([]float64, len(a))
				for i := range sum {
					sum[i] = da[i] + db[i]
				}
				check("da+db", sum, a)
			} else {
				check("da", da, a)
				check("db", db, b)
			}
			t.Logf("worst relative error %.3g", worst)
		})
	}
}

func TestRBFGraphGradFD(t *testing.T) {
	const T, n, m, f = 2, 3, 4, 5
	for _, same := range []bool{false, true} {
		t.Run(fmt.Sprintf("same%v", same), func(t *testing.T) {
			rng := krrRNG(15)
			g := gorgonia.NewGraph()
			a := krrTensorNode(g, "a", tensor.Shape{T, n, f}, krrRandn(rng, T*n*f))
			b := a
			wrts := []*gorgonia.Node{a}
			if !same {
				b = krrTensorNode(g, "b", tensor.Shape{T, m, f}, krrRandn(rng, T*m*f))
				wrts = append(wrts, b)
			}
			bw := krrTensorNode(g, "bw", tensor.Shape{T}, rbfRandBW(T, 16))
			k := krrMust(RBFKernel(nil, a, b, bw))
			loss := krrSumWeighted(t, rng, k)
			if _, err := gorgonia.Grad(loss, wrts...); err != nil {
				t.Fatal(err)
			}
			vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(wrts...))
			defer vm.Close()
			t.Logf("worst relative error %.3g", krrCheckGraphGrads(t, vm, loss, wrts, nil))
		})
	}
}

// TestRBFKRRGraphGradFD chains the RBF baseline the way the model does: the
// support kernel K(S,S) from one node in both slots, the query kernel
// K(Q,S), KRR on the support labels, and a loss on the query predictions.
// Perturbing the features unconstrained checks the symmetric dK convention
// end to end.
func TestRBFKRRGraphGradFD(t *testing.T) {
	const T, ns, nq, f, o = 2, 4, 3, 5, 2
	rng := krrRNG(17)
	g := gorgonia.NewGraph()
	fs := krrTensorNode(g, "fs", tensor.Shape{T, ns, f}, krrRandn(rng, T*ns*f))
	fq := krrTensorNode(g, "fq", tensor.Shape{T, nq, f}, krrRandn(rng, T*nq*f))
	ys := krrTensorNode(g, "ys", tensor.Shape{T, ns, o}, krrRandn(rng, T*ns*o))
	bwData := make([]float64, T)
	MeanPairwiseDistance(fs.Value().Data().([]float64), T, ns, f, bwData)
	bw := krrTensorNode(g, "bw", tensor.Shape{T}, bwData)
	lp := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("loglambda"), gorgonia.WithValue(math.Log(0.1)))
	k := krrMust(RBFKernel(nil, fs, fs, bw))
	kq := krrMust(RBFKernel(nil, fq, fs, bw))
	alpha := krrMust(KRRSolve(nil, k, ys, krrMust(gorgonia.Exp(lp))))
	pred := krrMust(gorgonia.BatchedMatMul(kq, alpha))
	loss := krrSumWeighted(t, rng, pred)
	wrts := []*gorgonia.Node{fs, fq, ys, lp}
	if _, err := gorgonia.Grad(loss, wrts...); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(wrts...))
	defer vm.Close()
	t.Logf("worst relative error %.3g", krrCheckGraphGrads(t, vm, loss, wrts, nil))
}

func TestRBFBuildAndRunErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	a := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(2, 3, 4), gorgonia.WithName("a"))
	b := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(2, 5, 4), gorgonia.WithName("b"))
	bw := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(2), gorgonia.WithName("bw"))
	a32 := gorgonia.NewTensor(g, tensor.Float32, 3, gorgonia.WithShape(2, 3, 4), gorgonia.WithName("a32"))
	bBadF := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(2, 5, 3), gorgonia.WithName("bBadF"))
	bBadT := gorgonia.NewTensor(g, tensor.Float64, 3, gorgonia.WithShape(3, 5, 4), gorgonia.WithName("bBadT"))
	bw3 := gorgonia.NewVector(g, tensor.Float64, gorgonia.WithShape(3), gorgonia.WithName("bw3"))
	bwScalar := gorgonia.NewScalar(g, tensor.Float64, gorgonia.WithName("bws"))
	for _, tc := range []struct {
		name     string
		a, b, bw *gorgonia.Node
	}{
		{"float32", a32, b, bw},
		{"feature mismatch", a, bBadF, bw},
		{"T mismatch", a, bBadT, bw},
		{"bw length", a, b, bw3},
		{"bw scalar", a, b, bwScalar},
		{"nil", a, nil, bw},
	} {
		if _, err := RBFKernel(nil, tc.a, tc.b, tc.bw); err == nil {
			t.Errorf("%s: want an error", tc.name)
		}
	}
	k, err := RBFKernel(nil, a, b, bw)
	if err != nil {
		t.Fatalf("valid inputs: %v", err)
	}
	if !k.Shape().Eq(tensor.Shape{2, 3, 5}) {
		t.Fatalf("shape %v, want (2,3,5)", k.Shape())
	}

	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		g := gorgonia.NewGraph()
		a := krrTensorNode(g, "a", tensor.Shape{2, 3, 4}, make([]float64, 24))
		bw := krrTensorNode(g, "bw", tensor.Shape{2}, []float64{1, bad})
		krrMust(RBFKernel(nil, a, a, bw))
		vm := gorgonia.NewTapeMachine(g)
		err := vm.RunAll()
		vm.Close()
		if err == nil || !strings.Contains(err.Error(), "task 1") {
			t.Errorf("bandwidth %g: got %v, want an error naming task 1", bad, err)
		}
	}
}

func TestMeanPairwiseDistance(t *testing.T) {
	x := []float64{
		// task 0: (0,0), (3,4), (0,4): distances 5, 4, 3
		0, 0, 3, 4, 0, 4,
		// task 1: identical points
		1, 1, 1, 1, 1, 1,
		// task 2: NaN
		math.NaN(), 0, 0, 0, 1, 1,
	}
	out := make([]float64, 3)
	MeanPairwiseDistance(x, 3, 3, 2, out)
	if out[0] != 4 || out[1] != 1 || !math.IsNaN(out[2]) {
		t.Fatalf("got %v, want [4 1 NaN]", out)
	}
	one := []float64{7, 7}
	MeanPairwiseDistance([]float64{5, 6, 7, 8}, 2, 1, 2, one)
	if one[0] != 1 || one[1] != 1 {
		t.Fatalf("n=1: got %v, want [1 1]", one)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("short input: want a panic")
		}
	}()
	MeanPairwiseDistance(x[:5], 1, 3, 2, out)
}

func TestRBFDeterministicAcrossGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct{ T, n, m, f int }{{25, 5, 10, 40}, {6, 100, 100, 40}} {
		t.Run(fmt.Sprintf("T%dn%dm%df%d", tc.T, tc.n, tc.m, tc.f), func(t *testing.T) {
			run := func() [][]float64 {
				rng := krrRNG(18)
				g := gorgonia.NewGraph()
				a := krrTensorNode(g, "a", tensor.Shape{tc.T, tc.n, tc.f}, krrRandn(rng, tc.T*tc.n*tc.f))
				b := krrTensorNode(g, "b", tensor.Shape{tc.T, tc.m, tc.f}, krrRandn(rng, tc.T*tc.m*tc.f))
				bw := krrTensorNode(g, "bw", tensor.Shape{tc.T}, rbfRandBW(tc.T, 19))
				k := krrMust(RBFKernel(nil, a, b, bw))
				kk := krrMust(RBFKernel(nil, a, a, bw))
				loss := krrMust(gorgonia.Add(krrSumWeighted(t, rng, k), krrSumWeighted(t, rng, kk)))
				if _, err := gorgonia.Grad(loss, a, b); err != nil {
					t.Fatal(err)
				}
				vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(a, b))
				defer vm.Close()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				return [][]float64{k.Value().(*tensor.Dense).Float64s(), kk.Value().(*tensor.Dense).Float64s(),
					krrGradOf(t, a), krrGradOf(t, b)}
			}
			var one, two [][]float64
			krrWithProcs(1, func() { one = run() })
			krrWithProcs(2, func() { two = run() })
			for i := range one {
				if !krrBitEqual(one[i], two[i]) {
					t.Fatalf("output %d differs between GOMAXPROCS=1 and 2", i)
				}
			}
		})
	}
}

// BenchmarkRBFKernel times the forward kernel and both backward kernels at
// the sine regression size (25 tasks, 5 support and 10 query points, 40
// features).
func BenchmarkRBFKernel(b *testing.B) {
	const T, n, m, f = 25, 5, 10, 40
	rng := krrRNG(20)
	a := krrRandn(rng, T*n*f)
	bb := krrRandn(rng, T*m*f)
	bw := rbfRandBW(T, 21)
	g := krrRandn(rng, T*n*m)
	k := make([]float64, T*n*m)
	sq := make([]float64, T*(n+m))
	p := make([]float64, T*n*m)
	sums := make([]float64, T*m)
	da := make([]float64, len(a))
	db := make([]float64, len(bb))
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rbfForward(nil, a, bb, bw, T, n, m, f, false, k, sq)
		}
	})
	b.Run("forward+backward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rbfForward(nil, a, bb, bw, T, n, m, f, false, k, sq)
			rbfBackward(nil, a, bb, bw, k, g, T, n, m, f, false, da, p, sums)
			rbfBackward(nil, a, bb, bw, k, g, T, n, m, f, true, db, p, sums)
		}
	})
}
