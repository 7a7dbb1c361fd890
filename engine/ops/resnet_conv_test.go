package ops

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// resIm2colRef is resIm2col as first written, dividing the image, pixel,
// tap and channel out of every row and segment: the reference the stepped
// version must match.
func resIm2colRef(dst []float32, ldd int, src []float32, cv *resConv, r0, r1, c0, c1 int) {
	cin, k := cv.In, cv.K
	for r := r0; r < r1; r++ {
		i, q := r/cv.po, r%cv.po
		y0, x0 := (q/cv.OutWidth)*cv.Stride-cv.pt, (q%cv.OutWidth)*cv.Stride-cv.pl
		img := src[i*cv.p*cin : (i+1)*cv.p*cin]
		row := dst[(r-r0)*ldd : (r-r0)*ldd+c1-c0]
		for j := c0; j < c1; {
			tap, ch := j/cin, j%cin
			n := min(cin-ch, c1-j)
			seg := row[j-c0 : j-c0+n]
			if iy, ix := y0+tap/k, x0+tap%k; iy < 0 || iy >= cv.Height || ix < 0 || ix >= cv.Width {
				clear(seg)
			} else {
				copy(seg, img[(iy*cv.Width+ix)*cin+ch:])
			}
			j += n
		}
	}
}

// resCol2imRef is resCol2im as first written, tap by tap with the pixel
// divided out of every row.
func resCol2imRef(dst, col []float32, cv *resConv, r0, r1 int) {
	cin, k := cv.In, cv.K
	for r := r0; r < r1; r++ {
		i, q := r/cv.po, r%cv.po
		y0, x0 := (q/cv.OutWidth)*cv.Stride-cv.pt, (q%cv.OutWidth)*cv.Stride-cv.pl
		img := dst[i*cv.p*cin : (i+1)*cv.p*cin]
		row := col[(r-r0)*cv.kk : (r-r0+1)*cv.kk]
		for tap := range k * k {
			iy, ix := y0+tap/k, x0+tap%k
			if iy < 0 || iy >= cv.Height || ix < 0 || ix >= cv.Width {
				continue
			}
			d := img[(iy*cv.Width+ix)*cin : (iy*cv.Width+ix+1)*cin]
			for c, v := range row[tap*cin : (tap+1)*cin] {
				d[c] += v
			}
		}
	}
}

// TestResCol2imMatchesReference: the same bytes as the reference (every
// input value gets its terms in the same order) for every convolution of
// the networks of TestResIm2colMatchesReference, rows starting mid-image.
func TestResCol2imMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 3))
	for _, s := range []ResNetSpec{ResNet18(3, 84, 84), resTiny, ResNet18(1, 13, 9)} {
		cvs, _ := resLayers(s)
		for _, cv := range cvs {
			const N = 3
			R := N * cv.po
			r0 := rng.IntN(R)
			r1 := r0 + 1 + rng.IntN(R-r0)
			col := make([]float32, (r1-r0)*cv.kk)
			for i := range col {
				col[i] = float32(rng.NormFloat64())
			}
			got := make([]float32, N*cv.p*cv.In)
			for i := range got {
				got[i] = float32(rng.NormFloat64())
			}
			want := slices.Clone(got)
			resCol2im(got, col, &cv, r0, r1)
			resCol2imRef(want, col, &cv, r0, r1)
			if !slices.Equal(got, want) {
				t.Fatalf("%v %s rows %d…%d differ", s, cv.Name, r0, r1)
			}
		}
	}
}

// TestResIm2colMatchesReference: every convolution of ResNet-18 at 84×84
// and of the tiny test network, rows starting mid-image and column ranges
// starting and ending mid-tap (the weight-gradient units'), give the
// reference's values.
func TestResIm2colMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 2))
	for _, s := range []ResNetSpec{ResNet18(3, 84, 84), resTiny, ResNet18(1, 13, 9)} {
		cvs, _ := resLayers(s)
		for _, cv := range cvs {
			const N = 3
			src := make([]float32, N*cv.p*cv.In)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			R := N * cv.po
			for range 6 {
				r0 := rng.IntN(R)
				r1 := r0 + 1 + rng.IntN(R-r0)
				c0 := rng.IntN(cv.kk)
				c1 := c0 + 1 + rng.IntN(cv.kk-c0)
				w := c1 - c0
				got, want := make([]float32, (r1-r0)*w), make([]float32, (r1-r0)*w)
				for i := range got {
					got[i], want[i] = 7, 7 // every value must be written
				}
				resIm2col(got, w, src, &cv, r0, r1, c0, c1)
				resIm2colRef(want, w, src, &cv, r0, r1, c0, c1)
				if !slices.Equal(got, want) {
					t.Fatalf("%v %s rows %d…%d columns %d…%d differ", s, cv.Name, r0, r1, c0, c1)
				}
			}
		}
	}
}
