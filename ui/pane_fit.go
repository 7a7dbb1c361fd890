package ui

import (
	"fmt"
	"math"
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"

	"github.com/mkbench/mkbench/engine"
)

// The sine-fit pane (regression presets): the display task's truth,
// support points, predicted mean and, where the variant draws ω, the ±2
// sd band of the mean over the draws.

// fitData is what the sine-fit pane shows.
type fitData struct {
	Variant string
	Display *engine.Display
	Task    int
	// NoDisplay says why no display will come (an opened run's data set
	// is missing); "" while one is on its way.
	NoDisplay string
}

func fitPane(t Theme, d fitData, w, h int) string {
	disp := d.Display
	if disp == nil {
		return waitingDisplay(t, d.NoDisplay, w, h)
	}
	if len(disp.GridX) == 0 {
		return center(t.Dim.Render("this task family has no curve to draw"), w, h)
	}
	vi := variantIndex(d.Variant)
	band, banded := fitBand(d.Variant, disp.Draws)
	head := fmt.Sprintf("task #%d · MSE %s · iteration %d · %s", d.Task, num(disp.TaskMSE), disp.Iter, band)
	legend := t.Truth.Render("⠉⠉") + " truth  " + t.Swatch(vi) + " " + t.Series(vi).Render("mean "+d.Variant)
	if banded {
		legend += "  " + t.Band.Render("░░") + " ±2 sd"
	}
	legend += "  " + t.Support.Render("●") + " support"
	rows := h - 2
	if rows < 4 || w < 16 {
		return block(head, w, h)
	}
	lo := make([]float64, len(disp.GridX))
	hi := make([]float64, len(disp.GridX))
	for i := range disp.GridX {
		sd := 0.0
		if banded {
			sd = disp.PredSD[i]
		}
		lo[i], hi[i] = disp.PredMean[i]-2*sd, disp.PredMean[i]+2*sd
	}
	x0, x1 := span(disp.GridX, disp.SupportX)
	y0, y1 := span(disp.Truth, lo, hi, disp.SupportY)
	pad := 0.05 * (y1 - y0)
	y0, y1 = y0-pad, y1+pad
	lc := newChart(t, w, rows, x0, x1, y0, y1, chartSpec{xLabel: func(v float64) string { return fmt.Sprintf("%.3g", v) }})
	// The truth is always a braille line; without colour the mean is drawn
	// with its marker, so the two stay apart.
	braille := t
	braille.Mono = false
	drawLine(braille, &lc, xySet{x: disp.GridX, y: disp.Truth}, false, t.Truth)
	drawLine(t, &lc, xySet{idx: vi, x: disp.GridX, y: disp.PredMean}, false, t.Series(vi))
	// The band goes into the cells the lines left empty.
	gw, gh, ox := lc.GraphWidth(), lc.GraphHeight(), lc.Origin().X+1
	rowOf := func(y float64) int { return int(math.Round(float64(gh-1) * (y1 - y) / (y1 - y0))) }
	for c := 0; banded && c < gw; c++ {
		x := x0 + (x1-x0)*(float64(c)+0.5)/float64(gw)
		i := min(max(int(float64(len(disp.GridX)-1)*(x-x0)/(x1-x0)+0.5), 0), len(disp.GridX)-1)
		if !finite(lo[i]) || !finite(hi[i]) {
			continue
		}
		for r := max(rowOf(hi[i]), 0); r <= min(rowOf(lo[i]), gh-1); r++ {
			p := canvas.Point{X: ox + c, Y: r}
			if lc.Canvas.Cell(p).Rune == 0 {
				lc.Canvas.SetCell(p, canvas.NewCellWithStyle('░', t.Band))
			}
		}
	}
	for i, x := range disp.SupportX {
		y := disp.SupportY[i]
		if !finite(x) || !finite(y) {
			continue
		}
		c := int(math.Round(float64(gw-1) * (x - x0) / (x1 - x0)))
		lc.Canvas.SetCell(canvas.Point{X: ox + c, Y: rowOf(y)}, canvas.NewCellWithStyle('●', t.Support))
	}
	return block(t.Dim.Render(head)+"\n"+legend+"\n"+renderCanvas(&lc.Canvas, t), w, h)
}

// waitingDisplay is a pane without its display: that the first is on its
// way, or why none will come (why, wrapped to the pane).
func waitingDisplay(t Theme, why string, w, h int) string {
	if why == "" {
		return center(t.Dim.Render("waiting for the first display snapshot…"), w, h)
	}
	text := t.r.NewStyle().Width(max(w-4, 10)).Render(why)
	lines := strings.Split(text, "\n")
	top := make([]string, max((h-len(lines))/2, 0))
	for i, l := range lines {
		lines[i] = "  " + t.Warn.Render(strings.TrimRight(l, " "))
	}
	return block(strings.Join(append(top, lines...), "\n"), w, h)
}

// fitBand says what the band around the mean is for variant, drawn over
// draws draws of the bases, and whether there is one: the RBF kernel has
// no ω to draw, so its mean is all there is; RFF draws ω from its fixed
// prior; the variational variants from q(ω) inferred from the support
// (through the flow in vrf+cnf and metakernel).
func fitBand(variant string, draws int) (string, bool) {
	switch {
	case variant == "rbf":
		return "no band: RBF draws no ω", false
	case draws < 2:
		return "no band: one draw of ω", false
	case variant == "rff":
		return fmt.Sprintf("band: %d draws of ω from the prior", draws), true
	}
	return fmt.Sprintf("band: %d draws of ω ~ q(ω|S)", draws), true
}

func span(vs ...[]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		for _, x := range v {
			if finite(x) {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
	}
	if lo > hi {
		return -1, 1
	}
	if hi-lo < 1e-9 {
		lo, hi = lo-0.5, hi+0.5
	}
	return lo, hi
}
