package experiments

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// Figure file names (without extension) under figures/.
const (
	FigCurves      = "learning-curves"     // ablation: loss, KL, metric per variant
	FigFits        = "sine-fits"           // regression: truth, support, each variant's fit
	FigOmega       = "omega-flow"          // regression: ω after each flow step (metakernel)
	FigEfficiency  = "efficiency"          // metric vs D
	FigVersatility = "versatility"         // metric vs way per shot (or vs shot)
	FigHeatmap     = "versatility-heatmap" // accuracy over the way × shot grid
	FigShots       = "shots"               // metric vs shot per variant
)

// renderAll draws every figure of the experiment that its results allow
// and records them in res.Figures. A panic inside the plotting library
// (it panics on some degenerate inputs) comes back as an error.
func renderAll(dir string, res *Results) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("experiments: drawing the figures: %v", p)
		}
	}()
	var paths []string
	add := func(ps []string, err error) error {
		if err != nil {
			return err
		}
		for _, p := range ps {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	}
	if len(res.Points) == 0 {
		res.Figures = nil
		return nil
	}
	regression := res.Metric != "accuracy"
	if regression {
		// Fits are computed at the end of each run; a run directory from
		// before that (or a report on a copied experiment) gets them here.
		if src, err := presets.NewSource(res.Source); err == nil {
			for _, p := range res.Points {
				for _, s := range p.Seeds {
					if p.Variant == MAML {
						continue
					}
					if err := ensureDisplays(runPath(dir, s.RunDir), src, FitTasks); err != nil {
						return err
					}
				}
			}
		}
	}
	switch res.Experiment {
	case Ablation:
		if err := add(curvesFigure(dir, res)); err != nil {
			return err
		}
		if regression {
			if err := add(fitsFigure(dir, res, FigFits)); err != nil {
				return err
			}
			if err := add(omegaFigure(dir, res)); err != nil {
				return err
			}
		}
	case Efficiency:
		if err := add(efficiencyFigure(dir, res)); err != nil {
			return err
		}
	case Shots:
		if err := add(shotsFigure(dir, res)); err != nil {
			return err
		}
		if regression {
			if err := add(fitsFigure(dir, res, FigFits)); err != nil {
				return err
			}
		}
	case Versatility:
		if err := add(versatilityFigure(dir, res)); err != nil {
			return err
		}
		if !regression {
			if err := add(heatmapFigure(dir, res)); err != nil {
				return err
			}
		}
	}
	res.Figures = paths
	return nil
}

// runPath resolves a SeedResult.RunDir against the experiment directory.
func runPath(dir, run string) string {
	if filepath.IsAbs(run) {
		return run
	}
	return filepath.Join(dir, run)
}

// title is the figure title's common start.
func (r *Results) title(what string) string {
	return fmt.Sprintf("%s — %s, %s %s", what, r.Preset, plural(len(r.seeds()), "seed"), seedList(r.seeds()))
}

// ---- learning curves ----

// curve is a series of (iteration, value) pairs.
type curve struct{ iter, v []float64 }

