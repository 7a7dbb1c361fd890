package sgemm

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Winograd matrices of F(2×2, 3×3), for float64 evaluations of the
// definitions.
var (
	winoBT = [4][4]float64{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	winoAT = [2][4]float64{{1, 1, 1, 0}, {0, 1, -1, -1}}
)

func winoRand(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// winoSame runs f once per kernel set and requires identical results.
func winoSame(t *testing.T, name string, f func() [][]float32) {
	t.Helper()
	var first [][]float32
	forEachImpl(t, func(t *testing.T) {
		got := f()
		if first == nil {
			first = got
			return
		}
		for i := range got {
			for j := range got[i] {
				a, b := got[i][j], first[i][j]
				if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
					t.Fatalf("%s: output %d element %d: %g here, %g with the first kernel set", name, i, j, a, b)
				}
			}
		}
	})
}

var winoChannels = []int{1, 7, 8, 9, 16, 64, 67}

func TestWinoIn(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, c := range winoChannels {
		lds, ldv := 5*c+3, c+2
		src := winoRand(rng, 3*lds+4*c)
		winoSame(t, "WinoIn", func() [][]float32 {
			v := make([]float32, 15*ldv+c)
			WinoIn(v, ldv, src, lds, c)
			for k := 0; k < c; k++ {
				for r := 0; r < 4; r++ {
					for s := 0; s < 4; s++ {
						want := 0.0
						for a := 0; a < 4; a++ {
							for b := 0; b < 4; b++ {
								want += winoBT[r][a] * float64(src[a*lds+b*c+k]) * winoBT[s][b]
							}
						}
						if got := float64(v[(4*r+s)*ldv+k]); math.Abs(got-want) > 1e-5 {
							t.Fatalf("c=%d k=%d ξ=%d: got %g, want %g", c, k, 4*r+s, got, want)
						}
					}
				}
			}
			return [][]float32{v}
		})
	}
}

// TestWinoInT: WinoInT is the adjoint of WinoIn (⟨WinoIn d, w⟩ = ⟨d,
// WinoInT w⟩), accumulating into what dst held.
func TestWinoInT(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range winoChannels {
		ldd, ldv := 4*c+1, c+5
		d := winoRand(rng, 3*ldd+4*c)
		w := winoRand(rng, 15*ldv+c)
		base := winoRand(rng, len(d))
		v := make([]float32, len(w))
		WinoIn(v, ldv, d, ldd, c)
		winoSame(t, "WinoInT", func() [][]float32 {
			dst := slices.Clone(base)
			WinoInT(dst, ldd, w, ldv, c)
			var lhs, rhs float64
			for k := 0; k < c; k++ {
				for x := 0; x < 16; x++ {
					lhs += float64(v[x*ldv+k]) * float64(w[x*ldv+k])
					a, b := x/4, x%4
					o := a*ldd + b*c + k
					rhs += float64(d[o]) * float64(dst[o]-base[o])
				}
			}
			if math.Abs(lhs-rhs) > 1e-4*math.Sqrt(float64(c))*8 {
				t.Fatalf("c=%d: ⟨WinoIn d, w⟩ = %g, ⟨d, WinoInT w⟩ = %g", c, lhs, rhs)
			}
			return [][]float32{dst}
		})
	}
}

func TestWinoOutPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, n := range winoChannels {
		for flags := 0; flags < 4; flags++ {
			for _, masked := range []bool{false, true} {
				ldm := n + 3
				m := winoRand(rng, 15*ldm+n)
				bias := winoRand(rng, n)
				var mask []float32
				if masked {
					mask = make([]float32, 4*n)
					for i := range mask {
						mask[i] = float32(rng.IntN(2))
					}
					if n > 2 {
						mask[2] = float32(math.NaN()) // NaN masks drop, as !(NaN > 0)
					}
				}
				if n > 5 {
					m[4*ldm+5] = float32(math.NaN())
				}
				const alpha = 1.25
				winoSame(t, "WinoOutPool", func() [][]float32 {
					out := make([]float32, n)
					arg := make([]uint8, n)
					WinoOutPool(out, arg, m, ldm, bias, alpha, mask, flags)
					for k := 0; k < n; k++ {
						var y [4]float64
						for i := 0; i < 2; i++ {
							for j := 0; j < 2; j++ {
								for r := 0; r < 4; r++ {
									for s := 0; s < 4; s++ {
										y[2*i+j] += winoAT[i][r] * float64(m[(4*r+s)*ldm+k]) * winoAT[j][s]
									}
								}
							}
						}
						for q := range y {
							y[q] = math.Max((y[q]+float64(bias[k]))*alpha, 0)
							if mask != nil && !(mask[q*n+k] > 0) {
								y[q] = 0
							}
						}
						if flags&WinoNoCol1 != 0 {
							y[1], y[3] = y[0], y[2]
						}
						if flags&WinoNoRow1 != 0 {
							y[2], y[3] = y[0], y[1]
						}
						want := slices.Max(y[:])
						if math.IsNaN(y[0]) || math.IsNaN(y[1]) || math.IsNaN(y[2]) || math.IsNaN(y[3]) {
							if !math.IsNaN(float64(out[k])) && !(mask != nil && n > 5 && k == 5) {
								t.Fatalf("n=%d flags=%d k=%d: NaN cell pooled to %g", n, flags, k, out[k])
							}
							continue
						}
						if math.Abs(float64(out[k])-want) > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("n=%d flags=%d mask=%v k=%d: got %g, want %g", n, flags, masked, k, out[k], want)
						}
						if a := arg[k]; (flags&WinoNoCol1 != 0 && a%2 == 1) || (flags&WinoNoRow1 != 0 && a >= 2) {
							t.Fatalf("n=%d flags=%d k=%d: missing cell %d reported", n, flags, k, a)
						}
						if y[arg[k]] != want && math.Abs(y[arg[k]]-want) > 1e-5*(1+want) {
							t.Fatalf("n=%d flags=%d k=%d: cell %d holds %g, maximum %g", n, flags, k, arg[k], y[arg[k]], want)
						}
					}
					return [][]float32{out, u8f(arg)}
				})
			}
		}
	}
}

