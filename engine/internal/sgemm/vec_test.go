package sgemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// accuracyGrid returns n points evenly spread over [lo, hi] plus special
// values near the branch points.
func accuracyGrid(lo, hi float64, n int) []float32 {
	x := make([]float32, 0, n+8)
	for i := 0; i < n; i++ {
		x = append(x, float32(lo+(hi-lo)*float64(i)/float64(n-1)))
	}
	for _, v := range []float32{0, tanhCut, -tanhCut, math.Nextafter32(tanhCut, 0), 1e-30, -1e-30, 1e-8} {
		if float64(v) >= lo && float64(v) <= hi {
			x = append(x, v)
		}
	}
	return x
}

// Tested error bounds of the approximations. Measured maxima over these
// grids (2²⁰ points): exp 8.3e-8 relative, tanh 7.4e-8 absolute and
// 1.3e-7 relative, i.e. about 1-2 ulp.
const (
	expRelBound  = 2e-7 // relative, on [expLo, expHi]
	tanhAbsBound = 2e-7 // absolute, anywhere
	tanhRelBound = 3e-7 // relative, anywhere
)

func TestExpTanhAccuracy(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		x := accuracyGrid(expLo, expHi, 1<<20)
		y := make([]float32, len(x))
		Exp(y, x)
		worst := 0.0
		for i, v := range x {
			want := math.Exp(float64(v))
			e := math.Abs(float64(y[i])-want) / want
			worst = math.Max(worst, e)
			if !(e <= expRelBound) {
				t.Fatalf("exp(%g) = %g, want %g (relative error %g)", v, y[i], want, e)
			}
		}
		t.Logf("exp: max relative error %.3g", worst)

		x = accuracyGrid(-20, 20, 1<<20)
		y = make([]float32, len(x))
		Tanh(y, x)
		wa, wr := 0.0, 0.0
		for i, v := range x {
			want := math.Tanh(float64(v))
			ea := math.Abs(float64(y[i]) - want)
			er := 0.0
			if want != 0 {
				er = ea / math.Abs(want)
			}
			wa, wr = math.Max(wa, ea), math.Max(wr, er)
			if !(ea <= tanhAbsBound && er <= tanhRelBound) {
				t.Fatalf("tanh(%g) = %g, want %g (errors %g, %g)", v, y[i], want, ea, er)
			}
		}
		t.Logf("tanh: max absolute error %.3g, max relative error %.3g", wa, wr)
	})
}

// TestExpTanhSpecial: NaN passes through, the results saturate instead of
// overflowing, and odd symmetry holds exactly for tanh.
func TestExpTanhSpecial(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		nan := float32(math.NaN())
		inf := float32(math.Inf(1))
		x := []float32{nan, inf, -inf, 1000, -1000, 88, 89, -87, -88, 0, 1, -1, nan, 3, 5, 7}
		e := make([]float32, len(x))
		th := make([]float32, len(x))
		Exp(e, x)
		Tanh(th, x)
		for i, v := range x {
			switch {
			case v != v:
				if e[i] == e[i] || th[i] == th[i] {
					t.Errorf("NaN in: exp %g, tanh %g", e[i], th[i])
				}
				continue
			case math.IsInf(float64(e[i]), 0) || e[i] < 0 || th[i] < -1 || th[i] > 1:
				t.Errorf("x = %g: exp %g, tanh %g out of range", v, e[i], th[i])
			}
			var neg [1]float32
			Tanh(neg[:], []float32{-v})
			if neg[0] != -th[i] {
				t.Errorf("tanh(-%g) = %g, want %g", v, neg[0], -th[i])
			}
		}
		if th[1] != 1 || th[2] != -1 || e[9] != 1 {
			t.Errorf("tanh(±Inf) = %g, %g; exp(0) = %g", th[1], th[2], e[9])
		}
	})
}

// TestAffineCoupling compares the fused kernels with float64 evaluations of
// their formulas, at lengths that exercise the vector body and the tail.
func TestAffineCoupling(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 1))
		for _, n := range []int{1, 7, 8, 9, 16, 31, 128} {
			r := func(s float64) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = float32(s * rng.NormFloat64())
				}
				return v
			}
			x, o, tt, ld := r(1), r(2), r(1), r(1)
			ld0 := append([]float32(nil), ld...)
			y, s := make([]float32, n), make([]float32, n)
			AffineCoupling(y, x, o, tt, s, ld)
			for i := 0; i < n; i++ {
				sv := math.Tanh(float64(o[i]))
				ev := math.Exp(sv)
				yv := float64(x[i])*ev + float64(tt[i])
				if math.Abs(float64(s[i])-sv) > 3e-7 ||
					math.Abs(float64(y[i])-yv) > 1e-6*(math.Abs(float64(x[i])*ev)+math.Abs(float64(tt[i]))) ||
					math.Abs(float64(ld[i])-(float64(ld0[i])+sv)) > 1e-6*(1+math.Abs(float64(ld0[i]))) {
					t.Fatalf("n=%d i=%d: s %g y %g ld %g; want %g %g %g", n, i, s[i], y[i], ld[i], sv, yv, float64(ld0[i])+sv)
				}
			}
			g, gl := r(1), r(1)
			g0 := append([]float32(nil), g...)
			gs, gt := make([]float32, n), make([]float32, n)
			AffineCouplingGrad(gs, gt, g, x, s, gl)
			for i := 0; i < n; i++ {
				gv, sv := float64(g0[i]), float64(s[i])
				ev := math.Exp(sv)
				want := (gv*ev*float64(x[i]) + float64(gl[i])) * (1 - sv*sv)
				mag := (math.Abs(gv*ev*float64(x[i])) + math.Abs(float64(gl[i])))
				if math.Abs(float64(gs[i])-want) > 1e-6*mag || gt[i] != g0[i] || math.Abs(float64(g[i])-gv*ev) > 1e-6*math.Abs(gv*ev) {
					t.Fatalf("n=%d i=%d: gs %g gt %g g %g; want %g %g %g", n, i, gs[i], gt[i], g[i], want, gv, gv*ev)
				}
			}
		}
	})
}