// readMetrics reads metrics.jsonl of a run.
func readMetrics(dir string) ([]engine.MetricsRow, error) {
	return readJSONL[engine.MetricsRow](filepath.Join(dir, engine.FileMetrics))
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var row T
		if json.Unmarshal(sc.Bytes(), &row) == nil {
			out = append(out, row)
		}
	}
	return out, sc.Err()
}

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
			rows, err := readMetrics(runPath(dir, s.RunDir))
			if err != nil || len(rows) == 0 {
				continue
			}
			runs = append(runs, rows)
			if v, err := readJSONL[engine.ValRow](filepath.Join(runPath(dir, s.RunDir), engine.FileVal)); err == nil && len(v) > 0 {
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

// ---- regression fits ----

// fitsFigure draws the sine fits: per shot count a row, per display task
// a panel with the truth, the support points and every variant's mean
// prediction with a ±1 sd band over ω draws (the first seed's run). The
// last column holds the legend with each variant's MSE on the tasks.
func fitsFigure(dir string, res *Results, name string) ([]string, error) {
	var shots []int
	for _, p := range res.Points {
		if !slices.Contains(shots, p.Shot) {
			shots = append(shots, p.Shot)
		}
	}
	slices.Sort(shots)
	type fitRun struct {
		variant string
		ff      FitFile
	}
	var grid [][]*plot.Plot
	for _, k := range shots {
		var runs []fitRun
		for _, p := range res.Points {
			if p.Shot != k || len(p.Seeds) == 0 {
				continue
			}
			var ff FitFile
			if readJSON(filepath.Join(runPath(dir, p.Seeds[0].RunDir), FileFits), &ff) == nil && len(ff.Fits) > 0 {
				runs = append(runs, fitRun{p.Variant, ff})
			}
		}
		if len(runs) == 0 {
			continue
		}
		legend := legendPanel(fmt.Sprintf("%d-shot: variant (MSE on each task)", k))
		var row []*plot.Plot
		for t, task := range runs[0].ff.Fits {
			pl := newPanel(fmt.Sprintf("%d-shot, display task %d", k, t+1), "x", "y = A·sin(wx + b)")
			truth, err := line(xys(task.GridX, task.Truth), truthColor, vg.Points(3))
			if err != nil {
				return nil, err
			}
			pl.Add(truth)
			for _, r := range runs {
				if t >= len(r.ff.Fits) || len(r.ff.Fits[t].PredMean) == 0 {
					continue
				}
				f := r.ff.Fits[t]
				c := variantColor(r.variant)
				if len(f.PredSD) == len(f.PredMean) {
					band := make(plotter.XYs, 0, 2*len(f.GridX))
					for i, x := range f.GridX {
						band = append(band, plotter.XY{X: x, Y: f.PredMean[i] - f.PredSD[i]})
					}
					for i := len(f.GridX) - 1; i >= 0; i-- {
						band = append(band, plotter.XY{X: f.GridX[i], Y: f.PredMean[i] + f.PredSD[i]})
					}
					if poly, err := plotter.NewPolygon(finite(band)); err == nil {
						poly.Color, poly.LineStyle.Width = withAlpha(c, 0x30), 0
						pl.Add(poly)
					}
				}
				if l, err := line(xys(f.GridX, f.PredMean), c, vg.Points(1.6)); err == nil {
					pl.Add(l)
				}
			}
			// Support points last, on top of every line.
			sup, err := plotter.NewScatter(xys(task.SupportX, task.SupportY))
			if err != nil {
				return nil, err
			}
			sup.Shape, sup.Color, sup.Radius = draw.BoxGlyph{}, supportColor, vg.Points(3.5)
			pl.Add(sup)
			if t == 0 {
				legend.Legend.Add("ground truth", truth)
				legend.Legend.Add("support points", sup)
			}
			row = append(row, pl)
		}
		for _, r := range runs {
			var mses []string
			for _, f := range r.ff.Fits {
				mses = append(mses, fmtValue("mse", f.MSE))
			}
			l, err := line(plotter.XYs{{}}, variantColor(r.variant), vg.Points(1.6))
			if err != nil {
				return nil, err
			}
			legend.Legend.Add(fmt.Sprintf("%s (%s)", r.variant, strings.Join(mses, ", ")), l)
		}
		legend.Legend.Add("band: ±1 sd over ω draws", &plotter.Polygon{Color: color.NRGBA{A: 0x30}})
		grid = append(grid, append(row, legend))
	}
	if len(grid) == 0 {
		return nil, nil
	}
	return figure{title: fmt.Sprintf("Sine fits — %s, seed %d", res.Preset, firstSeed(res)), panels: grid}.save(filepath.Join(dir, DirFigures, name))
}

func firstSeed(res *Results) uint64 {
	if s := res.seeds(); len(s) > 0 {
		return s[0]
	}
	return 0
}

func xys(x, y []float64) plotter.XYs {
	xy := make(plotter.XYs, min(len(x), len(y)))
	for i := range xy {
		xy[i].X, xy[i].Y = x[i], y[i]
	}
	return finite(xy)
}

// ---- ω after each flow step ----

// omegaFigure draws the bases of the metakernel model (or else vrf+cnf)
// after each flow step: one histogram panel per step for the dimension the
// flows change most, and a scatter of that dimension against the second
// most changed one, before and after the flows.
func omegaFigure(dir string, res *Results) ([]string, error) {
	var of OmegaFile
	found := false
	for _, v := range []string{"metakernel", "vrf+cnf"} {
		for _, p := range res.Points {
			if p.Variant == v && len(p.Seeds) > 0 && readJSON(filepath.Join(runPath(dir, p.Seeds[0].RunDir), FileOmega), &of) == nil {
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	if !found || len(of.Steps) < 2 || of.Dim < 2 {
		return nil, nil
	}
	K := len(of.Steps) - 1
	n := len(of.Steps[0]) / of.Dim
	column := func(step, dim int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(of.Steps[step][i*of.Dim+dim])
		}
		return out
	}
	// How far the flows move a dimension's distribution: the mean distance
	// between the sorted samples (quantiles) before and after, in units of
	// the Gaussian's spread.
	change := make([]float64, of.Dim)
	for j := range change {
		a, b := column(0, j), column(K, j)
		slices.Sort(a)
		slices.Sort(b)
		var d float64
		for i := range a {
			d += math.Abs(a[i] - b[i])
		}
		change[j] = d / float64(n) / (sd(a) + 1e-12)
	}
	order := make([]int, of.Dim)
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return change[order[a]] > change[order[b]] })
	j1, j2 := order[0], order[1]
	lo, hi := math.Inf(1), math.Inf(-1)
	for k := 0; k <= K; k++ {
		for _, v := range column(k, j1) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	// The flows' effect shows against the Gaussian they start from: every
	// panel after the first carries q0's density (a moment fit of the
	// step-0 samples) as a grey line.
	q0 := column(0, j1)
	var m0 float64
	for _, v := range q0 {
		m0 += v
	}
	m0 /= float64(len(q0))
	s0 := sd(q0)
	gauss := plotter.NewFunction(func(x float64) float64 {
		return math.Exp(-0.5*(x-m0)*(x-m0)/(s0*s0)) / (s0 * math.Sqrt(2*math.Pi))
	})
	gauss.Color, gauss.Width, gauss.Samples = truthColor, vg.Points(2), 200
	flowColor := seriesColors[0]
	var panels []*plot.Plot
	for k := 0; k <= K; k++ {
		title := "ω₀ ~ q₀ (Gaussian)"
		if k > 0 {
			title = fmt.Sprintf("after flow step %d", k)
		}
		p := newPanel(title, fmt.Sprintf("ω[%d]", j1), "density")
		h, err := plotter.NewHist(plotter.Values(column(k, j1)), 30)
		if err != nil {
			return nil, err
		}
		h.Normalize(1)
		h.FillColor, h.LineStyle.Color = withAlpha(flowColor, 0x70), flowColor
		if k == 0 {
			h.FillColor, h.LineStyle.Color = withAlpha(truthColor, 0x90), truthColor
		}
		p.Add(h)
		if k > 0 {
			p.Add(gauss)
			if k == 1 {
				p.Legend.Add("q₀ (Gaussian fit of step 0)", gauss)
				p.Legend.Top = true
			}
		}
		p.X.Min, p.X.Max = lo, hi
		panels = append(panels, p)
	}
	sc := newPanel(fmt.Sprintf("ω[%d] against ω[%d]", j2, j1), fmt.Sprintf("ω[%d]", j1), fmt.Sprintf("ω[%d]", j2))
	for _, k := range []int{0, K} {
		s, err := plotter.NewScatter(xys(column(k, j1), column(k, j2)))
		if err != nil {
			return nil, err
		}
		s.Shape, s.Radius = draw.CircleGlyph{}, vg.Points(1.6)
		s.Color = withAlpha(truthColor, 0xb0)
		label := "ω₀ ~ q₀"
		if k == K {
			s.Color = withAlpha(flowColor, 0xb0)
			label = fmt.Sprintf("after step %d", K)
		}
		sc.Add(s)
		sc.Legend.Add(label, s)
	}
	sc.Legend.Top = true
	panels = append(panels, sc)
	cols := 3
	var grid [][]*plot.Plot
	for i := 0; i < len(panels); i += cols {
		grid = append(grid, panels[i:min(i+cols, len(panels))])
	}
	title := fmt.Sprintf("%s: bases ω after each flow step — %s seed %d, display task %d, %d bases from %d draws of D=%d; dimension %d of %d (changed most by the flows)",
		of.Variant, res.Preset, of.Seed, of.Task+1, n, of.Draws, of.D, j1, of.Dim)
	return figure{title: title, panels: grid}.save(filepath.Join(dir, DirFigures, FigOmega))
}

func sd(x []float64) float64 {
	var m, ss float64
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	for _, v := range x {
		ss += (v - m) * (v - m)
	}
	return math.Sqrt(ss / float64(max(1, len(x)-1)))
}

// ---- metric against a setting ----

// seriesPanel draws one line with error bars per series over x positions;
// pos maps a setting to its x position (log2 D, log way), and the ticks
// label the positions with the settings.
type series struct {
	name   string
	color  color.RGBA
	points []*Point
	x      func(*Point) int
}

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
	var ss []series
	for _, v := range res.Options.Variants {
		s := series{name: v, color: variantColor(v), x: func(p *Point) int { return p.Bases }}
		for i := range res.Points {
			if res.Points[i].Variant == v {
				s.points = append(s.points, &res.Points[i])
			}
		}
		if len(s.points) > 0 {
			ss = append(ss, s)
		}
	}
	p := seriesPanel(fmt.Sprintf("%s (%s)", ciNote(res), WayShot(res.Points[0].Way, res.Points[0].Shot)),
		"number of bases D (log₂ axis)", res.Metric, ss, func(d int) float64 { return math.Log2(float64(d)) }, nil,
		lowerIsBetter(res.Metric), false) // the legend where the curves end far from it: MSE falls and accuracy rises with D
	return figure{title: res.title("Efficiency: metric against the number of bases D"), panels: [][]*plot.Plot{{p}}}.save(filepath.Join(dir, DirFigures, FigEfficiency))
}

// shotsFigure draws the metric against the shot count, one line per
// variant.
func shotsFigure(dir string, res *Results) ([]string, error) {
	var ss []series
	for _, v := range res.Options.Variants {
		s := series{name: v, color: variantColor(v), x: func(p *Point) int { return p.Shot }}
		for i := range res.Points {
			if res.Points[i].Variant == v {
				s.points = append(s.points, &res.Points[i])
			}
		}
		if len(s.points) > 0 {
			ss = append(ss, s)
		}
	}
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
		var ss []series
		for _, v := range variantsOf(res.Points) {
			s := series{name: v, color: variantColor(v), x: func(p *Point) int { return p.Shot }}
			for i := range res.Points {
				if res.Points[i].Variant == v {
					s.points = append(s.points, &res.Points[i])
				}
			}
			s.name = fmt.Sprintf("%s, trained %d-shot", v, s.points[0].TrainShot)
			ss = append(ss, s)
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
			s := series{name: fmt.Sprintf("%d-shot", k), color: seriesColors[i%len(seriesColors)], x: func(p *Point) int { return p.Way }}
			for j := range res.Points {
				if p := &res.Points[j]; p.Variant == v && p.Shot == k {
					s.points = append(s.points, p)
				}
			}
			ss = append(ss, s)
		}
		row = append(row, seriesPanel(fmt.Sprintf("%s trained %s; ▲ trained setting", v, WayShot(tw, ts)),
			"ways N (log axis)", res.Metric, ss, func(w int) float64 { return math.Log(float64(w)) }, trained, false, true))
	}
	return figure{title: res.title("Versatility: tested N-way k-shot (" + ciNote(res) + ")"), panels: [][]*plot.Plot{row}}.save(filepath.Join(dir, DirFigures, FigVersatility))
}

