package sgemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// poolInputs returns four cell slices of length n with ties, zeros (as
// after a ReLU), negatives and a NaN at a known place.
func poolInputs(rng *rand.Rand, n int) [4][]float32 {
	var cells [4][]float32
	for k := range cells {
		cells[k] = make([]float32, n)
		for i := range cells[k] {
			switch rng.IntN(4) {
			case 0:
				cells[k][i] = 0
			case 1:
				cells[k][i] = float32(rng.IntN(3)) // ties across cells
			default:
				cells[k][i] = float32(rng.NormFloat64())
			}
		}
	}
	if n > 5 {
		cells[2][5] = float32(math.NaN())
	}
	return cells
}

func TestMaxPool4(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(2, 2))
		for _, n := range []int{1, 7, 8, 9, 16, 64, 67} {
			c := poolInputs(rng, n)
			out := make([]float32, n)
			arg := make([]uint8, n)
			MaxPool4(out, arg, c[0], c[1], c[2], c[3])
			for i := 0; i < n; i++ {
				if n > 5 && i == 5 {
					if !math.IsNaN(float64(out[i])) || arg[i] != 2 {
						t.Fatalf("n=%d: NaN cell gave %g at %d", n, out[i], arg[i])
					}
					continue
				}
				m, k := c[0][i], 0
				for j := 1; j < 4; j++ {
					if c[j][i] > m {
						m, k = c[j][i], j
					}
				}
				if out[i] != m || int(arg[i]) != k {
					t.Fatalf("n=%d i=%d: got %g at %d, want %g at %d", n, i, out[i], arg[i], m, k)
				}
			}
		}
	})
}

// TestMaxPool4Repeats: a window cut by the border passes an earlier cell
// again; it must never be reported as the maximum's position.
func TestMaxPool4Repeats(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 3))
		n := 24
		c := poolInputs(rng, n)
		out := make([]float32, n)
		arg := make([]uint8, n)
		MaxPool4(out, arg, c[0], c[1], c[0], c[1])
		for i := range arg {
			if arg[i] > 1 {
				t.Fatalf("i=%d: repeated cell %d reported", i, arg[i])
			}
		}
	})
}

func TestUnpool4(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(4, 4))
		for _, n := range []int{1, 8, 13, 64} {
			g := make([]float32, n)
			out := make([]float32, n)
			arg := make([]uint8, n)
			for i := range g {
				g[i] = float32(rng.NormFloat64())
				out[i] = float32(rng.NormFloat64())
				arg[i] = uint8(rng.IntN(4))
			}
			if n > 3 {
				out[3] = float32(math.NaN())
			}
			var d [4][]float32
			for k := range d {
				d[k] = make([]float32, n)
				for i := range d[k] {
					d[k][i] = 99 // must be overwritten
				}
			}
			Unpool4(d[0], d[1], d[2], d[3], g, out, arg, 1.25)
			for i := 0; i < n; i++ {
				var v float32
				if out[i] > 0 {
					v = 1.25 * g[i]
				}
				for k := 0; k < 4; k++ {
					want := float32(0)
					if int(arg[i]) == k {
						want = v
					}
					if d[k][i] != want {
						t.Fatalf("n=%d i=%d cell %d: got %g, want %g", n, i, k, d[k][i], want)
					}
				}
			}
		}
	})
}

// TestUnpool4Repeats: with cells repeated as for a border window (d and c
// repeat b and a), the repeated cells end up with their own values.
func TestUnpool4Repeats(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		n := 16
		g := make([]float32, n)
		out := make([]float32, n)
		arg := make([]uint8, n)
		for i := range g {
			g[i], out[i], arg[i] = float32(i+1), 1, uint8(i%2)
		}
		a, b := make([]float32, n), make([]float32, n)
		Unpool4(a, b, a, b, g, out, arg, 1)
		for i := 0; i < n; i++ {
			wa, wb := float32(0), float32(0)
			if i%2 == 0 {
				wa = g[i]
			} else {
				wb = g[i]
			}
			if a[i] != wa || b[i] != wb {
				t.Fatalf("i=%d: got %g, %g; want %g, %g", i, a[i], b[i], wa, wb)
			}
		}
	})
}

func TestMaskedMaxPool4(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, 8, 9, 16, 64, 67} {
		c := poolInputs(rng, n)
		var m [4][]float32
		for k := range m {
			m[k] = make([]float32, n)
			for i := range m[k] {
				m[k][i] = float32(rng.IntN(2))
			}
		}
		if n > 3 {
			m[1][3] = float32(math.NaN()) // drops
		}
		var results [][]float32
		forEachImpl(t, func(t *testing.T) {
			out := make([]float32, n)
			arg := make([]uint8, n)
			MaskedMaxPool4(out, arg, c[0], c[1], c[2], c[3], m[0], m[1], m[2], m[3])
			for i := 0; i < n; i++ {
				var v [4]float32
				for k := range v {
					if m[k][i] > 0 {
						v[k] = c[k][i]
					}
				}
				mx, a := v[0], 0
				for k := 1; k < 4; k++ {
					if v[k] > mx || v[k] != v[k] {
						mx, a = v[k], k
					}
				}
				if math.Float32bits(out[i]) != math.Float32bits(mx) && !(mx != mx && out[i] != out[i]) || int(arg[i]) != a {
					t.Fatalf("n=%d i=%d: got %g at %d, want %g at %d", n, i, out[i], arg[i], mx, a)
				}
			}
			results = append(results, append(out, u8f(arg)...))
		})
		for _, r := range results[1:] {
			for i := range r {
				if math.Float32bits(r[i]) != math.Float32bits(results[0][i]) {
					t.Fatalf("n=%d: kernels disagree at %d", n, i)
				}
			}
		}
	}
}
