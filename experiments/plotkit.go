package experiments

import (
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/mkbench/mkbench/internal/runfile"
)

// Figure geometry: every figure is a grid of panels of one size, so a
// figure's pixel size is predictable (tests check it).
const (
	FigureDPI = 120
	panelW    = 4.4 * vg.Inch
	panelH    = 3.3 * vg.Inch
	// A figure of one panel is drawn larger: it is the whole figure.
	singleW = 6.4 * vg.Inch
	singleH = 4.6 * vg.Inch
	// The title band has room for two lines, so that the figure's size
	// does not depend on its title's length.
	titleH = 0.62 * vg.Inch
)

// FigureSize is the PNG size in pixels of a figure of rows × cols panels.
func FigureSize(rows, cols int) (w, h int) {
	wl, hl := figureSize(rows, cols)
	return int(math.Round(wl.Dots(FigureDPI))), int(math.Round(hl.Dots(FigureDPI)))
}

func figureSize(rows, cols int) (vg.Length, vg.Length) {
	if rows == 1 && cols == 1 {
		return singleW, singleH + titleH
	}
	return vg.Length(cols) * panelW, vg.Length(rows)*panelH + titleH
}

// figure is a titled grid of panels; nil panels stay blank.
type figure struct {
	title  string
	panels [][]*plot.Plot
}

