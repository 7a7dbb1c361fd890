package experiments

import (
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// Group is one point of a sweep's results figure: a variant at one grid
// setting, its metric over seeds, and the run directories its curve is
// averaged over.
type Group struct {
	Variant string
	Setting string // the grid point's label; "" without a grid
	Mean    float64
	CI95    float64
	Runs    []string
}

// GroupsFigure draws a sweep's results as base.png and base.svg: the
// metric at each grid setting (categories along x), one line per variant
// with 95% bars, and beside it each group's training loss, mean over its
// seeds. It returns the files written.
func GroupsFigure(base, title, metric string, groups []Group) ([]string, error) {
	var settings, variants []string
	for _, g := range groups {
		if !slices.Contains(settings, g.Setting) {
			settings = append(settings, g.Setting)
		}
		if !slices.Contains(variants, g.Variant) {
			variants = append(variants, g.Variant)
		}
	}
	xlabel := "grid setting"
	if len(settings) == 1 && settings[0] == "" {
		xlabel = ""
	}
	points := newPanel(metricTitle(metric), xlabel, axisLabel(metric))
	var all []float64
	for _, g := range groups {
		all = append(all, scaled(metric, g.Mean))
	}
	logY := metric != "accuracy" && wantLogY(all)
	if logY {
		setLogY(points)
	}
	curves := newPanel("loss = −ELBO (mean over seeds, smoothed)", "iteration", "loss")
	for vi, v := range variants {
		c := variantColor(v)
		if _, known := variantColors[v]; !known {
			c = seriesColors[vi%len(seriesColors)]
		}
		var xy plotter.XYs
		var errs []float64
		for _, g := range groups {
			if g.Variant != v {
				continue
			}
			xy = append(xy, plotter.XY{X: float64(slices.Index(settings, g.Setting)), Y: scaled(metric, g.Mean)})
			errs = append(errs, scaled(metric, g.CI95))
			if cv := groupCurve(g.Runs); len(cv.v) > 0 {
				if l, err := line(cv.smooth().xys(), c, 1); err == nil {
					curves.Add(l)
				}
			}
		}
		eb, err := errorBars(xy, errs, c, logY)
		if err != nil {
			continue
		}
		if logY {
			xy = log10Y(xy)
		}
		l, sc, err := linePoints(xy, c)
		if err != nil {
			continue
		}
		points.Add(l, sc, eb)
		points.Legend.Add(v, l, sc)
	}
	var ticks plot.ConstantTicks
	for i, s := range settings {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: s})
	}
	points.X.Tick.Marker = ticks
	points.X.Min, points.X.Max = -0.5, float64(len(settings))-0.5
	return figure{title: title, panels: [][]*plot.Plot{{points, curves}}}.save(base)
}

// groupCurve is the mean training loss of runs over iterations.
func groupCurve(runs []string) curve {
	var rows [][]engine.MetricsRow
	for _, r := range runs {
		if m, err := runfile.Read[engine.MetricsRow](filepath.Join(r, engine.FileMetrics)); err == nil && len(m) > 0 {
			rows = append(rows, m)
		}
	}
	if len(rows) == 0 {
		return curve{}
	}
	return meanOverSeeds(rows, func(r engine.MetricsRow) int { return r.Iter }, func(r engine.MetricsRow) float64 { return r.Loss })
}

func metricTitle(metric string) string {
	if metric == "accuracy" {
		return "test accuracy"
	}
	return "test " + metric
}