func u8f(b []uint8) []float32 {
	f := make([]float32, len(b))
	for i, v := range b {
		f[i] = float32(v)
	}
	return f
}

func TestWinoGradOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range winoChannels {
		ldm := n + 1
		g, out := winoRand(rng, n), winoRand(rng, n)
		arg := make([]uint8, n)
		for i := range arg {
			arg[i] = uint8(rng.IntN(4))
		}
		db0 := winoRand(rng, n)
		const alpha = 1.5
		winoSame(t, "WinoGradOut", func() [][]float32 {
			dm := make([]float32, 15*ldm+n)
			db := slices.Clone(db0)
			WinoGradOut(dm, ldm, db, g, out, arg, alpha)
			for k := 0; k < n; k++ {
				v := 0.0
				if out[k] > 0 {
					v = alpha * float64(g[k])
				}
				if math.Abs(float64(db[k])-(float64(db0[k])+v)) > 1e-6*(1+math.Abs(v)) {
					t.Fatalf("n=%d k=%d: db %g, want %g", n, k, db[k], float64(db0[k])+v)
				}
				// dM = A·dY·Aᵀ with dY one-hot at arg.
				i, j := int(arg[k])/2, int(arg[k])%2
				for r := 0; r < 4; r++ {
					for s := 0; s < 4; s++ {
						want := winoAT[i][r] * v * winoAT[j][s]
						if got := float64(dm[(4*r+s)*ldm+k]); math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
							t.Fatalf("n=%d k=%d ξ=%d: got %g, want %g", n, k, 4*r+s, got, want)
						}
					}
				}
			}
			return [][]float32{dm, db}
		})
	}
}

func BenchmarkWino(b *testing.B) {
	const c, tiles = 64, 49
	rng := rand.New(rand.NewPCG(1, 1))
	img := winoRand(rng, 16*16*c)
	v := make([]float32, 16*tiles*c)
	out, arg, bias := make([]float32, c), make([]uint8, c), winoRand(rng, c)
	mask := make([]float32, 4*c)
	for _, im := range impls {
		old := active
		active = im
		b.Run(im.name+"/in", func(b *testing.B) {
			for b.Loop() {
				for t := 0; t < tiles; t++ {
					WinoIn(v[t*c:], tiles*c, img[(2*(t/7)*16+2*(t%7))*c:], 16*c, c)
				}
			}
		})
		b.Run(im.name+"/outpool", func(b *testing.B) {
			for b.Loop() {
				for t := 0; t < tiles; t++ {
					WinoOutPool(out, arg, v[t*c:], tiles*c, bias, 1.1, mask, 0)
				}
			}
		})
		b.Run(im.name+"/gradout", func(b *testing.B) {
			for b.Loop() {
				for t := 0; t < tiles; t++ {
					WinoGradOut(v[t*c:], tiles*c, bias, out, out, arg, 1.1)
				}
			}
		})
		b.Run(im.name+"/inT", func(b *testing.B) {
			for b.Loop() {
				for t := 0; t < tiles; t++ {
					WinoInT(img[(2*(t/7)*16+2*(t%7))*c:], 16*c, v[t*c:], tiles*c, c)
				}
			}
		})
		active = old
	}
}

