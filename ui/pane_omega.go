package ui

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/NimbleMarkets/ntcharts/barchart"
	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/heatmap"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
)

// The ω pane: the bases ω of the selected run's display task, a histogram
// of one dimension after every flow step and the density of a pair of
// dimensions after the last.

// omegaData is what the ω pane shows.
type omegaData struct {
	Variant      string
	Display      *engine.Display
	Dim          int    // histogram dimension
	PairX, PairY int    // heatmap dimensions
	NoDisplay    string // why no display will come; "" while one is on its way
}

// column returns dimension j of the D bases in one flow step.
func column(step []float64, dim, j int) []float64 {
	out := make([]float64, 0, len(step)/dim)
	for i := j; i < len(step); i += dim {
		out = append(out, step[i])
	}
	return out
}

// robustSpan is the 1st to 99th percentile of the finite values of vs:
// one stray basis far out would otherwise squeeze the rest into a column
// or two. Values outside land in the edge bins.
func robustSpan(vs ...[]float64) (lo, hi float64) {
	var all []float64
	for _, v := range vs {
		for _, x := range v {
			if finite(x) {
				all = append(all, x)
			}
		}
	}
	if len(all) == 0 {
		return -1, 1
	}
	slices.Sort(all)
	lo, hi = all[int(0.01*float64(len(all)-1))], all[int(0.99*float64(len(all)-1)+0.5)]
	if hi-lo < 1e-9 {
		lo, hi = lo-0.5, hi+0.5
	}
	return lo, hi
}

func histogram(v []float64, lo, hi float64, bins int) []float64 {
	out := make([]float64, bins)
	for _, x := range v {
		if !finite(x) {
			continue
		}
		b := int(float64(bins) * (x - lo) / (hi - lo))
		out[min(max(b, 0), bins-1)]++
	}
	return out
}

func stepName(k int) string {
	if k == 0 {
		return "q₀"
	}
	return fmt.Sprintf("f%d", k)
}

func omegaPane(t Theme, d omegaData, w, h int) string {
	disp := d.Display
	switch {
	case disp == nil:
		return waitingDisplay(t, d.NoDisplay, w, h)
	case len(disp.OmegaSteps) == 0 || disp.Dim == 0:
		return center(t.Dim.Render(d.Variant+": the RBF kernel has no bases ω"), w, h)
	}
	dim := disp.Dim
	j, px, py := mod(d.Dim, dim), mod(d.PairX, dim), mod(d.PairY, dim)
	steps := disp.OmegaSteps
	K := len(steps) - 1
	head := fmt.Sprintf("%d bases ω ∈ ℝ^%d, task after iteration %d", disp.D, dim, disp.Iter)
	if K == 0 {
		head += " · no flows: step 0 only"
	}

	// Side by side when there is room, else the heatmap under the
	// histograms.
	hw, hh, mw, mh := w, h-1, w, 0
	if w >= 60 {
		mw = max(24, w*2/5)
		hw = w - mw - 2
		mh = h - 1
	} else {
		hh = (h - 1) * 3 / 5
		mh = h - 1 - hh
	}
	hists := histPanel(t, steps, dim, j, hw, hh)
	heat := heatPanel(t, steps[K], dim, px, py, K, mw, mh)
	var body string
	if w >= 60 {
		sep := block(strings.Repeat("  \n", hh), 2, hh)
		body = joinH(hists, sep, heat)
	} else {
		body = hists + "\n" + heat
	}
	return block(t.Dim.Render(head)+"\n"+body, w, h)
}

func mod(a, n int) int { return ((a % n) + n) % n }

