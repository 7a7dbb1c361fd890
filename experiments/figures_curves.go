package experiments

import (
	"image/color"
	"path/filepath"
	"sort"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// curve is a series of (iteration, value) pairs.
type curve struct{ iter, v []float64 }

// meanOverSeeds averages value(row) over the seeds' runs at the
// iterations every run has.
func meanOverSeeds[T any](runs [][]T, iter func(T) int, value func(T) float64) curve {
	sum := map[int]float64{}
	count := map[int]int{}
	for _, rows := range runs {
		for _, r := range rows {
			sum[iter(r)] += value(r)
			count[iter(r)]++
		}
	}
	var its []int
	for it, n := range count {
		if n == len(runs) {
			its = append(its, it)
		}
	}
	sort.Ints(its)
	var c curve
	for _, it := range its {
		c.iter = append(c.iter, float64(it))
		c.v = append(c.v, sum[it]/float64(len(runs)))
	}
	return c
}

// smooth is a centred moving average over a window of about 1% of the
// curve (metrics rows already average 10 iterations; this takes out the
// rest of the task-to-task noise so that variants can be told apart).
func (c curve) smooth() curve {
	n := len(c.v)
	w := max(1, n/100)
	out := curve{iter: c.iter, v: make([]float64, n)}
	for i := range c.v {
		lo, hi := max(0, i-w), min(n, i+w+1)
		var s float64
		for _, v := range c.v[lo:hi] {
			s += v
		}
		out.v[i] = s / float64(hi-lo)
	}
	return out
}

func (c curve) xys() plotter.XYs {
	xy := make(plotter.XYs, len(c.v))
	for i := range c.v {
		xy[i].X, xy[i].Y = c.iter[i], c.v[i]
	}
	return finite(xy)
}

// curvesFigure draws the ablation's learning curves: loss (−ELBO), KL and
// the training data term from metrics.jsonl, and for classification the
// validation accuracy from val.jsonl, one line per variant (mean over
// seeds).
func curvesFigure(dir string, res *Results) ([]string, error) {
	classify := res.Metric == "accuracy"
	dataName := "training query MSE"
	if classify {
		dataName = "training cross-entropy"
	}
	type spec struct {
		title, ylabel string
		value         func(engine.MetricsRow) float64
	}
	specs := []spec{
		{"loss = −ELBO", "loss (data term + weighted KL)", func(r engine.MetricsRow) float64 { return r.Loss }},
		{"KL divergence", "KL(q ‖ p) per query point (nats)", func(r engine.MetricsRow) float64 { return r.KL }},
		{dataName, dataName, func(r engine.MetricsRow) float64 { return r.Data }},
	}
	panels := make([]*plot.Plot, len(specs))
	values := make([][]float64, len(specs))
	for i, s := range specs {
		panels[i] = newPanel(s.title, "iteration", s.ylabel)
	}
	var val *plot.Plot
	var valValues []float64
	if classify {
		val = newPanel("validation accuracy", "iteration", "validation accuracy (%)")
	}
	legend := legendPanel("variant (mean over seeds; smoothed)")
	type drawn struct {
		variant string
		color   color.RGBA
		xy      plotter.XYs
	}
	curves := make([][]drawn, len(specs))
	for _, p := range res.Points {
		var runs [][]engine.MetricsRow
		var vals [][]engine.ValRow
		for _, s := range p.Seeds {
			run := runPath(dir, s.RunDir)
			rows, err := runfile.Read[engine.MetricsRow](filepath.Join(run, engine.FileMetrics))
			if err != nil || len(rows) == 0 {
				continue
			}
			runs = append(runs, rows)
			if v, err := runfile.Read[engine.ValRow](filepath.Join(run, engine.FileVal)); err == nil && len(v) > 0 {
				vals = append(vals, v)
			}
		}
		if len(runs) == 0 {
			continue
		}
		c := variantColor(p.Variant)
		for i, s := range specs {
			cv := meanOverSeeds(runs, func(r engine.MetricsRow) int { return r.Iter }, s.value).smooth()
			curves[i] = append(curves[i], drawn{p.Variant, c, cv.xys()})
			values[i] = append(values[i], cv.v...)
		}
		if val != nil && len(vals) == len(runs) {
			cv := meanOverSeeds(vals, func(r engine.ValRow) int { return r.Iter }, func(r engine.ValRow) float64 { return 100 * r.Mean })
			if l, s, err := linePoints(cv.xys(), c); err == nil {
				val.Add(l, s)
				valValues = append(valValues, cv.v...)
			}
		}
	}
	if len(curves[0]) == 0 {
		return nil, nil
	}
	// Loss and data term span decades and get a log axis; the KL, which
	// is 0 for the fixed kernels, stays linear.
	for i := range specs {
		logY := i != 1 && wantLogY(values[i])
		if logY {
			setLogY(panels[i])
		}
		for _, d := range curves[i] {
			xy := d.xy
			if logY {
				xy = log10Y(xy)
			}
			l, err := line(xy, d.color, vg.Points(1.4))
			if err != nil {
				continue
			}
			panels[i].Add(l)
			if i == 0 {
				legend.Legend.Add(d.variant, l)
			}
		}
	}
	grid := [][]*plot.Plot{{panels[0], panels[1]}, {panels[2], legend}}
	if val != nil && len(valValues) > 0 {
		grid = [][]*plot.Plot{{panels[0], panels[1], legend}, {panels[2], val}}
	}
	return figure{title: res.title("Learning curves"), panels: grid}.save(filepath.Join(dir, DirFigures, FigCurves))
}