// The portable tile kernels (which the convolution's float64 path runs)
// evaluate exactly what the float32 ones do, assembly included.
func TestWinoGoMatchesKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 14))
	r := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, c := range []int{3, 8, 64, 70} {
		ld := c + 1
		src := r(3*5*c + 4*c)
		v1, v2 := make([]float32, 15*ld+c), make([]float32, 15*ld+c)
		WinoIn(v1, ld, src, 5*c, c)
		WinoInGo(v2, ld, src, 5*c, c)
		if !slices.Equal(v1, v2) {
			t.Errorf("c=%d: WinoIn differs", c)
		}
		bias, mask := r(c), r(4*c)
		for flags := 0; flags < 4; flags++ {
			o1, o2 := make([]float32, c), make([]float32, c)
			a1, a2 := make([]uint8, c), make([]uint8, c)
			WinoOutPool(o1, a1, v1, ld, bias, 1.5, mask, flags)
			WinoOutPoolGo(o2, a2, v1, ld, bias, 1.5, mask, flags)
			if !slices.Equal(o1, o2) || !slices.Equal(a1, a2) {
				t.Errorf("c=%d flags=%d: WinoOutPool differs", c, flags)
			}
		}
		g, out := r(c), r(c)
		arg := make([]uint8, c)
		for i := range arg {
			arg[i] = uint8(rng.IntN(4))
		}
		d1, d2 := make([]float32, 15*ld+c), make([]float32, 15*ld+c)
		db1, db2 := r(c), make([]float32, c)
		copy(db2, db1)
		WinoGradOut(d1, ld, db1, g, out, arg, 0.5)
		WinoGradOutGo(d2, ld, db2, g, out, arg, 0.5)
		if !slices.Equal(d1, d2) || !slices.Equal(db1, db2) {
			t.Errorf("c=%d: WinoGradOut differs", c)
		}
		x1 := r(3*5*c + 4*c)
		x2 := slices.Clone(x1)
		WinoInT(x1, 5*c, d1, ld, c)
		WinoInTGo(x2, 5*c, d1, ld, c)
		if !slices.Equal(x1, x2) {
			t.Errorf("c=%d: WinoInT differs", c)
		}
	}
}

// WinoOut computes Aᵀ M A (checked in float64 against the definition),
// writes or adds only the cells the flags leave, and gives the same bytes
// with every kernel set.
func TestWinoOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	for _, n := range winoChannels {
		ldm, ldd := n+3, 3*n+5
		m := winoRand(rng, 15*ldm+n)
		base := winoRand(rng, ldd+2*n)
		for flags := 0; flags < 8; flags++ {
			winoSame(t, "WinoOut", func() [][]float32 {
				dst := slices.Clone(base)
				WinoOut(dst, ldd, m, ldm, n, flags)
				for i, v := range dst {
					a, rest := i/ldd, i%ldd
					b, k := rest/n, rest%n
					old := float64(base[i])
					if rest >= 2*n || b == 1 && flags&WinoNoCol1 != 0 || a == 1 && flags&WinoNoRow1 != 0 {
						if v != base[i] {
							t.Fatalf("n=%d flags=%d: element %d outside the tile's cells changed", n, flags, i)
						}
						continue
					}
					want := 0.0
					for r := 0; r < 4; r++ {
						for s := 0; s < 4; s++ {
							want += winoAT[a][r] * float64(m[(4*r+s)*ldm+k]) * winoAT[b][s]
						}
					}
					if flags&WinoAdd != 0 {
						want += old
					}
					if math.Abs(float64(v)-want) > 1e-5*(1+math.Abs(want)) {
						t.Fatalf("n=%d flags=%d: cell (%d,%d) filter %d = %g, want %g", n, flags, a, b, k, v, want)
					}
				}
				return [][]float32{dst}
			})
			d1, d2 := slices.Clone(base), slices.Clone(base)
			WinoOut(d1, ldd, m, ldm, n, flags)
			WinoOutGo(d2, ldd, m, ldm, n, flags)
			if !slices.Equal(d1, d2) {
				t.Errorf("n=%d flags=%d: WinoOutGo differs from WinoOut", n, flags)
			}
		}
	}
}
