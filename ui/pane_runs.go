package ui

import (
	"fmt"
	"strings"

	"github.com/NimbleMarkets/ntcharts/barchart"
	"github.com/charmbracelet/lipgloss"

	"github.com/mkbench/mkbench/engine"
)

// The ablation pane: a table of every run, one per toggle, and bars of
// their smoothed losses.

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
			it = count(r.Iter) + "/" + count(r.Iters)
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