func TestAddRowSums(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(2, 2))
		for _, sh := range [][3]int{{1, 1, 1}, {3, 8, 8}, {5, 33, 40}, {128, 128, 128}, {4, 100, 130}, {2, 7, 7}, {40, 257, 260}} {
			rows, cols, ld := sh[0], sh[1], sh[2]
			src := make([]float32, (rows-1)*ld+cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			dst := make([]float32, rows)
			for i := range dst {
				dst[i] = float32(i)
			}
			AddRowSums(dst, src, rows, cols, ld)
			for i := 0; i < rows; i++ {
				s, mag := float64(i), float64(i)
				for _, v := range src[i*ld : i*ld+cols] {
					s += float64(v)
					mag += math.Abs(float64(v))
				}
				if math.Abs(float64(dst[i])-s) > 1e-6*mag {
					t.Fatalf("%v row %d: %g, want %g", sh, i, dst[i], s)
				}
			}
		}
	})
}

func TestTranspose(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, sh := range [][4]int{{1, 1, 1, 1}, {8, 8, 8, 8}, {20, 128, 128, 20}, {128, 40, 40, 128}, {13, 29, 31, 17}, {16, 9, 9, 20}, {9, 16, 20, 9}} {
			rows, cols, lds, ldd := sh[0], sh[1], sh[2], sh[3]
			src := make([]float32, (rows-1)*lds+cols)
			for i := range src {
				src[i] = float32(i)
			}
			dst := make([]float32, (cols-1)*ldd+rows+5)
			for i := range dst {
				dst[i] = guard
			}
			Transpose(dst, ldd, src, lds, rows, cols)
			for j := 0; j < cols; j++ {
				for i := 0; i < ldd && j*ldd+i < len(dst); i++ {
					want := guard
					if i < rows {
						want = src[i*lds+j]
					}
					if dst[j*ldd+i] != want {
						t.Fatalf("%v: dst[%d][%d] = %g, want %g", sh, j, i, dst[j*ldd+i], want)
					}
				}
			}
		}
	})
}

func TestConvert(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, sh := range [][4]int{{1, 1, 1, 1}, {128, 40, 41, 40}, {3, 7, 9, 8}, {5, 4, 4, 6}} {
			rows, cols, lds, ldd := sh[0], sh[1], sh[2], sh[3]
			src := make([]float64, (rows-1)*lds+cols)
			for i := range src {
				src[i] = math.Pi * float64(i-len(src)/2)
			}
			f32 := make([]float32, (rows-1)*ldd+cols)
			ToFloat32(f32, ldd, src, lds, rows, cols)
			back := make([]float64, (rows-1)*lds+cols)
			ToFloat64(back, lds, f32, ldd, rows, cols)
			for i := 0; i < rows; i++ {
				for j := 0; j < cols; j++ {
					if f32[i*ldd+j] != float32(src[i*lds+j]) || back[i*lds+j] != float64(float32(src[i*lds+j])) {
						t.Fatalf("%v [%d][%d]: %g → %g → %g", sh, i, j, src[i*lds+j], f32[i*ldd+j], back[i*lds+j])
					}
				}
			}
		}
	})
}

func BenchmarkAffineCoupling(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			old := active
			active = im
			defer func() { active = old }()
			n := 128
			v := make([]float32, 7*n)
			for i := range v {
				v[i] = float32(i%17) * 0.1
			}
			for b.Loop() {
				AffineCoupling(v[:n], v[n:2*n], v[2*n:3*n], v[3*n:4*n], v[4*n:5*n], v[5*n:6*n])
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
		})
	}
}

func TestAddToFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 100} {
		src := make([]float32, n)
		base := make([]float64, n)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
			base[i] = rng.NormFloat64() * 1e3
		}
		forEachImpl(t, func(t *testing.T) {
			dst := append([]float64(nil), base...)
			AddToFloat64(dst, src)
			for i := range dst {
				if dst[i] != base[i]+float64(src[i]) {
					t.Fatalf("n=%d i=%d: got %g, want %g", n, i, dst[i], base[i]+float64(src[i]))
				}
			}
		})
	}
}
