package ui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/NimbleMarkets/ntcharts/barchart"
	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/heatmap"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/ui/session"
)

// Every pane below is a pure function of its data, the theme and its size,
// returning exactly h lines of w columns: the dashboard caches the strings
// and the golden tests compare them with escapes stripped.

// curve is one run's loss curves: a point per snapshot.
type curve struct {
	Variant              string
	Iter                 []float64
	ELBO, Data, KL, Loss []float64
}

// curvesData is what the curves pane shows.
type curvesData struct {
	Curves   []curve
	Selected int  // the curve whose numbers are shown
	EMA      bool // draw the smoothed curves
	LogY     bool
	DataName string // the data term's name: MSE (regression) or NLL
}

// ema smooths y with a time constant in iterations rather than in points,
// so fast and slow variants (more or fewer points per iteration) are
// smoothed alike: 1/50 of the iterations shown.
func ema(x, y []float64) []float64 {
	out := make([]float64, len(y))
	if len(y) == 0 {
		return out
	}
	tau := max(10, (x[len(x)-1]-x[0])/50)
	s, have := 0.0, false
	for i, v := range y {
		if !finite(v) {
			out[i] = s
			continue
		}
		if !have {
			s, have = v, true
		} else {
			a := 1 - math.Exp(-max(x[i]-x[i-1], 0)/tau)
			s += a * (v - s)
		}
		out[i] = s
	}
	return out
}

// stats are the numbers shown for one metric.
func stats(x, y []float64, higherBetter bool) (latest, best, smooth float64) {
	latest, best, smooth = math.NaN(), math.NaN(), math.NaN()
	for _, v := range y {
		if !finite(v) {
			continue
		}
		if math.IsNaN(best) || higherBetter && v > best || !higherBetter && v < best {
			best = v
		}
		latest = v
	}
	if e := ema(x, y); len(e) > 0 {
		smooth = e[len(e)-1]
	}
	return
}

