// Package gemmtest holds the tests and benchmarks that packages sgemm and
// dgemm run on their products: the same cases for both element types, so
// that a change to the shared driver is checked against every kernel set of
// both packages.
package gemmtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/mkbench/mkbench/engine/internal/gemmcore"
)

// Workspace is a package's *Workspace.
type Workspace[T gemmcore.Float] interface {
	Gemm(tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)
	GemmEpilogue(tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, ep gemmcore.Epilogue[T])
}

// Suite describes the package under test.
type Suite[T gemmcore.Float] struct {
	impls int                          // kernel sets this machine runs
	use   func(i int) (string, func()) // see New
	new   func() Workspace[T]
	gemm  func(tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)
}

// New returns the suite of a package whose workspace is W, pooled product
// gemm and kernel sets impls, of which *active is in use; name names a set.
func New[T gemmcore.Float, W any, PW interface {
	*W
	Workspace[T]
}, K any](gemm func(tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int), active *K, impls []K, name func(K) string) *Suite[T] {
	return &Suite[T]{
		impls: len(impls),
		use: func(i int) (string, func()) {
			old := *active
			*active = impls[i]
			return name(impls[i]), func() { *active = old }
		},
		new:  func() Workspace[T] { return PW(new(W)) },
		gemm: gemm,
	}
}

// bounds returns the error bounds of T: eps bounds the rounding error of a
// product relative to the sum of the magnitudes of its terms, per term (a
// little over the unit roundoff); agree bounds the difference between the
// assembly and Go kernels (FMA rounding) on unit-normal inputs.
func bounds[T gemmcore.Float]() (eps, agree float64) {
	if unsafe.Sizeof(T(0)) == 4 {
		return 1.2e-7, 1e-4
	}
	return 2.3e-16, 1e-12
}

// forEachImpl runs f once with every kernel set this machine supports
// active, so that the assembly and the pure-Go kernels are both tested.
func (s *Suite[T]) forEachImpl(t *testing.T, f func(t *testing.T)) {
	for i := range s.impls {
		name, restore := s.use(i)
		t.Run(name, f)
		restore()
	}
}

// Test runs every test of the products as subtests.
func (s *Suite[T]) Test(t *testing.T) {
	t.Run("Shapes", s.shapes)
	t.Run("Options", s.options)
	t.Run("Large", s.large)
	t.Run("ZeroSizes", s.zeroSizes)
	t.Run("Panics", s.panics)
	t.Run("Deterministic", s.deterministic)
	t.Run("KernelsAgree", s.kernelsAgree)
	t.Run("NoAllocs", s.noAllocs)
}

// gemmCase is one product with its own strides and epilogue.
type gemmCase[T gemmcore.Float] struct {
	tA, tB           bool
	m, n, k          int
	alpha, beta      T
	padA, padB, padC int // extra leading-dimension elements
	bias, relu, mask bool
	padM             int
}

func (c gemmCase[T]) String() string {
	return fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d α=%g β=%g pad=%d/%d/%d bias=%v relu=%v mask=%v",
		c.tA, c.tB, c.m, c.n, c.k, c.alpha, c.beta, c.padA, c.padB, c.padC, c.bias, c.relu, c.mask)
}

// guard marks memory the product must not touch.
const guard = -12345.5