// save writes the figure as base.png and base.svg (atomically, for
// reading by others like the results) and returns their paths.
func (f figure) save(base string) ([]string, error) {
	rows, cols := len(f.panels), 0
	for _, r := range f.panels {
		cols = max(cols, len(r))
	}
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		copy(grid[i], f.panels[i])
	}
	w, h := figureSize(rows, cols)
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, ext := range []string{".png", ".svg"} {
		var c interface {
			vg.CanvasWriterTo
		}
		switch ext {
		case ".png":
			c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(FigureDPI), vgimg.UseBackgroundColor(color.White))}
		default:
			c = vgsvg.New(w, h)
		}
		dc := draw.New(c)
		// SVG canvases start transparent; paint them white like the PNG
		// so that dark-mode viewers show the same figure.
		dc.FillPolygon(color.White, []vg.Point{{X: 0, Y: 0}, {X: w, Y: 0}, {X: w, Y: h}, {X: 0, Y: h}})
		sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 14), Handler: plot.DefaultTextHandler,
			XAlign: draw.XCenter, YAlign: draw.YTop}
		title := f.title
		if i := strings.Index(title, " — "); i > 0 && sty.Width(title) > w-0.3*vg.Inch {
			title = title[:i] + "\n" + title[i+len(" — "):]
		}
		dc.FillText(sty, vg.Point{X: w / 2, Y: h - 0.1*vg.Inch}, title)
		body := draw.Crop(dc, 0, 0, 0, -titleH)
		tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: 0.15 * vg.Inch, PadY: 0.15 * vg.Inch,
			PadLeft: 0.1 * vg.Inch, PadRight: 0.15 * vg.Inch, PadBottom: 0.1 * vg.Inch}
		canvases := plot.Align(grid, tiles, body)
		for i := range grid {
			for j, p := range grid[i] {
				if p != nil {
					p.Draw(canvases[i][j])
				}
			}
		}
		path := base + ext
		err := runfile.WriteAtomicFunc(path, runfile.Shared, func(w io.Writer) error {
			_, err := c.WriteTo(w)
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// Colors of the variants in every figure; the paper's regression figure
// draws MAML blue, variational RFFs green, with context red, the full
// model black, the truth grey and the support points purple.
var variantColors = map[string]color.RGBA{
	"rbf":        {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"rff":        {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"vrf":        {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"vrf+ctx":    {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"vrf+cnf":    {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	"metakernel": {R: 0x00, G: 0x00, B: 0x00, A: 0xff},
	MAML:         {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
}

var (
	truthColor   = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	supportColor = color.RGBA{R: 0x7b, G: 0x32, B: 0x94, A: 0xff}
)

// seriesColors are for lines that are not variants (shots in the
// versatility figure).
var seriesColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

func variantColor(v string) color.RGBA {
	if c, ok := variantColors[v]; ok {
		return c
	}
	return color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
}

func withAlpha(c color.RGBA, a uint8) color.NRGBA {
	return color.NRGBA{R: c.R, G: c.G, B: c.B, A: a}
}

// newPanel returns a plot with the figures' common style: title, axis
// labels, a light grid.
func newPanel(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 12
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Label.TextStyle.Font.Size = 11
	p.Y.Label.TextStyle.Font.Size = 11
	p.Legend.TextStyle.Font.Size = 10
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 0xe0}
	g.Horizontal.Color = color.Gray{Y: 0xe0}
	p.Add(g)
	return p
}

// legendPanel is a panel holding only a legend, for figures whose panels
// are too full to carry one.
func legendPanel(title string) *plot.Plot {
	p := plot.New()
	p.HideAxes()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 12
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = 11
	p.Legend.YOffs = -0.1 * vg.Inch
	return p
}

func line(xy plotter.XYs, c color.Color, width vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = c, width
	return l, nil
}

// linePoints is a line with a glyph at every point.
func linePoints(xy plotter.XYs, c color.Color) (*plotter.Line, *plotter.Scatter, error) {
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return nil, nil, err
	}
	l.Color, l.Width = c, vg.Points(1.6)
	s.Color, s.Shape, s.Radius = c, draw.CircleGlyph{}, vg.Points(3)
	return l, s, nil
}

// errorBars draws ±err[i] around xy. With logY the bars are drawn on
// log10 data (see log10Y), their lower end kept above zero.
func errorBars(xy plotter.XYs, errs []float64, c color.Color, logY bool) (*plotter.YErrorBars, error) {
	ye := make(plotter.YErrors, len(xy))
	at := xy
	for i, e := range errs {
		ye[i].Low, ye[i].High = e, e
		if logY {
			y := xy[i].Y
			ye[i].Low = math.Log10(y) - math.Log10(math.Max(y-e, 0.1*y))
			ye[i].High = math.Log10(y+e) - math.Log10(y)
		}
	}
	if logY {
		at = log10Y(xy)
	}
	b, err := plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{at, ye})
	if err != nil {
		return nil, err
	}
	b.Color, b.Width, b.CapWidth = c, vg.Points(1.2), vg.Points(6)
	return b, nil
}

// wantLogY reports whether values call for a log y axis: all positive,
// spanning more than a factor of 10, where a linear axis hides the small
// ones.
func wantLogY(values []float64) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if !(v > 0) || math.IsInf(v, 0) {
			return false
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	return len(values) > 0 && hi > 10*lo
}

// Log axes are drawn as log10 of the data on a linear axis whose ticks
// are labelled with the values (setLogY), not with gonum's LogScale: its
// glyph box for a centred axis label sits at the arithmetic midpoint,
// which on a log axis pushes the panel's data area down, and it panics on
// values ≤ 0.
func setLogY(p *plot.Plot) { p.Y.Tick.Marker = log10Ticks{} }

// log10Y returns xy with log10 of its y values.
func log10Y(xy plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, len(xy))
	for i, p := range xy {
		out[i] = plotter.XY{X: p.X, Y: math.Log10(p.Y)}
	}
	return finite(out)
}

// log10Ticks are logTicks for an axis holding log10 of the values.
type log10Ticks struct{}

func (log10Ticks) Ticks(lo, hi float64) []plot.Tick {
	ts := logTicks{}.Ticks(math.Pow(10, lo), math.Pow(10, hi))
	for i := range ts {
		ts[i].Value = math.Log10(ts[i].Value)
	}
	return ts
}

// logTicks marks a log axis at 1, 2, …, 9 times the powers of ten in
// range and labels 1, 2 and 5 (and 3 within a decade and a half; only the
// powers of ten past three decades),
// so that an axis spanning one or two decades still reads; gonum's
// LogTicks labels powers of ten only.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	decades := math.Log10(hi / lo)
	var ts []plot.Tick
	labelled := 0
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (decades <= 3 && (m == 2 || m == 5)) || (decades <= 1.5 && m == 3) {
				t.Label = strconv.FormatFloat(v, 'g', 6, 64)
				labelled++
			}
			ts = append(ts, t)
		}
	}
	if labelled < 2 {
		// Less than a decade between 1-2-5 marks: label every mark.
		for i := range ts {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// intTicks labels the given positions with the given values, for axes
// drawn on a transformed position (log2 D, log way) or categories.
func intTicks(pos []float64, labels []int) plot.ConstantTicks {
	var t plot.ConstantTicks
	for i, x := range pos {
		t = append(t, plot.Tick{Value: x, Label: strconv.Itoa(labels[i])})
	}
	return t
}

// finite drops non-finite points, which gonum cannot draw.
func finite(xy plotter.XYs) plotter.XYs {
	out := xy[:0:0]
	for _, p := range xy {
		if !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) && !math.IsNaN(p.X) && !math.IsInf(p.X, 0) {
			out = append(out, p)
		}
	}
	return out
}

// scaled is v in the unit tables and axes use: percent for accuracy.
func scaled(metric string, v float64) float64 {
	if metric == "accuracy" {
		return 100 * v
	}
	return v
}

// axisLabel is the y label of a metric axis.
func axisLabel(metric string) string {
	if metric == "accuracy" {
		return "test accuracy (%, higher is better)"
	}
	return "test MSE (lower is better)"
}

// xys pairs x and y (as far as both go) into plot points, finite ones only.
func xys(x, y []float64) plotter.XYs {
	xy := make(plotter.XYs, min(len(x), len(y)))
	for i := range xy {
		xy[i].X, xy[i].Y = x[i], y[i]
	}
	return finite(xy)
}