// heatGrid is the way × shot grid of one variant for plotter.HeatMap:
// columns are ways, rows shots, both by index.
type heatGrid struct {
	ways, shots []int
	z           map[[2]int]float64
}

func (g heatGrid) Dims() (int, int) { return len(g.ways), len(g.shots) }
func (g heatGrid) Z(c, r int) float64 {
	if v, ok := g.z[[2]int{g.ways[c], g.shots[r]}]; ok {
		return v
	}
	return math.NaN()
}
func (g heatGrid) X(c int) float64 { return float64(c) }
func (g heatGrid) Y(r int) float64 { return float64(r) }

// lightBlues runs from near white to a mid blue, light enough everywhere
// for black cell labels.
type lightBlues struct{}

func (lightBlues) Colors() []color.Color {
	const n = 64
	out := make([]color.Color, n)
	for i := range out {
		t := float64(i) / (n - 1)
		mix := func(a, b float64) uint8 { return uint8(math.Round(a + (b-a)*t)) }
		out[i] = color.RGBA{R: mix(247, 107), G: mix(251, 174), B: mix(255, 214), A: 0xff}
	}
	return out
}

// heatmapFigure draws the versatility grid as a heat map with the accuracy
// written in each cell, one panel per trained variant.
func heatmapFigure(dir string, res *Results) ([]string, error) {
	var row []*plot.Plot
	for _, v := range variantsOf(res.Points) {
		g := heatGrid{z: map[[2]int]float64{}}
		var tw, ts int
		var labels plotter.XYLabels
		for _, p := range res.Points {
			if p.Variant != v {
				continue
			}
			tw, ts = p.TrainWay, p.TrainShot
			if !slices.Contains(g.ways, p.Way) {
				g.ways = append(g.ways, p.Way)
			}
			if !slices.Contains(g.shots, p.Shot) {
				g.shots = append(g.shots, p.Shot)
			}
			g.z[[2]int{p.Way, p.Shot}] = 100 * p.Mean
		}
		slices.Sort(g.ways)
		slices.Sort(g.shots)
		for c, w := range g.ways {
			for r, k := range g.shots {
				if z, ok := g.z[[2]int{w, k}]; ok {
					l := fmt.Sprintf("%.1f", z)
					if w == tw && k == ts {
						l += "*"
					}
					labels.XYs = append(labels.XYs, plotter.XY{X: float64(c), Y: float64(r)})
					labels.Labels = append(labels.Labels, l)
				}
			}
		}
		p := newPanel(fmt.Sprintf("%s trained %s (* trained; accuracy %%)", v, WayShot(tw, ts)), "ways N", "shots k")
		h := plotter.NewHeatMap(g, lightBlues{})
		if h.Min == h.Max {
			h.Min -= 1
			h.Max += 1
		}
		h.NaN = color.White
		p.Add(h)
		if lb, err := plotter.NewLabels(labels); err == nil {
			for i := range lb.TextStyle {
				lb.TextStyle[i].XAlign, lb.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
				lb.TextStyle[i].Font.Size = 11
			}
			p.Add(lb)
		}
		xs := make([]float64, len(g.ways))
		for i := range xs {
			xs[i] = float64(i)
		}
		ys := make([]float64, len(g.shots))
		for i := range ys {
			ys[i] = float64(i)
		}
		p.X.Tick.Marker = intTicks(xs, g.ways)
		p.Y.Tick.Marker = intTicks(ys, g.shots)
		p.X.Padding, p.Y.Padding = 0, 0
		row = append(row, p)
	}
	return figure{title: res.title("Versatility heat map: test accuracy (%) by ways and shots"), panels: [][]*plot.Plot{row}}.save(filepath.Join(dir, DirFigures, FigHeatmap))
}
