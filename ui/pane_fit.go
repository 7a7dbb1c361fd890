package ui

import (
	"fmt"
	"math"

	"github.com/NimbleMarkets/ntcharts/canvas"

	"github.com/mkbench/mkbench/engine"
)

// The sine-fit pane (regression presets): the display task's truth,
// support points, predicted mean and ±2 sd band.

// fitData is what the sine-fit pane shows.
type fitData struct {
	Variant string
	Display *engine.Display
	Task    int
}

func fitPane(t Theme, d fitData, w, h int) string {
	disp := d.Display
	if disp == nil {
		return center(t.Dim.Render("waiting for the first display snapshot…"), w, h)
	}
	if len(disp.GridX) == 0 {
		return center(t.Dim.Render("this task family has no curve to draw"), w, h)
	}
	vi := variantIndex(d.Variant)
	head := fmt.Sprintf("task #%d · MSE %s · iteration %d · band ±2 sd over %d draws of ω",
		d.Task, num(disp.TaskMSE), disp.Iter, disp.Draws)
	legend := t.Truth.Render("⠉⠉") + " truth  " + t.Swatch(vi) + " " + t.Series(vi).Render("mean "+d.Variant) +
		"  " + t.Band.Render("░░") + " ±2 sd  " + t.Support.Render("●") + " support"
	rows := h - 2
	if rows < 4 || w < 16 {
		return block(head, w, h)
	}
	lo := make([]float64, len(disp.GridX))
	hi := make([]float64, len(disp.GridX))
	for i := range disp.GridX {
		lo[i] = disp.PredMean[i] - 2*disp.PredSD[i]
		hi[i] = disp.PredMean[i] + 2*disp.PredSD[i]
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
	for c := 0; c < gw; c++ {
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
