package ops

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/mkbench/mkbench/engine/internal/sgemm"
)

// convProblem is a batch of images with parameters and an output gradient
// R, for loss = Σ out ⊙ R.
type convProblem struct {
	spec   ConvSpec
	N      int
	x      []float64
	ws, bs [][]float64
	r      []float64
}

func newConvProblem(spec ConvSpec, N int, seed uint64) *convProblem {
	rng := rand.New(rand.NewPCG(seed, 77))
	p := &convProblem{spec: spec, N: N}
	p.x = make([]float64, N*spec.InDim())
	for i := range p.x {
		p.x[i] = rng.Float64() // pixel intensities
	}
	p.ws, p.bs = make([][]float64, spec.Blocks), make([][]float64, spec.Blocks)
	for l := range p.ws {
		p.ws[l] = make([]float64, spec.Filters*spec.FanIn(l))
		p.bs[l] = make([]float64, spec.Filters)
	}
	InitConvParams(spec, rng, p.ws, p.bs)
	// Larger weights than PyTorch's init keep the tiny nets' activations
	// away from zero, where finite differences would straddle the ReLU.
	for l := range p.ws {
		for i := range p.ws[l] {
			p.ws[l][i] *= 2
		}
	}
	p.r = make([]float64, N*spec.OutDim())
	for i := range p.r {
		p.r[i] = rng.NormFloat64()
	}
	return p
}

func newConvKernelPrec(t testing.TB, spec ConvSpec, f64 bool) *ConvKernel {
	return newConvKernelPath(t, spec, f64, convPathAuto)
}

func newConvKernelPath(t testing.TB, spec ConvSpec, f64 bool, path convPath) *ConvKernel {
	t.Helper()
	k, err := NewConvKernel(nil, spec)
	if err != nil {
		t.Fatal(err)
	}
	k.f64, k.path = f64, path
	return k
}

var convPaths = []struct {
	name string
	path convPath
}{{"auto", convPathAuto}, {"im2col", convPathIm2col}, {"winograd", convPathWinograd}}

func (p *convProblem) forward(t testing.TB, k *ConvKernel, seed uint64, train bool) []float64 {
	t.Helper()
	out := make([]float64, p.N*p.spec.OutDim())
	if err := k.Forward(p.N, p.x, p.ws, p.bs, seed, train, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// run returns the output, then the weight and bias gradients of every block.
func (p *convProblem) run(t testing.TB, k *ConvKernel, seed uint64, train bool) (out []float64, gws, gbs [][]float64) {
	t.Helper()
	out = p.forward(t, k, seed, train)
	gws, gbs = make([][]float64, p.spec.Blocks), make([][]float64, p.spec.Blocks)
	for l := range gws {
		gws[l] = make([]float64, len(p.ws[l]))
		gbs[l] = make([]float64, len(p.bs[l]))
	}
	if err := k.Backward(p.r, gws, gbs); err != nil {
		t.Fatal(err)
	}
	return out, gws, gbs
}

func convRelErr(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		num += (a[i] - b[i]) * (a[i] - b[i])
		den += b[i] * b[i]
	}
	return math.Sqrt(num / math.Max(den, 1e-300))
}

var convSpecs = []struct {
	name string
	spec ConvSpec
	N    int
}{
	{"odd-2ch", ConvSpec{Channels: 2, Height: 7, Width: 5, Blocks: 2, Filters: 3, Keep: 0.7}, 3},
	{"rgb", ConvSpec{Channels: 3, Height: 9, Width: 8, Blocks: 3, Filters: 8, Keep: 0.5}, 5},
	{"omniglot-small", ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.9}, 3},
	{"wide", ConvSpec{Channels: 4, Height: 6, Width: 11, Blocks: 2, Filters: 20, Keep: 0.8}, 11},
	{"one-pixel", ConvSpec{Channels: 1, Height: 1, Width: 1, Blocks: 2, Filters: 5, Keep: 1}, 2},
	{"mini", ConvSpec{Channels: 3, Height: 84, Width: 84, Blocks: 4, Filters: 16, Keep: 0.5}, 2},
	// 143-pixel maps go one image per product, so chunks of 2–3 images
	// accumulate over several products.
	{"groups", ConvSpec{Channels: 2, Height: 11, Width: 13, Blocks: 2, Filters: 3, Keep: 0.8}, 20},
	// Floor pooling of odd maps: the last row and column fall out.
	{"floor", ConvSpec{Channels: 2, Height: 11, Width: 9, Blocks: 2, Filters: 3, Keep: 0.7, FloorPool: true}, 3},
	{"floor-wide", ConvSpec{Channels: 3, Height: 21, Width: 21, Blocks: 2, Filters: 17, Keep: 0.8, FloorPool: true}, 2},
}

