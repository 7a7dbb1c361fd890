package experiments

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line of a panel: points, each at the setting x gives it
// (D, shots, way).
type series struct {
	name   string
	color  color.RGBA
	points []*Point
	x      func(*Point) int
}

// pointsWhere returns the points of r that keep accepts, in plan order.
func (r *Results) pointsWhere(keep func(*Point) bool) []*Point {
	var out []*Point
	for i := range r.Points {
		if keep(&r.Points[i]) {
			out = append(out, &r.Points[i])
		}
	}
	return out
}

// variantSeries is a series per variant of variants that has points, its
// points at the setting x.
func variantSeries(res *Results, variants []string, x func(*Point) int) []series {
	var ss []series
	for _, v := range variants {
		s := series{name: v, color: variantColor(v), x: x, points: res.pointsWhere(func(p *Point) bool { return p.Variant == v })}
		if len(s.points) > 0 {
			ss = append(ss, s)
		}
	}
	return ss
}

// seriesPanel draws one line with error bars per series over x positions;
// pos maps a setting to its x position (log2 D, log way), and the ticks
// label the positions with the settings. mark, if set, picks the points
// to mark with ▲.
func seriesPanel(title, xlabel, metric string, ss []series, pos func(int) float64, mark func(*Point) bool, legendTop, legendLeft bool) *plot.Plot {
	p := newPanel(title, xlabel, axisLabel(metric))
	var all []float64
	var ticks []int
	for _, s := range ss {
		for _, pt := range s.points {
			all = append(all, scaled(metric, pt.Mean))
			if !slices.Contains(ticks, s.x(pt)) {
				ticks = append(ticks, s.x(pt))
			}
		}
	}
	// Accuracy reads best on a linear axis; MSE spans decades.
	logY := metric != "accuracy" && wantLogY(all)
	if logY {
		setLogY(p)
	}
	for _, s := range ss {
		sort.SliceStable(s.points, func(a, b int) bool { return s.x(s.points[a]) < s.x(s.points[b]) })
		xy := make(plotter.XYs, len(s.points))
		errs := make([]float64, len(s.points))
		for i, pt := range s.points {
			xy[i].X, xy[i].Y = pos(s.x(pt)), scaled(metric, pt.Mean)
			errs[i] = scaled(metric, pt.CI95)
		}
		eb, err := errorBars(xy, errs, s.color, logY)
		if err != nil {
			continue
		}
		if logY {
			xy = log10Y(xy)
		}
		l, sc, err := linePoints(xy, s.color)
		if err != nil {
			continue
		}
		p.Add(l, sc, eb)
		p.Legend.Add(s.name, l, sc)
		if mark != nil {
			for i, pt := range s.points {
				if mark(pt) {
					star, err := plotter.NewScatter(plotter.XYs{xy[i]})
					if err == nil {
						star.Shape, star.Radius, star.Color = draw.PyramidGlyph{}, vg.Points(6), s.color
						p.Add(star)
					}
				}
			}
		}
	}
	slices.Sort(ticks)
	positions := make([]float64, len(ticks))
	for i, t := range ticks {
		positions[i] = pos(t)
	}
	p.X.Tick.Marker = intTicks(positions, ticks)
	p.Legend.Top, p.Legend.Left = legendTop, legendLeft
	return p
}

// ciNote says what the error bars are.
func ciNote(res *Results) string {
	if len(res.seeds()) > 1 {
		return "bars: 95% interval over seeds"
	}
	return "bars: 95% interval over evaluation tasks"
}

// efficiencyFigure draws the metric against the number of bases D (log2
// axis), one line per kernel.
func efficiencyFigure(dir string, res *Results) ([]string, error) {
	ss := variantSeries(res, res.Options.Variants, func(p *Point) int { return p.Bases })
	p := seriesPanel(fmt.Sprintf("%s (%s)", ciNote(res), WayShot(res.Points[0].Way, res.Points[0].Shot)),
		"number of bases D (log₂ axis)", res.Metric, ss, func(d int) float64 { return math.Log2(float64(d)) }, nil,
		lowerIsBetter(res.Metric), false) // the legend where the curves end far from it: MSE falls and accuracy rises with D
	return figure{title: res.title("Efficiency: metric against the number of bases D"), panels: [][]*plot.Plot{{p}}}.save(filepath.Join(dir, DirFigures, FigEfficiency))
}

// shotsFigure draws the metric against the shot count, one line per
// variant.
func shotsFigure(dir string, res *Results) ([]string, error) {
	ss := variantSeries(res, res.Options.Variants, func(p *Point) int { return p.Shot })
	p := seriesPanel(ciNote(res), "shots k (support examples per task"+map[bool]string{true: " and class)", false: ")"}[res.Metric == "accuracy"],
		res.Metric, ss, func(k int) float64 { return float64(k) }, nil, lowerIsBetter(res.Metric), false)
	return figure{title: res.title("Metric against the number of shots"), panels: [][]*plot.Plot{{p}}}.save(filepath.Join(dir, DirFigures, FigShots))
}

// versatilityFigure draws, per trained variant, accuracy against the way
// with one line per shot (classification), or the MSE against the
// evaluation shot with one line per variant (regression); ▲ marks the
// setting the model was trained at.
func versatilityFigure(dir string, res *Results) ([]string, error) {
	trained := func(p *Point) bool { return p.Way == p.TrainWay && p.Shot == p.TrainShot }
	if res.Metric != "accuracy" {
		ss := variantSeries(res, variantsOf(res.Points), func(p *Point) int { return p.Shot })
		for i := range ss {
			ss[i].name = fmt.Sprintf("%s, trained %d-shot", ss[i].name, ss[i].points[0].TrainShot)
		}
		p := seriesPanel(ciNote(res)+"; ▲ trained setting", "evaluation shots k", res.Metric, ss, func(k int) float64 { return float64(k) }, trained, true, false)
		return figure{title: res.title("Versatility: a model trained at one shot count, evaluated at others"), panels: [][]*plot.Plot{{p}}}.save(filepath.Join(dir, DirFigures, FigVersatility))
	}
	var row []*plot.Plot
	for _, v := range variantsOf(res.Points) {
		var shots []int
		var tw, ts int
		for _, p := range res.Points {
			if p.Variant == v && !slices.Contains(shots, p.Shot) {
				shots = append(shots, p.Shot)
			}
			if p.Variant == v {
				tw, ts = p.TrainWay, p.TrainShot
			}
		}
		slices.Sort(shots)
		var ss []series
		for i, k := range shots {
			ss = append(ss, series{name: fmt.Sprintf("%d-shot", k), color: seriesColors[i%len(seriesColors)], x: func(p *Point) int { return p.Way },
				points: res.pointsWhere(func(p *Point) bool { return p.Variant == v && p.Shot == k })})
		}
		row = append(row, seriesPanel(fmt.Sprintf("%s trained %s; ▲ trained setting", v, WayShot(tw, ts)),
			"ways N (log axis)", res.Metric, ss, func(w int) float64 { return math.Log(float64(w)) }, trained, false, true))
	}
	return figure{title: res.title("Versatility: tested N-way k-shot (" + ciNote(res) + ")"), panels: [][]*plot.Plot{row}}.save(filepath.Join(dir, DirFigures, FigVersatility))
}

// heatGrid is the way × shot grid of one variant for plotter.HeatMap:
