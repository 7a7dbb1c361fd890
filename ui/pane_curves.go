package ui

import (
	"fmt"
	"math"
	"strings"
)

// The curves pane: ELBO, the data term and KL over iterations for every
// run, overlaid, with the selected run's latest, best and smoothed
// numbers.

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

// curveMetric is one of the curves pane's charts.
type curveMetric struct {
	name   string
	get    func(curve) []float64
	higher bool
	// nonNeg: the metric is never negative (the data term, MSE or NLL,
	// and KL), so its axis starts no lower than 0.
	nonNeg bool
}

func (m curveMetric) spec(s chartSpec) chartSpec {
	s.nonNeg = m.nonNeg
	return s
}

func curvesPane(t Theme, d curvesData, w, h int) string {
	if len(d.Curves) == 0 {
		return center(t.Dim.Render("waiting for the first iterations…"), w, h)
	}
	sel := d.Curves[min(max(d.Selected, 0), len(d.Curves)-1)]
	metrics := []curveMetric{
		{"ELBO", func(c curve) []float64 { return c.ELBO }, true, false},
		{d.DataName, func(c curve) []float64 { return c.Data }, false, true},
		{"KL", func(c curve) []float64 { return c.KL }, false, true},
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

	build := func(m curveMetric) []xySet {
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
	spec := chartSpec{logY: d.LogY, iterX: true}
	var charts []string
	if w >= 66 {
		cw := (w - 2) / 3
		for i, m := range metrics {
			cwi := cw
			if i == 2 {
				cwi = w - 2*(cw+1)
			}
			charts = append(charts, lineChart(t, titles[i], build(m), cwi, rows, m.spec(spec)))
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
		charts = append(charts, lineChart(t, titles[i], build(m), w, chi, m.spec(spec)))
	}
	return block(head+"\n"+strings.Join(charts, "\n"), w, h)
}