// TestConvForwardMatchesReference compares both precisions and both paths
// with the direct convolution, with dropout and without.
func TestConvForwardMatchesReference(t *testing.T) {
	for _, c := range convSpecs {
		for _, train := range []bool{true, false} {
			p := newConvProblem(c.spec, c.N, 1)
			want := convReference(c.spec, c.N, p.x, p.ws, p.bs, 42, 0, train)
			for _, path := range convPaths {
				for _, f64 := range []bool{true, false} {
					got := p.forward(t, newConvKernelPath(t, c.spec, f64, path.path), 42, train)
					e := convRelErr(got, want)
					tol := 1e-13
					if !f64 {
						tol = 2e-6
					}
					if e > tol {
						t.Errorf("%s %s train=%v f64=%v: relative error %g vs the direct convolution", c.name, path.name, train, f64, e)
					}
				}
			}
		}
	}
}

func TestConvOutDim(t *testing.T) {
	conv4 := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	if d := conv4.OutDim(); d != 256 {
		t.Errorf("Conv-4 on 28×28×1: OutDim %d, want 256", d)
	}
	cifar := ConvSpec{Channels: 3, Height: 32, Width: 32, Blocks: 4, Filters: 64, Keep: 0.5}
	if d := cifar.OutDim(); d != 256 {
		t.Errorf("Conv-4 on 32×32×3: OutDim %d, want 256", d)
	}
	mini := ConvSpec{Channels: 3, Height: 84, Width: 84, Blocks: 4, Filters: 64, Keep: 0.5}
	if d := mini.OutDim(); d != 6*6*64 {
		t.Errorf("Conv-4 on 84×84×3: OutDim %d, want 2304", d)
	}
	conv5 := ConvSpec{Channels: 3, Height: 84, Width: 84, Blocks: 5, Filters: 64, Keep: 0.5, FloorPool: true}
	if d := conv5.OutDim(); d != 256 {
		t.Errorf("Conv-5 (floor pooling) on 84×84×3: OutDim %d, want 256 (84→42→21→10→5→2)", d)
	}
	if err := (ConvSpec{Channels: 1, Height: 4, Width: 4, Blocks: 3, Filters: 2, Keep: 1, FloorPool: true}).Validate(); err == nil {
		t.Error("floor pooling 4×4 three times: no error")
	}
	// The 7×7 map of the third block pools to 4×4 (SAME).
	if ls := conv4.layers(); ls[2].h != 7 || ls[2].ho != 4 || ls[3].h != 4 || ls[3].ho != 2 {
		t.Errorf("Conv-4 layer sizes %+v", ls)
	}
	p := newConvProblem(conv4, 2, 2)
	out := p.forward(t, newConvKernelPrec(t, conv4, false), 1, true)
	if len(out) != 2*256 {
		t.Errorf("output has %d values, want 512", len(out))
	}
}

// convFD returns central finite differences of loss = Σ out ⊙ r w.r.t.
// every element of v, evaluated by the float64 kernel.
func convFD(t *testing.T, p *convProblem, k *ConvKernel, v []float64, seed uint64) []float64 {
	loss := func() float64 {
		out := p.forward(t, k, seed, true)
		s := 0.0
		for i, o := range out {
			s += o * p.r[i]
		}
		return s
	}
	return fdGrad(v, loss)
}

// TestConvGradFD checks the float64 gradients of every weight and bias
// against finite differences, with dropout on, on odd sizes (SAME pooling
// pads).
func TestConvGradFD(t *testing.T) {
	for _, ci := range []int{0, 1, 6, 7, 8} {
		c := convSpecs[ci]
		if testing.Short() {
			if c.name == "rgb" {
				continue
			}
			if c.name == "groups" {
				c.N = 9 // one chunk of two images
			}
		}
		for _, path := range convPaths[1:] {
			t.Run(c.name+"/"+path.name, func(t *testing.T) {
				convCheckFD(t, c.spec, c.N, path.path)
			})
		}
	}
}

