package experiments

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

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
