package dgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// forEachImpl runs f once with every kernel set this machine supports
// active, so that the assembly and the pure-Go kernels are both tested.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			old := active
			active = im
			defer func() { active = old }()
			f(t)
		})
	}
}

// gemmCase is one product with its own strides and epilogue.
type gemmCase struct {
	tA, tB           bool
	m, n, k          int
	alpha, beta      float64
	padA, padB, padC int // extra leading-dimension elements
	bias, relu, mask bool
	padM             int
}

func (c gemmCase) String() string {
	return fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d α=%g β=%g pad=%d/%d/%d bias=%v relu=%v mask=%v",
		c.tA, c.tB, c.m, c.n, c.k, c.alpha, c.beta, c.padA, c.padB, c.padC, c.bias, c.relu, c.mask)
}

// guard marks memory the product must not touch.
const guard = float64(-12345.5)

// run performs the case with the active kernels and checks it against a
// float64 reference, element by element, with a bound proportional to the
// magnitude of the terms summed.
func (c gemmCase) run(t *testing.T, rng *rand.Rand, w *Workspace) {
	t.Helper()
	ar, ac := c.m, c.k
	if c.tA {
		ar, ac = c.k, c.m
	}
	br, bc := c.k, c.n
	if c.tB {
		br, bc = c.n, c.k
	}
	lda, ldb, ldc := max(1, ac+c.padA), max(1, bc+c.padB), max(1, c.n+c.padC)
	fill := func(rows, cols, ld int) []float64 {
		n := 0
		if rows > 0 && cols > 0 {
			n = (rows-1)*ld + cols
		}
		x := make([]float64, n)
		for i := range x {
			x[i] = guard
		}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				x[i*ld+j] = float64(rng.NormFloat64())
			}
		}
		return x
	}
	a, b := fill(ar, ac, lda), fill(br, bc, ldb)
	// C sits inside a larger buffer whose tail must survive.
	cfull := fill(c.m+1, ldc, ldc)
	cn := 0
	if c.m > 0 && c.n > 0 {
		cn = (c.m-1)*ldc + c.n
	}
	for i := 0; i < c.m; i++ {
		for j := c.n; j < ldc; j++ {
			cfull[i*ldc+j] = guard
		}
	}
	for j := cn; j < len(cfull); j++ {
		cfull[j] = guard
	}
	if c.beta == 0 {
		// beta == 0 must not read C.
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				cfull[i*ldc+j] = float64(math.NaN())
			}
		}
	}
	c0 := slices.Clone(cfull)
	var ep Epilogue
	if c.bias {
		ep.RowBias = make([]float64, c.m)
		for i := range ep.RowBias {
			ep.RowBias[i] = float64(rng.NormFloat64())
		}
	}
	ep.ReLU = c.relu
	if c.mask {
		ep.LdMask = c.n + c.padM
		ep.Mask = fill(c.m, c.n, max(1, ep.LdMask))
		ep.LdMask = max(1, ep.LdMask)
		for i := range ep.Mask {
			if ep.Mask[i] != guard && rng.IntN(5) == 0 {
				ep.Mask[i] = 0 // exactly zero clears too
			}
		}
	}
	w.GemmEpilogue(c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, lda, b, ldb, c.beta, cfull[:cn], ldc, ep)

	at := func(i, p int) float64 {
		if c.tA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if c.tB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	eps := 2.3e-16 * float64(c.k+4)
	bad := 0
	for i := 0; i < c.m; i++ {
		for j := 0; j < c.n; j++ {
			var s, mag float64
			for p := 0; p < c.k; p++ {
				s += at(i, p) * bt(p, j)
				mag += math.Abs(at(i, p) * bt(p, j))
			}
			want := float64(c.alpha) * s
			mag *= math.Abs(float64(c.alpha))
			if c.beta != 0 {
				want += float64(c.beta) * float64(c0[i*ldc+j])
				mag += math.Abs(float64(c.beta) * float64(c0[i*ldc+j]))
			}
			if c.bias {
				want += float64(ep.RowBias[i])
				mag += math.Abs(float64(ep.RowBias[i]))
			}
			if c.relu && want < 0 {
				want = 0
			}
			if c.mask && !(ep.Mask[i*ep.LdMask+j] > 0) {
				want = 0
			}
			got := float64(cfull[i*ldc+j])
			if !(math.Abs(got-want) <= eps*mag+1e-30) {
				if bad < 5 {
					t.Errorf("%v: C[%d][%d] = %g, want %g (bound %g)", c, i, j, got, want, eps*mag)
				}
				bad++
			}
		}
		for j := c.n; j < ldc && i < c.m-1; j++ {
			if cfull[i*ldc+j] != guard {
				t.Fatalf("%v: padding C[%d][%d] overwritten", c, i, j)
			}
		}
	}
	for j := cn; j < len(cfull); j++ {
		if cfull[j] != guard {
			t.Fatalf("%v: element %d past the end of C overwritten", c, j-cn)
		}
	}
}