// convCheckFD compares the float64 gradients of a kernel on the given path
// with finite differences of its loss.
func convCheckFD(t *testing.T, spec ConvSpec, N int, path convPath) {
	p := newConvProblem(spec, N, 3)
	k := newConvKernelPath(t, spec, true, path)
	_, gws, gbs := p.run(t, k, 7, true)
	for l := range p.ws {
		for _, x := range []struct {
			name string
			v, g []float64
		}{{"weights", p.ws[l], gws[l]}, {"bias", p.bs[l], gbs[l]}} {
			fd := convFD(t, p, k, x.v, 7)
			e := convRelErr(x.g, fd)
			t.Logf("block %d %s: relative error %.3g", l, x.name, e)
			if e > 1e-7 {
				t.Errorf("block %d %s: relative error %g vs finite differences", l, x.name, e)
			}
		}
	}
}

// TestConvFloat32MatchesFloat64 runs Conv-4 at the Omniglot size in both
// precisions.
func TestConvFloat32MatchesFloat64(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	N := 10
	if testing.Short() {
		N = 3
	}
	p := newConvProblem(spec, N, 4)
	for l := range p.ws {
		for i := range p.ws[l] {
			p.ws[l][i] /= 2 // back to PyTorch's scale
		}
	}
	o32, w32, b32 := p.run(t, newConvKernelPrec(t, spec, false), 9, true)
	o64, w64, b64 := p.run(t, newConvKernelPrec(t, spec, true), 9, true)
	check := func(name string, a, b []float64) {
		e := convRelErr(a, b)
		t.Logf("%s: float32 vs float64 relative error %.3g", name, e)
		if e > 1e-5 {
			t.Errorf("%s: float32 differs from float64 by %g relative", name, e)
		}
	}
	check("output", o32, o64)
	for l := range w32 {
		check("weights", w32[l], w64[l])
		check("bias", b32[l], b64[l])
	}
}

// TestConvDeterministicAcrossGOMAXPROCS: bit-identical outputs and
// gradients with one and two cores, and on a second run of one kernel.
func TestConvDeterministicAcrossGOMAXPROCS(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	N := 20
	if testing.Short() {
		N = 9
	}
	p := newConvProblem(spec, N, 5)
	type result struct {
		out      []float64
		gws, gbs [][]float64
	}
	run := func(procs int, k *ConvKernel) result {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		o, w, b := p.run(t, k, 11, true)
		return result{o, w, b}
	}
	k := newConvKernelPrec(t, spec, false)
	results := []result{run(1, newConvKernelPrec(t, spec, false)), run(2, k), run(2, k), run(1, k)}
	for i, r := range results[1:] {
		same := slices.Equal(r.out, results[0].out)
		for l := range r.gws {
			same = same && slices.Equal(r.gws[l], results[0].gws[l]) && slices.Equal(r.gbs[l], results[0].gbs[l])
		}
		if !same {
			t.Errorf("run %d differs from the one-core run", i+1)
		}
	}
}

// TestConvDropout: evaluation has no dropout; training with the same seed
// repeats its masks and another seed changes them; Keep = 1 never drops.
func TestConvDropout(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 12, Width: 12, Blocks: 2, Filters: 8, Keep: 0.6}
	p := newConvProblem(spec, 4, 6)
	k := newConvKernelPrec(t, spec, false)
	eval := p.forward(t, k, 1, false)
	if e := convRelErr(eval, convReference(spec, p.N, p.x, p.ws, p.bs, 0, 0, false)); e > 2e-6 {
		t.Errorf("evaluation differs from the reference without dropout by %g", e)
	}
	if again := p.forward(t, k, 99, false); !slices.Equal(again, eval) {
		t.Error("evaluation depends on the seed")
	}
	a := p.forward(t, k, 1, true)
	if slices.Equal(a, eval) {
		t.Error("training output equals the evaluation output")
	}
	if b := p.forward(t, k, 1, true); !slices.Equal(a, b) {
		t.Error("the same seed gave different masks")
	}
	if b := p.forward(t, k, 2, true); slices.Equal(a, b) {
		t.Error("another seed gave the same masks")
	}
	// Image i's masks do not depend on the batch around it.
	q := &convProblem{spec: spec, N: 2, x: p.x[:2*spec.InDim()], ws: p.ws, bs: p.bs}
	if b := q.forward(t, k, 1, true); !slices.Equal(b, a[:2*spec.OutDim()]) {
		t.Error("the masks of the first images changed with the batch size")
	}
	spec.Keep = 1
	k1 := newConvKernelPrec(t, spec, false)
	if tr, ev := p.forward(t, k1, 1, true), p.forward(t, k1, 1, false); !slices.Equal(tr, ev) {
		t.Error("Keep = 1 dropped activations")
	}
}

