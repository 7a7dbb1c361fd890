package ops

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// resWinoSpecs have 3×3 stride-1 layers on odd, even and rectangular maps
// (11², 6², 3²; 5×7, 3×4; 12², 6²; 6², 3²) with channel counts that are and
// are not multiples of the kernels' 8, and batches of 1 to 14 images;
// without -short, ResNet-18 itself at 84×84 (21², 11², 6², 3², 64 to 512
// channels) on 3 images.
var resWinoSpecs = []struct {
	spec ResNetSpec
	lay  BNLayout
}{
	{ResNetSpec{Channels: 3, Height: 42, Width: 44, Widths: [4]int{16, 20, 32, 36}, Out: 7}, BNLayout{Episodes: 1, Support: 3, Query: 2}},
	{ResNetSpec{Channels: 2, Height: 18, Width: 26, Widths: [4]int{8, 16, 13, 24}, Out: 5}, BNLayout{Episodes: 1, Support: 1}},
	{ResNetSpec{Channels: 3, Height: 48, Width: 48, Widths: [4]int{8, 16, 16, 32}, Out: 10}, BNLayout{Episodes: 2, Support: 5, Query: 3}},
	{ResNetSpec{Channels: 3, Height: 24, Width: 24, Widths: [4]int{64, 8, 8, 8}, Out: 4}, BNLayout{Episodes: 2, Support: 4, Query: 3}},
}

// resWinoTol is the largest relative difference (root-mean-square over a
// layer's output, relative to the output's own) allowed between a
// Winograd and an im2col convolution in float32: F(2×2, 3×3) rounds its
// transforms, ~1e-7 per operation, over sums of up to 9·512 terms.
const resWinoTol = 1e-5

// TestResNetWinoMatchesIm2col: on every 3×3 stride-1 layer that runs by
// Winograd, its forward output and its input gradient (written and
// added) agree with the im2col path's within resWinoTol, for odd and even
// maps and several batch sizes.
func TestResNetWinoMatchesIm2col(t *testing.T) {
	specs := resWinoSpecs
	if !testing.Short() {
		specs = append(specs[:len(specs):len(specs)], resWinoSpecs[0])
		specs[len(specs)-1].spec, specs[len(specs)-1].lay = ResNet18(3, 84, 84), BNLayout{Episodes: 1, Support: 2, Query: 1}
	}
	for si, tc := range specs {
		p := newResProblem(tc.spec, tc.lay, uint64(si+1))
		k := newResKernel(t, tc.spec, false)
		p.run(t, k, BNTrain)
		c := k.c32
		c.params = p.params
		rng := rand.New(rand.NewPCG(uint64(si), 3))
		n := 0
		for l := range c.cv {
			cv := &c.cv[l]
			if !cv.wino {
				continue
			}
			n++
			name := fmt.Sprintf("spec %d %s (%d×%d, %d→%d)", si, cv.Name, cv.Height, cv.Width, cv.In, cv.Out)
			g := make([]float32, len(c.z[l]))
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
			base := make([]float32, c.N*cv.p*cv.In)
			for i := range base {
				base[i] = float32(rng.NormFloat64())
			}
			var zs, ds [2][]float64
			for pass, wino := range []bool{true, false} {
				cv.wino = wino
				c.setupConv(l)
				c.ca, c.cb = l, -1
				c.overChunks(c.j.conv)
				zs[pass] = f32to64(c.z[l])
				// The input gradient, written and added: dz is the batch
				// norm's backward of g, the same in both passes.
				var d []float64
				for _, add := range []bool{false, true} {
					dst := slices.Clone(base)
					copy(c.z[l], g)
					c.overChunks(funcJob(func(ci int) {
						sc := c.scratch()
						c.gradIn(sc, l, ci, c.z[l], dst, add)
						c.release(sc)
					}))
					d = append(d, f32to64(dst)...)
				}
				ds[pass] = d
			}
			cv.wino = true
			c.setupConv(l)
			if e := convRelErr(zs[0], zs[1]); e > resWinoTol {
				t.Errorf("%s: forward differs from im2col by %g relative", name, e)
			}
			if e := convRelErr(ds[0], ds[1]); e > resWinoTol {
				t.Errorf("%s: input gradient differs from im2col by %g relative", name, e)
			}
		}
		if n == 0 {
			t.Errorf("spec %d: no layer ran by Winograd", si)
		}
		c.params = nil
	}
}

func f32to64(v []float32) []float64 {
	o := make([]float64, len(v))
	for i, x := range v {
		o[i] = float64(x)
	}
	return o
}

// TestResNetWinoDeterministicAcrossGOMAXPROCS: with Winograd layers of odd
// and even maps, outputs and gradients are bit-identical with one and two
// cores.
func TestResNetWinoDeterministicAcrossGOMAXPROCS(t *testing.T) {
	tc := resWinoSpecs[0]
	p := newResProblem(tc.spec, BNLayout{Episodes: 2, Support: 3, Query: 2}, 9)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var outs [][]float64
	for _, procs := range []int{1, 2, 2} {
		runtime.GOMAXPROCS(procs)
		k := newResKernel(t, tc.spec, false)
		o, g, gx := p.run(t, k, BNTrain)
		if !slices.ContainsFunc(k.c32.cv, func(cv resConv) bool { return cv.wino }) {
			t.Fatal("no layer ran by Winograd")
		}
		outs = append(outs, slices.Concat(append([][]float64{o, gx}, g...)...))
	}
	for i := 1; i < len(outs); i++ {
		if !slices.Equal(outs[0], outs[i]) {
			t.Errorf("run %d differs from the first", i)
		}
	}
}
