package ui

import (
	"fmt"
	"math"
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// finite reports whether v can be drawn: NaN or ±Inf scaled to a canvas
// coordinate becomes an absurd integer, and the line between two such
// points is a huge allocation.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// block makes s exactly w columns by h lines: longer lines are cut
// (escape-aware), shorter ones padded, missing lines added.
func block(s string, w, h int) string {
	if w <= 0 || h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	var sb strings.Builder
	for i := 0; i < h; i++ {
		if i > 0 {
			sb.WriteByte('\n')
		}
		var l string
		if i < len(lines) {
			l = lines[i]
		}
		// The wcwidth variants: grapheme clustering is several times
		// slower, and nothing drawn here needs it.
		lw := ansi.StringWidthWc(l)
		if lw > w {
			l = ansi.TruncateWc(l, w, "…")
			lw = ansi.StringWidthWc(l)
		}
		sb.WriteString(l)
		sb.WriteString(strings.Repeat(" ", w-lw))
	}
	return sb.String()
}

// center puts one line of text in the middle of a w×h block.
func center(text string, w, h int) string {
	pad := max(0, (w-ansi.StringWidthWc(text))/2)
	lines := make([]string, h)
	if h > 0 {
		lines[h/2] = strings.Repeat(" ", pad) + text
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// num formats a metric in at most about 8 columns.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "+∞"
	case math.IsInf(v, -1):
		return "−∞"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e5 || math.Abs(v) < 1e-3:
		return fmt.Sprintf("%.2e", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// compact formats an axis label in as few columns as it can.
func compact(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a == 0:
		return "0"
	case a < 0.01:
		return fmt.Sprintf("%.0e", v)
	}
	return fmt.Sprintf("%.3g", v)
}

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
}

// yRange returns the range of the finite y values of sets (after the log
// transform), padded so lines do not sit on the frame.
func yRange(sets []xySet, logY bool) (lo, hi float64, ok bool) {
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
	if hi-lo < 1e-12 {
		d := max(math.Abs(hi)*0.1, 1e-3)
		return lo - d, hi + d, true
	}
	pad := 0.05 * (hi - lo)
	return lo - pad, hi + pad, true
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
	if spec.xLabel != nil {
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
	return lc
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
	minY, maxY, okY := yRange(sets, spec.logY)
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
