package datasets

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// patterned is a fixed-shape source whose images are random values drawn
// from the rng, so that any shift of one changes it, and whose labels
// come from the same rng.
type patterned struct{ h, w, c, way int }

func (p patterned) Name() string { return "patterned" }
func (p patterned) InDim() int   { return p.h * p.w * p.c }
func (p patterned) OutDim() int  { return p.way }
func (p patterned) Sample(rng *rand.Rand, b *task.Batch) {
	for i := range b.XS[:b.T*b.NS*b.InDim] {
		b.XS[i] = 1 + rng.Float64()
	}
	for i := range b.XQ[:b.T*b.NQ*b.InDim] {
		b.XQ[i] = 1 + rng.Float64()
	}
	for i := range b.YS {
		b.YS[i] = float64(rng.IntN(2))
	}
	for i := range b.YQ {
		b.YQ[i] = float64(rng.IntN(2))
	}
}

// patternedVarying is patterned drawing one episode of its own size.
type patternedVarying struct{ patterned }

func (p patternedVarying) SampleVarying(rng *rand.Rand, b *task.Batch) {
	b.Resize(1, 2+rng.IntN(3), 3, p.InDim(), p.way)
	p.Sample(rng, b)
}

// Shifted episodes are the source's episodes, drawn from the same rng
// first, with every image moved by its own shift of at most maxShift;
// the labels are untouched, the same seed gives the same bytes, and a
// varying source stays varying.
func TestShiftedEpisodes(t *testing.T) {
	const h, w, c, k = 6, 7, 2, 2
	plain := patterned{h, w, c, 3}
	shiftedSrc, err := Shifted(plain, h, w, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := shiftedSrc.(task.Varying); ok {
		t.Error("a fixed-shape source became varying")
	}
	if same, _ := Shifted(plain, h, w, c, 0); same != task.Source(plain) {
		t.Error("a shift of 0 should return the source itself")
	}
	draw := func(src task.Source) task.Batch {
		var b task.Batch
		b.Resize(2, 3, 4, src.InDim(), src.OutDim())
		src.Sample(rand.New(rand.NewPCG(7, 9)), &b)
		return b
	}
	p, s, s2 := draw(plain), draw(shiftedSrc), draw(shiftedSrc)
	if !slices.Equal(s.XS, s2.XS) || !slices.Equal(s.XQ, s2.XQ) {
		t.Error("the same seed gave different shifted images")
	}
	if !slices.Equal(p.YS, s.YS) || !slices.Equal(p.YQ, s.YQ) {
		t.Error("shifting changed the labels")
	}
	moved := map[[2]int]int{}
	in := plain.InDim()
	tmp := make([]float64, in)
	for _, pair := range [][2][]float64{{p.XS, s.XS}, {p.XQ, s.XQ}} {
		for r := 0; r < len(pair[0]); r += in {
			got := pair[1][r : r+in]
			found := false
			for dy := -k; dy <= k && !found; dy++ {
				for dx := -k; dx <= k && !found; dx++ {
					want := slices.Clone(pair[0][r : r+in])
					task.ShiftImage(want, tmp, h, w, c, dy, dx)
					if slices.Equal(got, want) {
						moved[[2]int{dy, dx}]++
						found = true
					}
				}
			}
			if !found {
				t.Fatalf("image at row %d is no shift of its unshifted draw by at most %d", r/in, k)
			}
		}
	}
	if len(moved) < 5 {
		t.Errorf("20 images took only %d distinct shifts: %v", len(moved), moved)
	}

	checkVaryingAugmented(t, func(src task.Source) (task.Source, error) { return Shifted(src, h, w, c, k) })
}

// checkVaryingAugmented checks that wrap keeps a varying source varying,
// its episode's shape and labels, and changes its support images.
func checkVaryingAugmented(t *testing.T, wrap func(task.Source) (task.Source, error)) {
	t.Helper()
	plain := patternedVarying{patterned{6, 7, 2, 3}}
	vary, err := wrap(plain)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := vary.(task.Varying)
	if !ok {
		t.Fatal("a varying source lost SampleVarying")
	}
	in := plain.InDim()
	var vp, vs task.Batch
	plain.SampleVarying(rand.New(rand.NewPCG(3, 4)), &vp)
	v.SampleVarying(rand.New(rand.NewPCG(3, 4)), &vs)
	if vp.NS != vs.NS || !slices.Equal(vp.YS, vs.YS) || slices.Equal(vp.XS[:vp.NS*in], vs.XS[:vs.NS*in]) {
		t.Errorf("varying: %d support rows against %d, labels equal %v, images changed %v",
			vs.NS, vp.NS, slices.Equal(vp.YS, vs.YS), !slices.Equal(vp.XS[:vp.NS*in], vs.XS[:vs.NS*in]))
	}
}

func TestShiftedRefuses(t *testing.T) {
	for _, tc := range []struct {
		h, w, c, k int
		want       string
	}{
		{6, 7, 2, 6, "out of their frame"},
		{6, 7, 2, -1, "must be positive"},
		{5, 7, 2, 1, "not the 70 of a 5×7×2 image"},
	} {
		if _, err := Shifted(patterned{6, 7, 2, 3}, tc.h, tc.w, tc.c, tc.k); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Shifted(%d×%d×%d, %d): %v, want an error saying %q", tc.h, tc.w, tc.c, tc.k, err, tc.want)
		}
	}
}

// BenchmarkAugmentedSample measures what augment_shift, augment_rotate and
// augment_scale add to an iteration's sampling at six 60-way 1-shot tasks,
// 5 queries a class: 2,160 images, the number the shipped 1-shot recipes'
// four 90-way tasks also draw: the plain sampler, then the same wrapped
// with shifts of up to 2 pixels, then with turns of up to 10° and scales
// of up to ±15% as well.
func BenchmarkAugmentedSample(b *testing.B) {
	o := realOmniglot(b)
	train, err := o.Split("train")
	if err != nil {
		b.Fatal(err)
	}
	e, err := NewEpisodes(train, 60, 1, 5)
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range []struct {
		name       string
		shift      int
		deg, scale float64
	}{{"plain", 0, 0, 0}, {"shift2", 2, 0, 0}, {"shift2-rotate10-scale0.15", 2, 10, 0.15}} {
		src, err := Shifted(e, OmniglotSide, OmniglotSide, 1, a.shift)
		if err == nil {
			src, err = Warped(src, OmniglotSide, OmniglotSide, 1, a.deg, a.scale)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Run(a.name, func(b *testing.B) {
			var batch task.Batch
			batch.Resize(6, 60, 300, OmniglotPixels, 60)
			rng := rand.New(rand.NewPCG(1, 1))
			b.ReportAllocs()
			for b.Loop() {
				src.Sample(rng, &batch)
			}
		})
	}
}