var dims = []int{1, 2, 3, 5, 6, 7, 8, 9, 12, 15, 16, 17, 20, 23, 24, 25, 31, 33, 40, 80, 128}

// TestGemmShapes covers all transpose combinations over sizes that hit
// every tile height (1…6) and every column edge (8- and 16-wide panels,
// partial or not).
func TestGemmShapes(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		var w Workspace
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, m := range dims {
					for _, n := range dims {
						k := dims[rng.IntN(len(dims))]
						gemmCase{tA: tA, tB: tB, m: m, n: n, k: k, alpha: 1, beta: 0}.run(t, rng, &w)
					}
				}
			}
		}
	})
}

// TestGemmOptions varies alpha, beta, strides and the epilogue.
func TestGemmOptions(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		var w Workspace
		scal := []float64{0, 1, -1, 0.5, 2.25}
		for it := 0; it < 3000; it++ {
			c := gemmCase{
				tA: rng.IntN(2) == 0, tB: rng.IntN(2) == 0,
				m: dims[rng.IntN(len(dims))], n: dims[rng.IntN(len(dims))], k: dims[rng.IntN(len(dims))],
				alpha: scal[rng.IntN(len(scal))], beta: scal[rng.IntN(len(scal))],
				bias: rng.IntN(3) == 0, relu: rng.IntN(3) == 0, mask: rng.IntN(3) == 0,
			}
			if rng.IntN(2) == 0 {
				c.padA, c.padB, c.padC, c.padM = rng.IntN(20), rng.IntN(20), rng.IntN(20), rng.IntN(20)
			}
			if rng.IntN(10) == 0 {
				c.k = 1
			}
			c.run(t, rng, &w)
		}
	})
}

// TestGemmLarge crosses the kc, mc and nc block boundaries.
func TestGemmLarge(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		var w Workspace
		for _, c := range []gemmCase{
			{m: 150, n: 40, k: 600, alpha: 1, beta: 0.5, bias: true, relu: true},
			{tA: true, tB: true, m: 300, n: 530, k: 300, alpha: -0.5, beta: 1, mask: true},
			{tB: true, m: 7, n: 1030, k: 513, alpha: 1, beta: 0, padC: 3},
			{tA: true, m: 145, n: 17, k: 257, alpha: 2, beta: -1, bias: true, mask: true, padA: 5},
		} {
			c.run(t, rng, &w)
		}
	})
}

// TestGemmZeroSizes checks the degenerate products: nothing read for
// m = 0 or n = 0, C = beta·C (+ epilogue) for k = 0 or alpha = 0.
func TestGemmZeroSizes(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		var w Workspace
		for _, c := range []gemmCase{
			{m: 0, n: 5, k: 3, alpha: 1}, {m: 4, n: 0, k: 3, alpha: 1},
			{m: 4, n: 5, k: 0, alpha: 1, beta: 0.5, bias: true, relu: true, mask: true},
			{m: 4, n: 5, k: 3, alpha: 0, beta: 2},
			{m: 4, n: 5, k: 0, alpha: 1, beta: 0},
		} {
			c.run(t, rng, &w)
		}
		// alpha == 0: A and B are not read, so they may be empty.
		cc := []float64{1, 2, 3, 4}
		w.Gemm(false, false, 2, 2, 3, 0, nil, 3, nil, 2, 3, cc, 2)
		if !slices.Equal(cc, []float64{3, 6, 9, 12}) {
			t.Errorf("alpha = 0: C = %v, want 3·C", cc)
		}
	})
}