// TestConvDropMaskStatistics: the kept fraction matches Keep, and masks of
// neighbouring streams are not correlated.
func TestConvDropMaskStatistics(t *testing.T) {
	const n = 1 << 20
	for _, keep := range []float64{0.9, 0.5} {
		thr := uint64(keep * (1 << 32))
		a, b := make([]float32, n), make([]float32, n)
		sgemm.BernoulliMaskAny(a, convMaskKey(3, 0, 0, 0), thr)
		sgemm.BernoulliMaskAny(b, convMaskKey(3, 0, 1, 0), thr)
		var sa, sab float64
		for i := range a {
			sa += float64(a[i])
			sab += float64(a[i] * b[i])
		}
		sd := math.Sqrt(keep * (1 - keep) / n)
		if m := sa / n; math.Abs(m-keep) > 5*sd {
			t.Errorf("keep %g: kept fraction %g", keep, m)
		}
		if m := sab / n; math.Abs(m-keep*keep) > 5*sd {
			t.Errorf("keep %g: joint kept fraction of two images %g, want %g", keep, m, keep*keep)
		}
	}
}

// TestConvNaNPropagates: a NaN pixel makes its image's features NaN and
// leaves the other images' alone.
func TestConvNaNPropagates(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.9}
	for _, f64 := range []bool{false, true} {
		p := newConvProblem(spec, 3, 7)
		k := newConvKernelPrec(t, spec, f64)
		clean := p.forward(t, k, 1, false)
		p.x[spec.InDim()+14*28+14] = math.NaN()
		out := p.forward(t, k, 1, false)
		d := spec.OutDim()
		if !slices.Equal(out[:d], clean[:d]) || !slices.Equal(out[2*d:], clean[2*d:]) {
			t.Errorf("f64=%v: a NaN in image 1 changed other images", f64)
		}
		if !slices.ContainsFunc(out[d:2*d], math.IsNaN) {
			t.Errorf("f64=%v: a NaN pixel left the features finite", f64)
		}
	}
}

func TestConvSpecValidate(t *testing.T) {
	ok := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []ConvSpec{
		{Channels: 0, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9},
		{Channels: 1, Height: 28, Width: 0, Blocks: 4, Filters: 64, Keep: 0.9},
		{Channels: 1, Height: 28, Width: 28, Blocks: 0, Filters: 64, Keep: 0.9},
		{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 0, Keep: 0.9},
		{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0},
		{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 1.5},
		{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: math.NaN()},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v: no error", bad)
		}
		if _, err := NewConvNet(nil, bad); err == nil {
			t.Errorf("NewConvNet(nil, %+v): no error", bad)
		}
	}
}

func TestConvKernelErrors(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 6, Width: 6, Blocks: 2, Filters: 4, Keep: 0.9}
	p := newConvProblem(spec, 2, 8)
	k := newConvKernelPrec(t, spec, false)
	gws := [][]float64{make([]float64, len(p.ws[0])), make([]float64, len(p.ws[1]))}
	gbs := [][]float64{make([]float64, 4), make([]float64, 4)}
	if err := k.Backward(p.r, gws, gbs); err == nil {
		t.Error("Backward before Forward: no error")
	}
	out := make([]float64, 2*spec.OutDim())
	for name, err := range map[string]error{
		"x":      k.Forward(2, p.x[1:], p.ws, p.bs, 0, true, out),
		"out":    k.Forward(2, p.x, p.ws, p.bs, 0, true, out[1:]),
		"N":      k.Forward(0, nil, p.ws, p.bs, 0, true, nil),
		"blocks": k.Forward(2, p.x, p.ws[:1], p.bs[:1], 0, true, out),
		"weight": k.Forward(2, p.x, [][]float64{p.ws[0], p.ws[0]}, p.bs, 0, true, out),
		"bias":   k.Forward(2, p.x, p.ws, [][]float64{p.bs[0], p.bs[0][1:]}, 0, true, out),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := k.Forward(2, p.x, p.ws, p.bs, 0, true, out); err != nil {
		t.Fatal(err)
	}
	if err := k.Backward(p.r[1:], gws, gbs); err == nil {
		t.Error("short output gradient: no error")
	}
}

