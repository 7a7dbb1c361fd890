package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/lipgloss"
)

// The panes' line charts: ntcharts draws the axes and labels, the series
// are drawn here (drawLine) so that NaN and ±Inf are dropped before
// anything is scaled and long runs are bucketed per column.

// xySet is one line of a chart: a variantIndex (its colour and
// marker) and its points.
type xySet struct {
	idx  int
	x, y []float64
}

// chartSpec says how lineChart draws.
type chartSpec struct {
	logY   bool // plot log10 y; points ≤ 0 are left out
	xLabel func(float64) string
	// iterX: x is an iteration count, labelled at whole, round numbers
	// (iterTicks) instead of every 8 columns wherever that falls (2.5).
	iterX bool
	// nonNeg: y is a metric that cannot be negative (MSE, KL, an
	// accuracy), so its axis starts no lower than 0.
	nonNeg bool
}

// yRange returns the range of the finite y values of sets (after the log
// transform), padded so lines do not sit on the frame. The padding of a
// nonnegative metric (nonNeg, linear axis) stops at 0: an axis below zero
// says the metric can go there.
func yRange(sets []xySet, logY, nonNeg bool) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range sets {
		for _, v := range s.y {
			if logY {
				if !(v > 0) {
					continue
				}
				v = math.Log10(v)
			}
			if finite(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if lo > hi {
		return 0, 0, false
	}
	floor := math.Inf(-1)
	if nonNeg && !logY && lo >= 0 {
		floor = 0
	}
	if hi-lo < 1e-12 {
		d := max(math.Abs(hi)*0.1, 1e-3)
		return max(lo-d, floor), hi + d, true
	}
	pad := 0.05 * (hi - lo)
	return max(lo-pad, floor), hi + pad, true
}

func xRange(sets []xySet) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range sets {
		for _, v := range s.x {
			if finite(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if lo > hi {
		return 0, 0, false
	}
	if hi-lo < 1e-9 {
		hi = lo + 1
	}
	return lo, hi, true
}

// newChart is an ntcharts linechart with our axes and labels; the caller
// draws the data.
func newChart(t Theme, w, h int, minX, maxX, minY, maxY float64, spec chartSpec) linechart.Model {
	yFmt := func(_ int, v float64) string { return compact(v) }
	if spec.logY {
		yFmt = func(_ int, v float64) string { return compact(math.Pow(10, v)) }
	}
	xFmt := func(_ int, v float64) string { return compact(v) }
	switch {
	case spec.iterX:
		xFmt = func(int, float64) string { return "" } // ntcharts draws none; drawIterTicks does
	case spec.xLabel != nil:
		xFmt = func(_ int, v float64) string { return spec.xLabel(v) }
	}
	yStep := 2
	if h >= 16 {
		yStep = 3
	}
	lc := linechart.New(w, h, minX, maxX, minY, maxY,
		linechart.WithXYSteps(8, yStep),
		linechart.WithStyles(t.Axis, t.Label, t.r.NewStyle()),
		linechart.WithXLabelFormatter(xFmt),
		linechart.WithYLabelFormatter(yFmt))
	lc.DrawXYAxisAndLabel()
	if spec.iterX {
		drawIterTicks(&lc, minX, maxX)
	}
	return lc
}

// drawIterTicks labels an iteration axis at multiples of a round step (1,
// 2 or 5 times a power of ten, at least 1), each under the column
// drawLine puts that iteration in, as far apart as the labels need.
func drawIterTicks(lc *linechart.Model, minX, maxX float64) {
	gw := lc.GraphWidth()
	span := maxX - minX
	if gw < 2 || !(span > 0) || !finite(span) {
		return
	}
	col := func(v float64) int { return int(math.Round((v - minX) / span * float64(gw-1))) }
	step := iterStep(minX, maxX, gw)
	o := lc.Origin()
	end := -1 // the canvas column after the last label drawn
	for v := math.Ceil(minX/step) * step; v <= maxX; v += step {
		s := iterLabel(v)
		x := o.X + 1 + col(v)
		if x <= end || x+len(s) > lc.Canvas.Width() {
			continue
		}
		lc.Canvas.SetStringWithStyle(canvas.Point{X: x, Y: o.Y + 1}, s, lc.LabelStyle)
		end = x + len(s)
	}
}

// iterStep is the smallest round step between iteration labels that puts
// them at least 6 columns and their own width and two apart on a graph gw
// columns wide.
func iterStep(minX, maxX float64, gw int) float64 {
	span := maxX - minX
	prev := 1.0
	for step := 1.0; ; step *= 10 {
		for _, m := range []float64{1, 2, 5} {
			s := step * m
			if s > span {
				return prev // a step no longer than the span labels something
			}
			need := float64(max(6, len(iterLabel(math.Floor(maxX/s)*s))+2))
			if s/span*float64(gw-1) >= need {
				return s
			}
			prev = s
		}
	}
}

// iterLabel writes a whole iteration number short: 20000 as 20k, 1500000
// as 1.5M (G and T above), and exactly otherwise.
func iterLabel(v float64) string {
	n := int64(math.Round(v))
	switch {
	case n >= 1e12 && n%1e11 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e12), ".0") + "T"
	case n >= 1e9 && n%1e8 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e9), ".0") + "G"
	case n >= 1_000_000 && n%100_000 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	case n >= 10_000 && n%100 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e3), ".0") + "k"
	}
	return strconv.FormatInt(n, 10)
}

