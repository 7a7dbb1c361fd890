package ui

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The versatility experiment's heatmap: one model's metric at every way ×
// shot it is evaluated at.

// expShades stand in for the heatmap's colours without colour, from
// worst to best.
var expShades = []rune{' ', '░', '▒', '▓', '█'}

// expHeatmap draws the versatility grid of every variant at exactly w×h:
// ways down, shots across (shots only for regression), each cell coloured
// by its metric, lighter better; without colour a shade glyph follows
// each value.
func expHeatmap(t Theme, metric string, rows []expRow, w, h int) string {
	var variants []string
	var ways, shots []int
	vals := map[rowKey]float64{}
	status := map[rowKey]runstate.State{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if !slices.Contains(variants, r.Variant) {
			variants = append(variants, r.Variant)
		}
		if !slices.Contains(ways, r.Way) {
			ways = append(ways, r.Way)
		}
		if !slices.Contains(shots, r.Shot) {
			shots = append(shots, r.Shot)
		}
		status[r.rowKey] = r.Status
		if m, _, ok := r.aggregate(); ok && finite(m) {
			vals[r.rowKey] = m
			lo, hi = math.Min(lo, m), math.Max(hi, m)
		}
	}
	slices.Sort(ways)
	slices.Sort(shots)
	level := func(v float64) float64 { // 0 worst … 1 best
		if !(hi > lo) {
			return 1
		}
		x := (v - lo) / (hi - lo)
		if metric != "accuracy" {
			x = 1 - x
		}
		return x
	}
	const cw = 9
	name := "accuracy %"
	if metric != "accuracy" {
		name = "MSE"
	}
	var lines []string
	for _, v := range variants {
		lines = append(lines, t.Bold.Render(v)+t.Dim.Render(" · "+name+" by way × shot, lighter is better"))
		head := fmt.Sprintf("%-7s", "")
		for _, k := range shots {
			head += fmt.Sprintf("%*s", cw, fmt.Sprintf("%d-shot", k))
		}
		lines = append(lines, t.Label.Render(head))
		for _, wy := range ways {
			label := "       "
			if wy > 0 {
				label = fmt.Sprintf("%-7s", fmt.Sprintf("%d-way", wy))
			}
			line := t.Label.Render(label)
			for _, k := range shots {
				rk := rowKey{Variant: v, Way: wy, Shot: k}
				m, ok := vals[rk]
				st, planned := status[rk]
				switch {
				case ok:
					x := level(m)
					s := fmtMetric(metric, m)
					if t.Mono {
						g := expShades[int(math.Round(x*float64(len(expShades)-1)))]
						line += fmt.Sprintf(" %6s %c", s, g)
					} else {
						c := t.heat[min(len(t.heat)-1, 2+int(math.Round(x*float64(len(t.heat)-3))))]
						fg := lipgloss.Color("#c0caf5")
						if x > 0.5 {
							fg = lipgloss.Color("#1a1b26")
						}
						line += " " + t.r.NewStyle().Background(c).Foreground(fg).Render(fmt.Sprintf("%*s ", cw-2, s))
					}
				case !planned:
					line += fmt.Sprintf("%*s", cw, "")
				case st == runstate.Evaluating:
					line += t.Key.Render(fmt.Sprintf("%*s", cw, "…  "))
				default:
					line += t.Dim.Render(fmt.Sprintf("%*s", cw, "·  "))
				}
			}
			lines = append(lines, line)
		}
		lines = append(lines, "")
	}
	if len(vals) > 0 {
		legend := "worse "
		if t.Mono {
			legend += string(expShades)
		} else {
			for _, c := range t.heat[2:] {
				legend += t.r.NewStyle().Foreground(c).Render("█")
			}
		}
		lines = append(lines, t.Dim.Render(legend+" better · "+fmtMetric(metric, lo)+"–"+fmtMetric(metric, hi)))
	}
	return block(strings.Join(lines, "\n"), w, h)
}