// histPanel draws the distribution of dimension j after every flow step,
// side by side on a shared x range and count scale so that steps compare.
func histPanel(t Theme, steps [][]float64, dim, j, w, h int) string {
	title := t.Bold.Render(fmt.Sprintf("ω[%d] after each flow step", j)) + t.Dim.Render("  d/D")
	n := len(steps)
	cw := (w - (n - 1)) / n
	if cw < 3 || h < 5 {
		return block(title, w, h)
	}
	cols := make([][]float64, n)
	for k, s := range steps {
		cols[k] = column(s, dim, j)
	}
	lo, hi := robustSpan(cols...)
	var peak float64
	hs := make([][]float64, n)
	for k := range cols {
		hs[k] = histogram(cols[k], lo, hi, cw)
		peak = max(peak, slices.Max(hs[k]))
	}
	bh := h - 4 // title, axis, step names, range
	var parts []string
	for k := range hs {
		bars := make([]barchart.BarData, cw)
		for b, c := range hs[k] {
			bars[b] = barchart.BarData{Values: []barchart.BarValue{{Value: c, Style: t.r.NewStyle().Foreground(t.barFill)}}}
		}
		bc := barchart.New(cw, bh, barchart.WithNoAxis(), barchart.WithBarGap(0), barchart.WithBarWidth(1),
			barchart.WithNoAutoBarWidth(), barchart.WithMaxValue(max(peak, 1)), barchart.WithNoAutoMaxValue(),
			barchart.WithDataSet(bars))
		bc.Draw()
		name := stepName(k)
		label := strings.Repeat(" ", max(0, (cw-ansi.StringWidth(name))/2)) + name
		parts = append(parts, renderCanvas(&bc.Canvas, t)+"\n"+block(t.Dim.Render(strings.Repeat("─", cw)), cw, 1)+"\n"+block(label, cw, 1))
		if k < n-1 {
			parts = append(parts, block(strings.Repeat(" \n", bh+2), 1, bh+2))
		}
	}
	body := joinH(parts...)
	rng := t.Dim.Render(fmt.Sprintf("x ∈ [%s, %s] (1–99%%), one count scale", num(lo), num(hi)))
	return block(title+"\n"+body+"\n"+rng, w, h)
}

// heatShades stand for density without colour, lightest first.
var heatShades = []rune{' ', '·', '░', '▒', '▓', '█'}

// heatPanel draws the joint density of dimensions px and py of one flow
// step's bases: ntcharts' heatmap colours the cells and a shade rune per
// cell keeps it readable without colour.
func heatPanel(t Theme, step []float64, dim, px, py, k, w, h int) string {
	title := t.Bold.Render(fmt.Sprintf("ω[%d] × ω[%d] at step %s", px, py, stepName(k))) + t.Dim.Render("  x/y")
	const lw = 7 // y labels
	cw, ch := w-lw, h-2
	if cw < 6 || ch < 3 {
		return block(title, w, h)
	}
	xs, ys := column(step, dim, px), column(step, dim, py)
	x0, x1 := robustSpan(xs)
	y0, y1 := robustSpan(ys)
	// A few hundred bases spread over every cell would read as noise;
	// bins of a few cells each show the density.
	nbx, nby := min(cw, 24), min(ch, 12)
	bins := make([][]float64, nbx)
	for i := range bins {
		bins[i] = make([]float64, nby)
	}
	var peak float64
	for i := range xs {
		if !finite(xs[i]) || !finite(ys[i]) {
			continue
		}
		bx := min(max(int(float64(nbx)*(xs[i]-x0)/(x1-x0)), 0), nbx-1)
		by := min(max(int(float64(nby)*(ys[i]-y0)/(y1-y0)), 0), nby-1)
		bins[bx][by]++
		peak = max(peak, bins[bx][by])
	}
	peak = max(peak, 1)
	cell := func(cx, cy int) float64 { return bins[cx*nbx/cw][cy*nby/ch] }
	hm := heatmap.New(cw, ch,
		heatmap.WithStyle(linechart.New(cw, ch, 0, float64(cw), 0, float64(ch), linechart.WithXYSteps(0, 0))),
		heatmap.WithValueRange(0, peak), heatmap.WithColorScale(t.heat))
	for cx := 0; cx < cw; cx++ {
		for cy := 0; cy < ch; cy++ {
			hm.Push(heatmap.NewHeatPointInt(cx, cy, cell(cx, cy)))
		}
	}
	hm.Draw()
	for cx := 0; cx < cw; cx++ {
		for cy := 0; cy < ch; cy++ {
			p := canvas.Point{X: cx, Y: ch - 1 - cy}
			st := hm.Canvas.GetCellStyle(p)
			if st == nil {
				continue
			}
			s := int(math.Ceil(cell(cx, cy) / peak * float64(len(heatShades)-1)))
			fg := t.heat[len(t.heat)-1]
			hm.Canvas.SetCell(p, canvas.NewCellWithStyle(heatShades[min(s, len(heatShades)-1)], st.Foreground(fg)))
		}
	}
	rows := strings.Split(renderCanvas(&hm.Canvas, t), "\n")
	for i := range rows {
		var l string
		switch i {
		case 0:
			l = compact(y1)
		case len(rows) - 1:
			l = compact(y0)
		}
		rows[i] = t.Dim.Render(fmt.Sprintf("%*s ", lw-1, l)) + rows[i]
	}
	xl := fmt.Sprintf("%*s%s", lw, "", compact(x0))
	xr := compact(x1)
	xl += strings.Repeat(" ", max(1, w-ansi.StringWidth(xl)-len(xr))) + xr
	return block(title+"\n"+strings.Join(rows, "\n")+"\n"+t.Dim.Render(xl), w, h)
}