func curvesPane(t Theme, d curvesData, w, h int) string {
	if len(d.Curves) == 0 {
		return center(t.Dim.Render("waiting for the first iterations…"), w, h)
	}
	sel := d.Curves[min(max(d.Selected, 0), len(d.Curves)-1)]
	type metric struct {
		name   string
		get    func(curve) []float64
		higher bool
	}
	metrics := []metric{
		{"ELBO", func(c curve) []float64 { return c.ELBO }, true},
		{d.DataName, func(c curve) []float64 { return c.Data }, false},
		{"KL", func(c curve) []float64 { return c.KL }, false},
	}
	var lines []string
	for _, m := range metrics {
		l, b, s := stats(sel.Iter, m.get(sel), m.higher)
		lines = append(lines, fmt.Sprintf("%-5s %s %-9s %s %-9s %s %-9s",
			m.name, t.Dim.Render("latest"), num(l), t.Dim.Render("best"), num(b), t.Dim.Render("smoothed"), num(s)))
	}
	var legend []string
	for _, c := range d.Curves {
		i := variantIndex(c.Variant)
		legend = append(legend, t.Swatch(i)+" "+t.Series(i).Render(c.Variant))
	}
	flags := fmt.Sprintf("EMA %s · log y %s", onOff(d.EMA), onOff(d.LogY))
	lines = append(lines, strings.Join(legend, "  ")+"   "+t.Dim.Render(flags))
	head := strings.Join(lines, "\n")
	rows := h - len(lines)

	build := func(m metric) []xySet {
		var sets []xySet
		for _, c := range d.Curves {
			y := m.get(c)
			if m.name == "ELBO" && d.LogY {
				y = c.Loss // −ELBO: a log axis needs positive values
			}
			if d.EMA {
				y = ema(c.Iter, y)
			}
			sets = append(sets, xySet{idx: variantIndex(c.Variant), x: c.Iter, y: y})
		}
		return sets
	}
	titles := []string{"ELBO", d.DataName + " (data term)", "KL"}
	if d.LogY {
		titles[0] = "−ELBO (log)"
		titles[1] += " (log)"
		titles[2] += " (log)"
	}
	spec := chartSpec{logY: d.LogY}
	var charts []string
	if w >= 66 {
		cw := (w - 2) / 3
		for i, m := range metrics {
			cwi := cw
			if i == 2 {
				cwi = w - 2*(cw+1)
			}
			charts = append(charts, lineChart(t, titles[i], build(m), cwi, rows, spec))
		}
		sep := block(strings.Repeat(" \n", rows), 1, rows)
		return block(head, w, len(lines)) + "\n" + joinH(charts[0], sep, charts[1], sep, charts[2])
	}
	ch := rows / 3
	for i, m := range metrics {
		chi := ch
		if i == 2 {
			chi = rows - 2*ch
		}
		charts = append(charts, lineChart(t, titles[i], build(m), w, chi, spec))
	}
	return block(head+"\n"+strings.Join(charts, "\n"), w, h)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// omegaData is what the ω pane shows.
type omegaData struct {
	Variant      string
	Display      *engine.Display
	Dim          int // histogram dimension
	PairX, PairY int // heatmap dimensions
}

// column returns dimension j of the D bases in one flow step.
func column(step []float64, dim, j int) []float64 {
	out := make([]float64, 0, len(step)/dim)
	for i := j; i < len(step); i += dim {
		out = append(out, step[i])
	}
	return out
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
		return center(t.Dim.Render("waiting for the first display snapshot…"), w, h)
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

// accuracyRun is one run's validation curve.
type accuracyRun struct {
	Variant string
	Vals    []session.ValPoint
}

// accuracyData is what the accuracy pane (classification presets) shows.
type accuracyData struct {
	Runs         []accuracyRun
	Selected     int
	Every, Tasks int // validation schedule, for the header
}

// accuracyPane draws every run's validation accuracy over iterations, in
// the place regression presets have the sine fit.
func accuracyPane(t Theme, d accuracyData, w, h int) string {
	head := fmt.Sprintf("validation on %d tasks every %d iterations", d.Tasks, d.Every)
	if d.Every <= 0 {
		head = "this preset does not validate during training; e evaluates now"
	}
	var sets []xySet
	var legend []string
	for i, r := range d.Runs {
		vi := variantIndex(r.Variant)
		s := xySet{idx: vi}
		for _, v := range r.Vals {
			s.x = append(s.x, float64(v.Iter))
			s.y = append(s.y, v.Eval.Mean)
		}
		sets = append(sets, s)
		l := t.Swatch(vi) + " " + t.Series(vi).Render(r.Variant)
		if n := len(r.Vals); n > 0 {
			best := slices.MaxFunc(r.Vals, func(a, b session.ValPoint) int { return cmp.Compare(a.Eval.Mean, b.Eval.Mean) })
			l += fmt.Sprintf(" %s (best %s at %d)", num(r.Vals[n-1].Eval.Mean), num(best.Eval.Mean), best.Iter)
		}
		if i == d.Selected {
			l = t.Bold.Render("▸") + l
		}
		legend = append(legend, l)
	}
	body := lineChart(t, "accuracy", sets, w, h-2, chartSpec{})
	return block(t.Dim.Render(head)+"\n"+strings.Join(legend, "  ")+"\n"+body, w, h)
}

// runRow is one line of the ablation table.
type runRow struct {
	Key, Name, Variant string
	State              string // off, starting, running, evaluating, paused, stopping, stopped, done, failed
	Iter, Iters        int
	ItPerSec           float64
	Loss               float64 // NaN before the first snapshot
	Eval               *engine.EvalResult
	EvalFinal          bool
	Smoothed           float64 // EMA of the loss; NaN before the first snapshot
	Dir                string
	Selected           bool
	Err                string
}

func (r runRow) active() bool {
	switch r.State {
	case "starting", "running", "paused", "stopping", "evaluating":
		return true
	}
	return false
}

func runsPane(t Theme, rows []runRow, w, h int) string {
	var lines []string
	lines = append(lines, t.Dim.Render(fmt.Sprintf("   %-3s %-13s%-10s %-12s %6s %8s %s", "on", " variant", "state", "iteration", "it/s", "loss", "eval (tasks)")))
	var sel *runRow
	var errs []string
	for i := range rows {
		r := rows[i]
		vi := variantIndex(r.Variant)
		box := "[ ]"
		if r.active() {
			box = "[x]"
		}
		name := fmt.Sprintf("%-12s", r.Name)
		if t.Mono {
			name = fmt.Sprintf("%c %-10s", t.Marker(vi), r.Name)
		}
		name = t.Series(vi).Render(name)
		if r.Selected {
			sel = &rows[i]
			name = t.Bold.Render("▸") + name
		} else {
			name = " " + name
		}
		it, ips, loss, ev := "", "", "", ""
		if r.State != "off" {
			it = fmt.Sprintf("%d/%d", r.Iter, r.Iters)
			if r.ItPerSec > 0 && r.State == "running" {
				ips = fmt.Sprintf("%.1f", r.ItPerSec)
			}
			if finite(r.Loss) {
				loss = num(r.Loss)
			}
		}
		if r.Eval != nil {
			ev = fmt.Sprintf("%s±%.2g", num(r.Eval.Mean), r.Eval.CI95) + t.Dim.Render(fmt.Sprintf(" (%d)", r.Eval.Tasks))
			if r.EvalFinal {
				ev += t.Dim.Render(" final")
			}
		}
		state := fmt.Sprintf("%-10s", r.State)
		switch r.State {
		case "failed":
			state = t.Err.Render(state)
			errs = append(errs, t.Err.Render(r.Name+": ")+r.Err)
		case "paused", "stopping", "evaluating":
			state = t.Warn.Render(state)
		case "off":
			state = t.Dim.Render(state)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s%s %-12s %6s %8s %s", t.Key.Render(r.Key), box, name, state, it, ips, loss, ev))
	}
	lines = append(lines, t.Dim.Render("same seed and task stream for every variant · 1-6 toggle · v selects"))
	if sel != nil && sel.Dir != "" {
		lines = append(lines, t.Dim.Render("selected: ")+sel.Variant+t.Dim.Render(" → ")+sel.Dir)
	}
	for _, e := range errs {
		lines = append(lines, strings.Split(lipgloss.NewStyle().Width(w).Render(e), "\n")...)
	}
	if bars := lossBars(t, rows, w, h-len(lines)-1); bars != "" {
		lines = append(lines, "", bars)
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// lossBars compares the runs' smoothed losses side by side, one
// horizontal bar each, when there is room for it.
func lossBars(t Theme, rows []runRow, w, h int) string {
	var data []barchart.BarData
	var names, vals []string
	for _, r := range rows {
		if r.State == "off" || !finite(r.Smoothed) || r.Smoothed < 0 {
			continue
		}
		vi := variantIndex(r.Variant)
		data = append(data, barchart.BarData{Values: []barchart.BarValue{{Name: r.Variant, Value: r.Smoothed, Style: t.Series(vi)}}})
		names = append(names, t.Series(vi).Render(fmt.Sprintf("%-11s", r.Name)))
		vals = append(vals, num(r.Smoothed))
	}
	const nameW, numW = 12, 10
	if len(data) == 0 || h < len(data)+1 || w < nameW+numW+10 {
		return ""
	}
	bc := barchart.New(w-nameW-numW, len(data), barchart.WithHorizontalBars(), barchart.WithNoAxis(),
		barchart.WithBarGap(0), barchart.WithBarWidth(1), barchart.WithNoAutoBarWidth(), barchart.WithDataSet(data))
	bc.Draw()
	out := strings.Split(renderCanvas(&bc.Canvas, t), "\n")
	for i := range out {
		out[i] = names[i] + " " + out[i] + " " + vals[i]
	}
	return t.Bold.Render("smoothed loss, lower is better") + "\n" + strings.Join(out, "\n")
}

// statusData is the status bar's content.
type statusData struct {
	Preset      string
	Variants    []string
	Variant     string // the selected run's
	Iter, Iters int
	ItPerSec    float64
	Dir         string
	State       string
	Msg         string
	MsgErr      bool
}

func eta(d statusData) string {
	if d.ItPerSec <= 0 || d.Iters <= d.Iter {
		return "–"
	}
	return (time.Duration(float64(d.Iters-d.Iter)/d.ItPerSec) * time.Second).Round(time.Second).String()
}

// statusBar is two lines: the selected run's progress, then its
// directory and the latest message.
func statusBar(t Theme, d statusData, w int) string {
	if d.Preset == "" {
		return block("", w, 2)
	}
	vs := make([]string, len(d.Variants))
	for i, v := range d.Variants {
		vs[i] = v
		if v == d.Variant && len(d.Variants) > 1 {
			vs[i] = t.Bold.Render("▸" + v)
		}
	}
	if len(vs) == 0 {
		vs = []string{"no run"}
	}
	pct := 0.0
	if d.Iters > 0 {
		pct = float64(d.Iter) / float64(d.Iters)
	}
	left := fmt.Sprintf(" %s │ %s │ %d/%d ", t.Bold.Render(d.Preset), strings.Join(vs, " "), d.Iter, d.Iters)
	right := fmt.Sprintf(" %3.0f%% │ %.1f it/s │ ETA %s ", 100*pct, d.ItPerSec, eta(d))
	if d.State != "running" {
		right += "│ " + t.Warn.Render(d.State) + " "
	}
	if bw := w - ansi.StringWidthWc(left) - ansi.StringWidthWc(right); bw >= 5 {
		bar := progress.New(progress.WithSolidFill("#ff5f87"), progress.WithoutPercentage(),
			progress.WithWidth(min(bw, 40)), progress.WithColorProfile(t.r.ColorProfile()))
		left += bar.ViewAs(pct)
	}
	line2 := " " + t.Dim.Render(d.Dir)
	if d.Msg != "" {
		msg := d.Msg
		if d.MsgErr {
			msg = t.Err.Render(msg)
		}
		line2 += t.Dim.Render(" │ ") + msg
	}
	return block(left+right+"\n"+line2, w, 2)
}

// helpView is the help overlay: every binding of groups under its
// group's title, in as few columns as fit the height.
func helpView(t Theme, groups []helpGroup, w, h int) string {
	var blocks []string
	for _, g := range groups {
		lines := []string{t.Title.Render(g.Title)}
		kw := 0
		for _, b := range g.Keys {
			kw = max(kw, ansi.StringWidth(b.Help().Key))
		}
		for _, b := range g.Keys {
			lines = append(lines, t.Key.Render(fmt.Sprintf("%-*s", kw, b.Help().Key))+"  "+b.Help().Desc)
		}
		blocks = append(blocks, strings.Join(lines, "\n"))
	}
	title := t.Title.Render("mkbench keys") + t.Dim.Render("   ? or esc closes")
	// Fill columns in order, each up to a height limit; take the fewest
	// columns whose tallest fits, else the most.
	var body string
	for n := 1; n <= len(blocks); n++ {
		limit := 0
		for _, b := range blocks {
			limit = max(limit, lipgloss.Height(b))
		}
		total := 0
		for _, b := range blocks {
			total += lipgloss.Height(b) + 1
		}
		limit = max(limit, (total+n-1)/n)
		var cols []string
		cur := ""
		for _, b := range blocks {
			switch {
			case cur == "":
				cur = b
			case lipgloss.Height(cur)+1+lipgloss.Height(b) <= limit:
				cur += "\n\n" + b
			default:
				cols = append(cols, cur)
				cur = b
			}
		}
		cols = append(cols, cur)
		body = lipgloss.JoinHorizontal(lipgloss.Top, interleave(cols, "   ")...)
		if lipgloss.Height(body)+6 <= h || lipgloss.Width(body)+8 > w {
			break
		}
	}
	box := t.HelpBox.Render(title + "\n\n" + body)
	return block(lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, box), w, h)
}

func interleave(xs []string, sep string) []string {
	var out []string
	for i, x := range xs {
		if i > 0 {
			out = append(out, sep)
		}
		out = append(out, x)
	}
	return out
}
