package datasets

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// Bilinear interpolation is exact on a function linear in (y, x), so a
// warp of a linear image must give, wherever its source point lies inside
// the image, the linear function at that point; a half turn and a quarter
// turn of a square image must move pixels onto pixels; points far outside
// read zero; no turn and no scale is the image itself, to the bit.
func TestWarpImage(t *testing.T) {
	const h, w, c = 9, 8, 2
	lin := func(y, x float64, ch int) float64 { return 0.5 + 0.25*y - 0.125*x + float64(ch) }
	linear := func() []float64 {
		img := make([]float64, h*w*c)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				for ch := 0; ch < c; ch++ {
					img[(y*w+x)*c+ch] = lin(float64(y), float64(x), ch)
				}
			}
		}
		return img
	}
	tmp := make([]float64, h*w*c)
	cy, cx := float64(h-1)/2, float64(w-1)/2
	for _, tc := range [][2]float64{{0.3, 1}, {-0.2, 0.85}, {0, 1.2}, {1.1, 0.9}} {
		theta, scale := tc[0], tc[1]
		img := linear()
		warpImage(img, tmp, h, w, c, theta, scale)
		inside := 0
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				dy, dx := float64(y)-cy, float64(x)-cx
				sy := cy + (math.Cos(theta)*dy+math.Sin(theta)*dx)/scale
				sx := cx + (-math.Sin(theta)*dy+math.Cos(theta)*dx)/scale
				if sy < 0 || sy > h-1 || sx < 0 || sx > w-1 {
					continue
				}
				inside++
				for ch := 0; ch < c; ch++ {
					if got, want := img[(y*w+x)*c+ch], lin(sy, sx, ch); math.Abs(got-want) > 1e-12 {
						t.Fatalf("θ %v, scale %v: pixel (%d, %d, %d) = %v, want %v", theta, scale, y, x, ch, got, want)
					}
				}
			}
		}
		if inside < h*w/2 {
			t.Errorf("θ %v, scale %v: only %d of %d pixels read inside the image", theta, scale, inside, h*w)
		}
	}

	same := linear()
	warpImage(same, tmp, h, w, c, 0, 1)
	if !slices.Equal(same, linear()) {
		t.Error("no turn and no scale changed the image")
	}

	const n = 6
	sq := make([]float64, n*n)
	for i := range sq {
		sq[i] = float64(i + 1)
	}
	half := slices.Clone(sq)
	warpImage(half, make([]float64, n*n), n, n, 1, math.Pi, 1)
	quarter := slices.Clone(sq)
	warpImage(quarter, make([]float64, n*n), n, n, 1, math.Pi/2, 1)
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			if got, want := half[y*n+x], sq[(n-1-y)*n+(n-1-x)]; math.Abs(got-want) > 1e-9 {
				t.Fatalf("half turn: pixel (%d, %d) = %v, want %v", y, x, got, want)
			}
			// Output (y, x) reads the input at (x, n−1−y) for θ = π/2.
			if got, want := quarter[y*n+x], sq[x*n+(n-1-y)]; math.Abs(got-want) > 1e-9 {
				t.Fatalf("quarter turn: pixel (%d, %d) = %v, want %v", y, x, got, want)
			}
		}
	}

	// Shrunk to a third, the image lies inside its frame with a zero
	// border: the corners read points three times as far out.
	small := slices.Clone(sq)
	warpImage(small, make([]float64, n*n), n, n, 1, 0, 1.0/3)
	for _, p := range [][2]int{{0, 0}, {0, n - 1}, {n - 1, 0}, {n - 1, n - 1}} {
		if v := small[p[0]*n+p[1]]; v != 0 {
			t.Errorf("shrunk to a third: corner %v = %v, want 0", p, v)
		}
	}
}

// Warped episodes are the source's episodes, drawn from the same rng
// first, with every image turned and scaled by its own draw within the
// bounds; the labels are untouched, the same seed gives the same bytes,
// no two images take the same warp, and a varying source stays varying.
func TestWarpedEpisodes(t *testing.T) {
	const h, w, c = 6, 7, 2
	const maxDeg, maxScale = 10.0, 0.2
	plain := patterned{h, w, c, 3}
	src, err := Warped(plain, h, w, c, maxDeg, maxScale)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(task.Varying); ok {
		t.Error("a fixed-shape source became varying")
	}
	if same, _ := Warped(plain, h, w, c, 0, 0); same != task.Source(plain) {
		t.Error("no turn and no scale should return the source itself")
	}
	draw := func(src task.Source) task.Batch {
		var b task.Batch
		b.Resize(2, 3, 4, src.InDim(), src.OutDim())
		src.Sample(rand.New(rand.NewPCG(7, 9)), &b)
		return b
	}
	p, s, s2 := draw(plain), draw(src), draw(src)
	if !slices.Equal(s.XS, s2.XS) || !slices.Equal(s.XQ, s2.XQ) {
		t.Error("the same seed gave different warped images")
	}
	if !slices.Equal(p.YS, s.YS) || !slices.Equal(p.YQ, s.YQ) {
		t.Error("warping changed the labels")
	}

	// Replay the draws: the wrapped source's own draws come first, then
	// an angle and a scale per image, support rows then query rows.
	rng := rand.New(rand.NewPCG(7, 9))
	var b task.Batch
	b.Resize(2, 3, 4, plain.InDim(), plain.OutDim())
	plain.Sample(rng, &b)
	in := plain.InDim()
	tmp := make([]float64, in)
	seen := map[float64]bool{}
	maxRad := maxDeg * math.Pi / 180
	for _, pair := range [][2][]float64{{p.XS, s.XS}, {p.XQ, s.XQ}} {
		for r := 0; r < len(pair[0]); r += in {
			theta := (2*rng.Float64() - 1) * maxRad
			scale := 1 + (2*rng.Float64()-1)*maxScale
			if math.Abs(theta) > maxRad || math.Abs(scale-1) > maxScale {
				t.Fatalf("image %d: θ %v, scale %v outside the bounds", r/in, theta, scale)
			}
			seen[theta] = true
			want := slices.Clone(pair[0][r : r+in])
			warpImage(want, tmp, h, w, c, theta, scale)
			if !slices.Equal(pair[1][r:r+in], want) {
				t.Fatalf("image at row %d is not its unwarped draw turned by %v and scaled by %v", r/in, theta, scale)
			}
		}
	}
	if len(seen) != 2*3+2*4 {
		t.Errorf("14 images took %d distinct angles", len(seen))
	}

	checkVaryingAugmented(t, func(src task.Source) (task.Source, error) { return Warped(src, h, w, c, maxDeg, 0) })
}

func TestWarpedRefuses(t *testing.T) {
	for _, tc := range []struct {
		h, w, c    int
		deg, scale float64
		want       string
	}{
		{6, 7, 2, 181, 0, "give 0 … 180"},
		{6, 7, 2, -5, 0, "give 0 … 180"},
		{6, 7, 2, math.NaN(), 0, "give 0 … 180"},
		{6, 7, 2, 0, 1, "under 1"},
		{6, 7, 2, 0, -0.1, "under 1"},
		{5, 7, 2, 10, 0, "not the 70 of a 5×7×2 image"},
	} {
		if _, err := Warped(patterned{6, 7, 2, 3}, tc.h, tc.w, tc.c, tc.deg, tc.scale); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Warped(%d×%d×%d, %v°, ±%v): %v, want an error saying %q", tc.h, tc.w, tc.c, tc.deg, tc.scale, err, tc.want)
		}
	}
}
