package opencl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refGemm is C = alpha·op(A)·op(B) + beta·C row-major, a plain triple
// loop in float64.
func refGemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				ai, bi := i*lda+p, p*ldb+j
				if tA {
					ai = p*lda + i
				}
				if tB {
					bi = j*ldb + p
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

// relErr is ‖got−want‖/‖want‖ over an m×n matrix at ld in got.
func relErr(got []float32, ld int, want []float64, m, n int) float64 {
	var num, den float64
	for i := range m {
		for j := range n {
			d := float64(got[i*ld+j]) - want[i*n+j]
			num += d * d
			den += want[i*n+j] * want[i*n+j]
		}
	}
	return math.Sqrt(num / den)
}

func randn(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func upload(tb testing.TB, d *Device, x []float32) *Buffer {
	tb.Helper()
	b := alloc[float32](tb, d, len(x))
	must(tb, Write(b, 0, x))
	return b
}

// dims are op(A)'s and op(B)'s stored shapes with their leading
// dimensions, padded by pad columns.
func dims(t bool, rows, cols, pad int) (r, c, ld int) {
	if t {
		rows, cols = cols, rows
	}
	return rows, cols, cols + pad
}

func TestSgemm(t *testing.T) {
	d := openTest(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct{ m, n, k, pad, off int }{{75, 5, 780, 0, 0}, {256, 192, 320, 0, 0}, {33, 17, 9, 3, 11}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			name := fmt.Sprintf("%dx%dx%d_%s%s", s.m, s.n, s.k, map[bool]string{false: "N", true: "T"}[tr[0]], map[bool]string{false: "N", true: "T"}[tr[1]])
			t.Run(name, func(t *testing.T) {
				ar, _, lda := dims(tr[0], s.m, s.k, s.pad)
				br, _, ldb := dims(tr[1], s.k, s.n, s.pad)
				ldc := s.n + s.pad
				a, b, c := randn(r, s.off+ar*lda), randn(r, s.off+br*ldb), randn(r, s.off+s.m*ldc)
				want := refGemm(tr[0], tr[1], s.m, s.n, s.k, 0.75, a[s.off:], lda, b[s.off:], ldb, -0.5, c[s.off:], ldc)
				ba, bb, bc2 := upload(t, d, a), upload(t, d, b), upload(t, d, c)
				must(t, d.Sgemm(tr[0], tr[1], s.m, s.n, s.k, 0.75, ba, s.off, lda, bb, s.off, ldb, -0.5, bc2, s.off, ldc))
				got := make([]float32, len(c))
				must(t, Read(bc2, 0, got))
				if e := relErr(got[s.off:], ldc, want, s.m, s.n); e > 1e-5 || math.IsNaN(e) {
					t.Errorf("relative error %.3g", e)
				}
				// Outside C's m×n window nothing changed.
				for i := range s.off {
					if got[i] != c[i] {
						t.Fatalf("element %d before the offset changed", i)
					}
				}
			})
		}
	}
}

func TestSgemmStridedBatched(t *testing.T) {
	d := openTest(t)
	r := rand.New(rand.NewPCG(7, 8))
	const batch, m, n, k = 6, 78, 64, 128
	for _, tr := range [][2]bool{{false, false}, {true, true}} {
		ar, _, lda := dims(tr[0], m, k, 0)
		br, _, ldb := dims(tr[1], k, n, 0)
		sa, sb, sc := ar*lda+5, br*ldb, m*n+2 // odd strides: the gaps stay as they were
		a, b, c := randn(r, batch*sa), randn(r, batch*sb), randn(r, batch*sc)
		ba, bb, bc := upload(t, d, a), upload(t, d, b), upload(t, d, c)
		must(t, d.SgemmStridedBatched(tr[0], tr[1], m, n, k, 1, ba, 0, lda, sa, bb, 0, ldb, sb, 0.25, bc, 0, n, sc, batch))
		got := make([]float32, len(c))
		must(t, Read(bc, 0, got))
		for i := range batch {
			want := refGemm(tr[0], tr[1], m, n, k, 1, a[i*sa:], lda, b[i*sb:], ldb, 0.25, c[i*sc:], n)
			if e := relErr(got[i*sc:], n, want, m, n); e > 1e-5 || math.IsNaN(e) {
				t.Errorf("transposed %v, batch %d: relative error %.3g", tr, i, e)
			}
			if gap := i*sc + m*n; got[gap] != c[gap] || got[gap+1] != c[gap+1] {
				t.Errorf("batch %d: the gap after C changed", i)
			}
		}
	}
}

// TestSgemmRepeatable: one device gives the same bytes run after run.
func TestSgemmRepeatable(t *testing.T) {
	d := openTest(t)
	r := rand.New(rand.NewPCG(9, 10))
	const m, n, k = 256, 192, 320
	ba, bb := upload(t, d, randn(r, m*k)), upload(t, d, randn(r, k*n))
	var runs [2][]float32
	for i := range runs {
		bc := alloc[float32](t, d, m*n)
		must(t, bc.Zero())
		must(t, d.Sgemm(false, true, m, n, k, 1, ba, 0, k, bb, 0, k, 0, bc, 0, n))
		runs[i] = make([]float32, m*n)
		must(t, Read(bc, 0, runs[i]))
	}
	if !bitsEqual32(runs[0], runs[1]) {
		t.Error("two runs of one sgemm differ")
	}
}

func TestSgemmRefusals(t *testing.T) {
	d := openTest(t)
	a, c := alloc[float32](t, d, 10), alloc[float32](t, d, 10)
	i := alloc[int32](t, d, 10)
	for name, err := range map[string]error{
		"int32 buffer": d.Sgemm(false, false, 2, 2, 2, 1, a, 0, 2, i, 0, 2, 0, c, 0, 2),
		"zero m":       d.Sgemm(false, false, 0, 2, 2, 1, a, 0, 2, a, 0, 2, 0, c, 0, 2),
		"negative ld":  d.Sgemm(false, false, 2, 2, 2, 1, a, 0, -2, a, 0, 2, 0, c, 0, 2),
		"A too small":  d.Sgemm(false, false, 4, 2, 4, 1, a, 0, 4, a, 0, 2, 0, c, 0, 2),
		"batch 0":      d.SgemmStridedBatched(false, false, 2, 2, 2, 1, a, 0, 2, 4, a, 0, 2, 4, 0, c, 0, 2, 4, 0),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	err := d.Sgemm(false, false, 4, 2, 4, 1, a, 0, 4, a, 0, 2, 0, c, 0, 2)
	if e, ok := err.(*Error); !ok || e.Status != -1011 {
		t.Errorf("A too small: %v; want CLBlastInsufficientMemoryA", err)
	}
}
