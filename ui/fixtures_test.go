package ui

import (
	"io"
	"math"
	"math/rand/v2"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/mkbench/mkbench/engine"
)

// testTheme is the colour theme on a renderer that does not look at the
// terminal, so tests draw the same everywhere; goldens strip the escapes.
func testTheme() Theme {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	return NewTheme(r)
}

func monoTheme() Theme {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return NewTheme(r)
}

// fakeCurve is a deterministic training curve of n points up to iters.
func fakeCurve(variant string, n, iters int, scale float64) curve {
	c := curve{Variant: variant}
	for i := 1; i <= n; i++ {
		it := float64(i * iters / n)
		data := scale*(3*math.Exp(-it/400)+0.1) + 0.05*math.Sin(it/37)
		kl := 20*math.Exp(-it/800) + 5 + math.Sin(it/53)
		c.Iter = append(c.Iter, it)
		c.Data = append(c.Data, data)
		c.KL = append(c.KL, kl)
		c.Loss = append(c.Loss, data+1e-4*kl)
		c.ELBO = append(c.ELBO, -(data + 1e-4*kl))
	}
	return c
}

// fakeDisplay is a deterministic display snapshot shaped like sine-5shot
// metakernel's: D=128 bases of dimension 40 after K=4 flow steps.
func fakeDisplay(steps int) *engine.Display {
	rng := rand.New(rand.NewPCG(1, 2))
	const D, dim = 128, 40
	d := &engine.Display{Iter: 1200, D: D, Dim: dim, Draws: 8}
	eps := make([]float64, D*dim)
	for i := range eps {
		eps[i] = rng.NormFloat64()
	}
	for k := 0; k < steps; k++ {
		w := make([]float64, D*dim)
		for i, e := range eps {
			j := i % dim
			// Each step bends the Gaussian a little more.
			w[i] = 0.3*float64(j%5) + e + 0.25*float64(k)*math.Tanh(e)*e
		}
		d.OmegaSteps = append(d.OmegaSteps, w)
	}
	for i := 0; i < 100; i++ {
		x := -5 + 10*float64(i)/99
		truth := 2.5 * math.Sin(x+0.5)
		d.GridX = append(d.GridX, x)
		d.Truth = append(d.Truth, truth)
		d.PredMean = append(d.PredMean, truth+0.3*math.Sin(3*x))
		d.PredSD = append(d.PredSD, 0.1+0.06*math.Abs(x))
	}
	for _, x := range []float64{-4.1, -2.2, 0.3, 1.9, 3.7} {
		d.SupportX = append(d.SupportX, x)
		d.SupportY = append(d.SupportY, 2.5*math.Sin(x+0.5))
	}
	d.TaskMSE = 0.0456
	return d
}

func fakeRows() []runRow {
	rows := make([]runRow, 6)
	for i := range rows {
		rows[i] = runRow{Key: string(rune('1' + i)), Name: toggleNames[i], Variant: toggleVariants[i], State: "off", Loss: math.NaN(), Smoothed: math.NaN()}
	}
	rows[1] = runRow{Key: "2", Name: "RFF", Variant: "rff", State: "running", Iter: 1500, Iters: 20000, ItPerSec: 61.3, Loss: 1.234, Smoothed: 1.31,
		Dir: "runs/sine-5shot-rff-s1-20260301-120000"}
	rows[5] = runRow{Key: "6", Name: "MetaKernel", Variant: "metakernel", State: "paused", Iter: 1200, Iters: 20000, ItPerSec: 38.2, Loss: 0.0812, Smoothed: 0.093,
		Eval: &engine.EvalResult{Metric: "mse", Mean: 0.0741, CI95: 0.0151, Tasks: 200}, Selected: true,
		Dir: "runs/sine-5shot-metakernel-s1-20260301-120000"}
	rows[2] = runRow{Key: "3", Name: "VRF", Variant: "vrf", State: "failed", Iter: 17, Iters: 20000, Loss: math.NaN(), Smoothed: math.NaN(),
		Err: "training diverged at iteration 17 (loss NaN)"}
	return rows
}

func fakeCurves() curvesData {
	return curvesData{Curves: []curve{fakeCurve("rff", 600, 1500, 1.6), fakeCurve("metakernel", 500, 1200, 1)}, Selected: 1, DataName: "MSE"}
}
