package experiments

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// fitsFigure draws the sine fits: per shot count a row, per display task
// a panel with the truth, the support points and every variant's mean
// prediction with a ±1 sd band over ω draws (the first seed's run). The
// last column holds the legend with each variant's MSE on the tasks.
func fitsFigure(dir string, res *Results) ([]string, error) {
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
	return figure{title: fmt.Sprintf("Sine fits — %s, seed %d", res.Preset, firstSeed(res)), panels: grid}.save(filepath.Join(dir, DirFigures, FigFits))
}