func TestGemmPanics(t *testing.T) {
	a := make([]float64, 12)
	for _, f := range []func(){
		func() { Gemm(false, false, -1, 2, 2, 1, a, 2, a, 2, 0, a, 2) },
		func() { Gemm(false, false, 3, 4, 4, 1, a, 3, a, 4, 0, a, 4) },    // lda < k
		func() { Gemm(false, false, 3, 4, 5, 1, a, 5, a, 4, 0, a, 4) },    // A too short
		func() { Gemm(true, true, 3, 4, 2, 1, a, 3, a, 2, 0, a[:11], 4) }, // C too short
		func() {
			var w Workspace
			w.GemmEpilogue(false, false, 3, 4, 2, 1, a, 2, a, 4, 0, a, 4, Epilogue{RowBias: a[:2]})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}

// TestGemmDeterministic: the same product gives the same bits whether the
// workspace is fresh or reused, pooled or not, and from several goroutines.
func TestGemmDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, n, k := 128, 128, 128
	a, b := make([]float64, m*k), make([]float64, k*n)
	for i := range a {
		a[i] = float64(rng.NormFloat64())
		b[i] = float64(rng.NormFloat64())
	}
	ref := make([]float64, m*n)
	var w Workspace
	w.Gemm(false, true, m, n, k, 1, a, k, b, k, 0, ref, n)
	var wg sync.WaitGroup
	res := make([][]float64, 2*runtime.GOMAXPROCS(0))
	for g := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := make([]float64, m*n)
			for range 3 {
				Gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
			}
			res[g] = c
		}()
	}
	wg.Wait()
	for _, c := range res {
		if !slices.Equal(c, ref) {
			t.Fatal("results differ between calls")
		}
	}
}

// TestGemmKernelsAgree compares the assembly and Go kernels directly: they
// differ only by FMA rounding.
func TestGemmKernelsAgree(t *testing.T) {
	if len(impls) < 2 {
		t.Skip("only the Go kernels on this machine")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	m, n, k := 40, 128, 128
	a, b := make([]float64, m*k), make([]float64, k*n)
	for i := range a {
		a[i] = float64(rng.NormFloat64())
	}
	for i := range b {
		b[i] = float64(rng.NormFloat64())
	}
	var out [2][]float64
	for i, im := range impls[:2] {
		old := active
		active = im
		out[i] = make([]float64, m*n)
		Gemm(false, false, m, n, k, 1, a, k, b, n, 0, out[i], n)
		active = old
	}
	for i := range out[0] {
		if d := math.Abs(float64(out[0][i] - out[1][i])); d > 1e-12 {
			t.Fatalf("element %d: %s %g vs %s %g", i, impls[0].name, out[0][i], impls[1].name, out[1][i])
		}
	}
}

func TestGemmNoAllocs(t *testing.T) {
	m, n, k := 40, 128, 128
	a, b, c := make([]float64, m*k), make([]float64, n*k), make([]float64, m*n)
	bias := make([]float64, m)
	var w Workspace
	run := func() {
		w.GemmEpilogue(false, true, m, n, k, 1, a, k, b, k, 0, c, n, Epilogue{RowBias: bias, ReLU: true})
		w.Gemm(true, false, m, n, k, 1, a, m, b, n, 1, c, n)
	}
	run()
	if got := testing.AllocsPerRun(20, run); got != 0 {
		t.Errorf("%v allocations per call in steady state", got)
	}
}

// The products of one coupling half at the engine's size (D = 128 samples,
// H = 128 hidden, m = 20 target and 20 input coordinates), in the
// orientation the flow uses.
var benchShapes = []struct {
	name    string
	tA, tB  bool
	m, n, k int
}{
	{"hid=W1ᵀx/128x128x20", true, false, 128, 128, 20},
	{"out=W2ᵀhid/40x128x128", true, false, 40, 128, 128},
	{"gW2=hid·gᵀ/128x40x128", false, true, 128, 40, 128},
	{"gW2ᵀ=g·hidᵀ/40x128x128", false, true, 40, 128, 128},
	{"ghid=W2·g/128x128x40", true, false, 128, 128, 40},
	{"gW1=x·ghidᵀ/20x128x128", false, true, 20, 128, 128},
	{"gx=W1·ghid/20x128x128", true, false, 20, 128, 128},
	{"square/128x128x128", false, false, 128, 128, 128},
}

func BenchmarkGemm(b *testing.B) {
	for _, im := range impls {
		for _, s := range benchShapes {
			b.Run(im.name+"/"+s.name, func(b *testing.B) {
				old := active
				active = im
				defer func() { active = old }()
				rng := rand.New(rand.NewPCG(1, 1))
				x := make([]float64, 128*128)
				y := make([]float64, 128*128)
				for i := range x {
					x[i] = float64(rng.NormFloat64())
					y[i] = float64(rng.NormFloat64())
				}
				c := make([]float64, 128*128)
				lda, ldb := s.k, s.n
				if s.tA {
					lda = s.m
				}
				if s.tB {
					ldb = s.k
				}
				var w Workspace
				w.Gemm(s.tA, s.tB, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, c, s.n)
				b.ReportAllocs()
				for b.Loop() {
					w.Gemm(s.tA, s.tB, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, c, s.n)
				}
				b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