// TestInitConvParams: PyTorch's default initialization bounds, seeded.
func TestInitConvParams(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	params := func(seed uint64) (ws, bs [][]float64) {
		ws, bs = make([][]float64, spec.Blocks), make([][]float64, spec.Blocks)
		for l := range spec.Blocks {
			ws[l], bs[l] = make([]float64, spec.Filters*spec.FanIn(l)), make([]float64, spec.Filters)
		}
		InitConvParams(spec, rand.New(rand.NewPCG(seed, 2)), ws, bs)
		return ws, bs
	}
	ws, bs := params(1)
	ws2, _ := params(1)
	for l := range ws {
		bound := 1 / math.Sqrt(float64(spec.FanIn(l)))
		mx := 0.0
		for _, v := range append(slices.Clone(ws[l]), bs[l]...) {
			mx = math.Max(mx, math.Abs(v))
		}
		if mx > bound || mx < 0.9*bound {
			t.Errorf("block %d: largest |value| %g, bound %g", l, mx, bound)
		}
		if !slices.Equal(ws[l], ws2[l]) {
			t.Errorf("block %d: the same seed gave other weights", l)
		}
	}
}

// TestConvSteadyStateAllocs: after the first pass, a forward and backward
// pass of the kernel allocates nothing.
func TestConvSteadyStateAllocs(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 16, Keep: 0.9}
	p := newConvProblem(spec, 10, 12)
	k := newConvKernelPrec(t, spec, false)
	out, gws, gbs := p.run(t, k, 1, true)
	pass := func() {
		if err := k.Forward(p.N, p.x, p.ws, p.bs, 2, true, out); err != nil {
			t.Fatal(err)
		}
		if err := k.Backward(p.r, gws, gbs); err != nil {
			t.Fatal(err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		pass()
		if a := testing.AllocsPerRun(5, pass); a != 0 {
			t.Errorf("%v allocations per pass with GOMAXPROCS=%d", a, procs)
		}
	}
}

// TestConvPathsAgree runs Conv-4 at the Omniglot size on both paths in
// float32: the same masks, so outputs and gradients agree to rounding. 24
// images make chunks of 3, which the Winograd path splits into groups of 2
// and 1 in the second block.
func TestConvPathsAgree(t *testing.T) {
	spec := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9}
	p := newConvProblem(spec, 24, 13)
	o1, w1, b1 := p.run(t, newConvKernelPath(t, spec, false, convPathIm2col), 3, true)
	o2, w2, b2 := p.run(t, newConvKernelPath(t, spec, false, convPathAuto), 3, true)
	check := func(name string, a, b []float64) {
		if e := convRelErr(a, b); e > 1e-5 {
			t.Errorf("%s: im2col and Winograd differ by %g relative", name, e)
		}
	}
	check("output", o1, o2)
	for l := range w1 {
		check("weights", w1[l], w2[l])
		check("bias", b1[l], b2[l])
	}
}

// Sizes read from a file (a config.json, a checkpoint) cannot make OutDim
// loop for ages or overflow: absurd blocks and sizes are refused, and
// OutDim stops at the pooling's fixed point.
func TestConvSpecBoundsSizes(t *testing.T) {
	huge := ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 9e18, Filters: 64, Keep: 1}
	if d := huge.OutDim(); d != 64 {
		t.Fatalf("OutDim of 9e18 SAME blocks = %d, want 1×1×64", d)
	}
	for _, s := range []ConvSpec{huge, {Channels: 1, Height: 1 << 40, Width: 28, Blocks: 4, Filters: 64, Keep: 1},
		{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 1 << 40, Keep: 1}} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: want an error", s)
		}
	}
}
