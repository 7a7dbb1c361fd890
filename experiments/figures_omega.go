package experiments

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// omegaFigure draws the bases of the metakernel model (or else vrf+cnf)
// after each flow step: one histogram panel per step for the dimension the
// flows change most, and a scatter of that dimension against the second
// most changed one, before and after the flows.
func omegaFigure(dir string, res *Results) ([]string, error) {
	var of OmegaFile
	found := false
	for _, v := range []string{"metakernel", "vrf+cnf"} {
		for _, p := range res.Points {
			if p.Variant == v && len(p.Seeds) > 0 && readJSON(filepath.Join(runPath(dir, p.Seeds[0].RunDir), FileOmega), &of) == nil {
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	if !found || len(of.Steps) < 2 || of.Dim < 2 {
		return nil, nil
	}
	K := len(of.Steps) - 1
	n := len(of.Steps[0]) / of.Dim
	column := func(step, dim int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(of.Steps[step][i*of.Dim+dim])
		}
		return out
	}
	// How far the flows move a dimension's distribution: the mean distance
	// between the sorted samples (quantiles) before and after, in units of
	// the Gaussian's spread.
	change := make([]float64, of.Dim)
	for j := range change {
		a, b := column(0, j), column(K, j)
		slices.Sort(a)
		slices.Sort(b)
		var d float64
		for i := range a {
			d += math.Abs(a[i] - b[i])
		}
		change[j] = d / float64(n) / (sd(a) + 1e-12)
	}
	order := make([]int, of.Dim)
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return change[order[a]] > change[order[b]] })
	j1, j2 := order[0], order[1]
	lo, hi := math.Inf(1), math.Inf(-1)
	for k := 0; k <= K; k++ {
		for _, v := range column(k, j1) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	// The flows' effect shows against the Gaussian they start from: every
	// panel after the first carries q0's density (a moment fit of the
	// step-0 samples) as a grey line.
	q0 := column(0, j1)
	var m0 float64
	for _, v := range q0 {
		m0 += v
	}
	m0 /= float64(len(q0))
	s0 := sd(q0)
	gauss := plotter.NewFunction(func(x float64) float64 {
		return math.Exp(-0.5*(x-m0)*(x-m0)/(s0*s0)) / (s0 * math.Sqrt(2*math.Pi))
	})
	gauss.Color, gauss.Width, gauss.Samples = truthColor, vg.Points(2), 200
	flowColor := seriesColors[0]
	var panels []*plot.Plot
	for k := 0; k <= K; k++ {
		title := "ω₀ ~ q₀ (Gaussian)"
		if k > 0 {
			title = fmt.Sprintf("after flow step %d", k)
		}
		p := newPanel(title, fmt.Sprintf("ω[%d]", j1), "density")
		h, err := plotter.NewHist(plotter.Values(column(k, j1)), 30)
		if err != nil {
			return nil, err
		}
		h.Normalize(1)
		h.FillColor, h.LineStyle.Color = withAlpha(flowColor, 0x70), flowColor
		if k == 0 {
			h.FillColor, h.LineStyle.Color = withAlpha(truthColor, 0x90), truthColor
		}
		p.Add(h)
		if k > 0 {
			p.Add(gauss)
			if k == 1 {
				p.Legend.Add("q₀ (Gaussian fit of step 0)", gauss)
				p.Legend.Top = true
			}
		}
		p.X.Min, p.X.Max = lo, hi
		panels = append(panels, p)
	}
	sc := newPanel(fmt.Sprintf("ω[%d] against ω[%d]", j2, j1), fmt.Sprintf("ω[%d]", j1), fmt.Sprintf("ω[%d]", j2))
	for _, k := range []int{0, K} {
		s, err := plotter.NewScatter(xys(column(k, j1), column(k, j2)))
		if err != nil {
			return nil, err
		}
		s.Shape, s.Radius = draw.CircleGlyph{}, vg.Points(1.6)
		s.Color = withAlpha(truthColor, 0xb0)
		label := "ω₀ ~ q₀"
		if k == K {
			s.Color = withAlpha(flowColor, 0xb0)
			label = fmt.Sprintf("after step %d", K)
		}
		sc.Add(s)
		sc.Legend.Add(label, s)
	}
	sc.Legend.Top = true
	panels = append(panels, sc)
	cols := 3
	var grid [][]*plot.Plot
	for i := 0; i < len(panels); i += cols {
		grid = append(grid, panels[i:min(i+cols, len(panels))])
	}
	title := fmt.Sprintf("%s: bases ω after each flow step — %s seed %d, display task %d, %d bases from %d draws of D=%d; dimension %d of %d (changed most by the flows)",
		of.Variant, res.Preset, of.Seed, of.Task+1, n, of.Draws, of.D, j1, of.Dim)
	return figure{title: title, panels: grid}.save(filepath.Join(dir, DirFigures, FigOmega))
}

func sd(x []float64) float64 {
	var m, ss float64
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	for _, v := range x {
		ss += (v - m) * (v - m)
	}
	return math.Sqrt(ss / float64(max(1, len(x)-1)))
}