// drawLine draws one series on lc: a braille line, or with no colour its
// marker once per column.
func drawLine(t Theme, lc *linechart.Model, s xySet, logY bool, style lipgloss.Style) {
	gw, gh := lc.GraphWidth(), lc.GraphHeight()
	if gw <= 0 || gh <= 0 {
		return
	}
	minX, maxX, minY, maxY := lc.ViewMinX(), lc.ViewMaxX(), lc.ViewMinY(), lc.ViewMaxY()
	// Bucket the points per braille column (two per cell): a long run has
	// far more points than the chart has columns.
	cols := 2 * gw
	if t.Mono {
		cols = gw
	}
	sum := make([]float64, cols)
	cnt := make([]int, cols)
	for i, x := range s.x {
		y := s.y[i]
		if logY {
			if !(y > 0) {
				continue
			}
			y = math.Log10(y)
		}
		if !finite(x) || !finite(y) {
			continue
		}
		c := int(float64(cols-1) * (x - minX) / (maxX - minX))
		if c < 0 || c >= cols {
			continue
		}
		sum[c] += y
		cnt[c]++
	}
	if t.Mono {
		m := t.Marker(s.idx)
		for c := range cols {
			if cnt[c] == 0 {
				continue
			}
			y := sum[c] / float64(cnt[c])
			row := int(math.Round(float64(gh-1) * (maxY - y) / (maxY - minY)))
			lc.Canvas.SetCell(canvas.Point{X: lc.Origin().X + 1 + c, Y: row}, canvas.NewCellWithStyle(m, style))
		}
		return
	}
	bg := graph.NewBrailleGrid(gw, gh, 0, float64(cols-1), minY, maxY)
	var prev canvas.Point
	have := false
	for c := range cols {
		if cnt[c] == 0 {
			continue
		}
		p := bg.GridPoint(canvas.Float64Point{X: float64(c), Y: sum[c] / float64(cnt[c])})
		if have {
			for _, q := range graph.GetLinePoints(prev, p) {
				bg.Set(q)
			}
		} else {
			bg.Set(p)
		}
		prev, have = p, true
	}
	graph.DrawBraillePatterns(&lc.Canvas, canvas.Point{X: lc.Origin().X + 1}, bg.BraillePatterns(), style)
}

// lineChart draws sets over a shared x axis, w×h including its title row.
func lineChart(t Theme, title string, sets []xySet, w, h int, spec chartSpec) string {
	head := t.Bold.Render(title)
	if w < 12 || h < 4 {
		return block(head, w, h)
	}
	minY, maxY, okY := yRange(sets, spec.logY, spec.nonNeg)
	minX, maxX, okX := xRange(sets)
	if !okX || !okY {
		return block(head+"\n"+center(t.Dim.Render("waiting for data…"), w, h-1), w, h)
	}
	lc := newChart(t, w, h-1, minX, maxX, minY, maxY, spec)
	for _, s := range sets {
		drawLine(t, &lc, s, spec.logY, t.Series(s.idx))
	}
	return block(head, w, 1) + "\n" + renderCanvas(&lc.Canvas, t)
}