// run performs the case with the active kernels and checks it against a
// float64 reference, element by element, with a bound proportional to the
// magnitude of the terms summed.
func (s *Suite[T]) run(t *testing.T, rng *rand.Rand, w Workspace[T], c gemmCase[T]) {
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
	fill := func(rows, cols, ld int) []T {
		n := 0
		if rows > 0 && cols > 0 {
			n = (rows-1)*ld + cols
		}
		x := make([]T, n)
		for i := range x {
			x[i] = guard
		}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				x[i*ld+j] = T(rng.NormFloat64())
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
				cfull[i*ldc+j] = T(math.NaN())
			}
		}
	}
	c0 := slices.Clone(cfull)
	var ep gemmcore.Epilogue[T]
	if c.bias {
		ep.RowBias = make([]T, c.m)
		for i := range ep.RowBias {
			ep.RowBias[i] = T(rng.NormFloat64())
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
	eps, _ := bounds[T]()
	eps *= float64(c.k + 4)
	bad := 0
	for i := 0; i < c.m; i++ {
		for j := 0; j < c.n; j++ {
			var sum, mag float64
			for p := 0; p < c.k; p++ {
				sum += at(i, p) * bt(p, j)
				mag += math.Abs(at(i, p) * bt(p, j))
			}
			want := float64(c.alpha) * sum
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

// shapes covers all transpose combinations over sizes that hit every tile
// height (1…6) and every column edge (full and half panels of 4, 8 or 16
// columns, partial or not).
func (s *Suite[T]) shapes(t *testing.T) {
	s.forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		w := s.new()
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, m := range dims {
					for _, n := range dims {
						k := dims[rng.IntN(len(dims))]
						s.run(t, rng, w, gemmCase[T]{tA: tA, tB: tB, m: m, n: n, k: k, alpha: 1, beta: 0})
					}
				}
			}
		}
	})
}

// options varies alpha, beta, strides and the epilogue.
func (s *Suite[T]) options(t *testing.T) {
	s.forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		w := s.new()
		scal := []T{0, 1, -1, 0.5, 2.25}
		for it := 0; it < 3000; it++ {
			c := gemmCase[T]{
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
			s.run(t, rng, w, c)
		}
	})
}

// runCases runs cases with every kernel set, then more, if not nil, with
// the same workspace.
func (s *Suite[T]) runCases(t *testing.T, seed uint64, cases []gemmCase[T], more func(t *testing.T, w Workspace[T])) {
	s.forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(seed, seed+1))
		w := s.new()
		for _, c := range cases {
			s.run(t, rng, w, c)
		}
		if more != nil {
			more(t, w)
		}
	})
}

// large crosses the kc, mc and nc block boundaries.
func (s *Suite[T]) large(t *testing.T) {
	s.runCases(t, 5, []gemmCase[T]{
		{m: 150, n: 40, k: 600, alpha: 1, beta: 0.5, bias: true, relu: true},
		{tA: true, tB: true, m: 300, n: 530, k: 300, alpha: -0.5, beta: 1, mask: true},
		{tB: true, m: 7, n: 1030, k: 513, alpha: 1, beta: 0, padC: 3},
		{tA: true, m: 145, n: 17, k: 257, alpha: 2, beta: -1, bias: true, mask: true, padA: 5},
	}, nil)
}

// zeroSizes checks the degenerate products: nothing read for m = 0 or
// n = 0, C = beta·C (+ epilogue) for k = 0 or alpha = 0.
func (s *Suite[T]) zeroSizes(t *testing.T) {
	s.runCases(t, 7, []gemmCase[T]{
		{m: 0, n: 5, k: 3, alpha: 1}, {m: 4, n: 0, k: 3, alpha: 1},
		{m: 4, n: 5, k: 0, alpha: 1, beta: 0.5, bias: true, relu: true, mask: true},
		{m: 4, n: 5, k: 3, alpha: 0, beta: 2},
		{m: 4, n: 5, k: 0, alpha: 1, beta: 0},
	}, func(t *testing.T, w Workspace[T]) {
		// alpha == 0: A and B are not read, so they may be empty.
		cc := []T{1, 2, 3, 4}
		w.Gemm(false, false, 2, 2, 3, 0, nil, 3, nil, 2, 3, cc, 2)
		if !slices.Equal(cc, []T{3, 6, 9, 12}) {
			t.Errorf("alpha = 0: C = %v, want 3·C", cc)
		}
	})
}

func (s *Suite[T]) panics(t *testing.T) {
	a := make([]T, 12)
	for _, f := range []func(){
		func() { s.gemm(false, false, -1, 2, 2, 1, a, 2, a, 2, 0, a, 2) },
		func() { s.gemm(false, false, 3, 4, 4, 1, a, 3, a, 4, 0, a, 4) },    // lda < k
		func() { s.gemm(false, false, 3, 4, 5, 1, a, 5, a, 4, 0, a, 4) },    // A too short
		func() { s.gemm(true, true, 3, 4, 2, 1, a, 3, a, 2, 0, a[:11], 4) }, // C too short
		func() {
			s.new().GemmEpilogue(false, false, 3, 4, 2, 1, a, 2, a, 4, 0, a, 4, gemmcore.Epilogue[T]{RowBias: a[:2]})
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

// deterministic: the same product gives the same bits whether the
// workspace is fresh or reused, pooled or not, and from several goroutines.
func (s *Suite[T]) deterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, n, k := 128, 128, 128
	a, b := make([]T, m*k), make([]T, k*n)
	for i := range a {
		a[i] = T(rng.NormFloat64())
		b[i] = T(rng.NormFloat64())
	}
	ref := make([]T, m*n)
	s.new().Gemm(false, true, m, n, k, 1, a, k, b, k, 0, ref, n)
	var wg sync.WaitGroup
	res := make([][]T, 2*runtime.GOMAXPROCS(0))
	for g := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := make([]T, m*n)
			for range 3 {
				s.gemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
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

// kernelsAgree compares every kernel set with the last (the portable Go
// kernels) directly: they differ only by FMA rounding.
func (s *Suite[T]) kernelsAgree(t *testing.T) {
	if s.impls < 2 {
		t.Skip("only the Go kernels on this machine")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	m, n, k := 40, 128, 128
	a, b := make([]T, m*k), make([]T, k*n)
	for i := range a {
		a[i] = T(rng.NormFloat64())
	}
	for i := range b {
		b[i] = T(rng.NormFloat64())
	}
	out := make([][]T, s.impls)
	names := make([]string, s.impls)
	for i := range out {
		var restore func()
		names[i], restore = s.use(i)
		out[i] = make([]T, m*n)
		s.gemm(false, false, m, n, k, 1, a, k, b, n, 0, out[i], n)
		restore()
	}
	_, agree := bounds[T]()
	ref := out[len(out)-1]
	for j := range out[:len(out)-1] {
		for i := range ref {
			if d := math.Abs(float64(out[j][i] - ref[i])); d > agree {
				t.Fatalf("element %d: %s %g vs %s %g", i, names[j], out[j][i], names[len(out)-1], ref[i])
			}
		}
	}
}

func (s *Suite[T]) noAllocs(t *testing.T) {
	m, n, k := 40, 128, 128
	a, b, c := make([]T, m*k), make([]T, n*k), make([]T, m*n)
	bias := make([]T, m)
	w := s.new()
	run := func() {
		w.GemmEpilogue(false, true, m, n, k, 1, a, k, b, k, 0, c, n, gemmcore.Epilogue[T]{RowBias: bias, ReLU: true})
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

// Bench times the benchShapes products with every kernel set.
func (s *Suite[T]) Bench(b *testing.B) {
	for i := range s.impls {
		name, restore := s.use(i)
		for _, sh := range benchShapes {
			b.Run(name+"/"+sh.name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				x := make([]T, 128*128)
				y := make([]T, 128*128)
				for i := range x {
					x[i] = T(rng.NormFloat64())
					y[i] = T(rng.NormFloat64())
				}
				c := make([]T, 128*128)
				lda, ldb := sh.k, sh.n
				if sh.tA {
					lda = sh.m
				}
				if sh.tB {
					ldb = sh.k
				}
				w := s.new()
				w.Gemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, x, lda, y, ldb, 0, c, sh.n)
				b.ReportAllocs()
				for b.Loop() {
					w.Gemm(sh.tA, sh.tB, sh.m, sh.n, sh.k, 1, x, lda, y, ldb, 0, c, sh.n)
				}
				b.ReportMetric(2*float64(sh.m*sh.n*sh.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		restore()
	}
}
