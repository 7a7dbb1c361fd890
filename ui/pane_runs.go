package ui

import (
	"fmt"
	"strings"

	"github.com/NimbleMarkets/ntcharts/barchart"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The ablation pane: a table of every run, one per toggle, and bars of
// their smoothed losses.

// runRow is one line of the ablation table.
type runRow struct {
	Key, Name, Variant string
	State              runstate.State
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

func (r runRow) active() bool { return r.State.Active() }

// ablationCell is one cell of the ablation table: its text as drawn
// (styled) and its width.
type ablationCell struct {
	text  string
	width int
}

func plainCell(s string) ablationCell { return ablationCell{s, ansi.StringWidthWc(s)} }

// ablationColumn is a column of the ablation table after the variant's
// name: its heading and a cell per row.
type ablationColumn struct {
	head  string
	right bool // numbers, aligned right
	cells []ablationCell
}

func (c ablationColumn) width() int {
	w := ansi.StringWidthWc(c.head)
	for _, x := range c.cells {
		w = max(w, x.width)
	}
	return w
}

// ablationColumns are the table's columns after the name, in the order
// drawn, as wide as w allows: the least useful give way first, as in the
// runs table. The speed goes first (the status bar has the selected
// run's), then the evaluation's "final" mark and its task count, then the
// latest loss (the bars below compare the smoothed ones), then the
// iteration; the state always stays.
//
// gap is the space between columns: two where the pane has the room,
// else one.
func ablationColumns(t Theme, rows []runRow, w int) (cols []ablationColumn, gap int) {
	var state, iter, ips, loss ablationColumn
	state.head, iter.head, ips.head, loss.head = "state", "iteration", "it/s", "loss"
	ips.right, loss.right = true, true
	evals := [3]ablationColumn{{head: "eval"}, {head: "eval (tasks)"}, {head: "eval (tasks)"}}
	for _, r := range rows {
		st := plainCell(string(r.State))
		switch r.State {
		case runstate.Failed:
			st.text = t.Err.Render(string(r.State))
		case runstate.Paused, runstate.Stopping, runstate.Evaluating:
			st.text = t.Warn.Render(string(r.State))
		case runstate.Off:
			st.text = t.Dim.Render(string(r.State))
		}
		state.cells = append(state.cells, st)
		it, rate, l := "", "", ""
		if r.State != runstate.Off {
			it = count(r.Iter) + "/" + count(r.Iters)
			if r.ItPerSec > 0 && r.State == runstate.Running {
				rate = fmt.Sprintf("%.1f", r.ItPerSec)
			}
			if finite(r.Loss) {
				l = num(r.Loss)
			}
		}
		iter.cells, ips.cells, loss.cells = append(iter.cells, plainCell(it)), append(ips.cells, plainCell(rate)), append(loss.cells, plainCell(l))
		var ev [3]ablationCell
		if r.Eval != nil {
			v := fmt.Sprintf("%s±%.2g", num(r.Eval.Mean), r.Eval.CI95)
			tasks := fmt.Sprintf(" (%d)", r.Eval.Tasks)
			ev[0] = plainCell(v)
			ev[1] = ablationCell{v + t.Dim.Render(tasks), ev[0].width + len(tasks)}
			ev[2] = ev[1]
			if r.EvalFinal {
				ev[2] = ablationCell{ev[1].text + t.Dim.Render(" final"), ev[1].width + len(" final")}
			}
		}
		for k := range evals {
			evals[k].cells = append(evals[k].cells, ev[k])
		}
	}
	// Each step narrows the table by one change, until it fits.
	steps := [][]ablationColumn{
		{state, iter, ips, loss, evals[2]},
		{state, iter, loss, evals[2]},
		{state, iter, loss, evals[1]},
		{state, iter, loss, evals[0]},
		{state, iter, evals[0]},
		{state, evals[0]},
	}
	for _, cols := range steps {
		total := ablationNameW - 1 // the name's padding is the first column's gap
		for _, c := range cols {
			total += 1 + c.width()
		}
		if total+len(cols)-1 <= w {
			return cols, 2
		}
		if total <= w {
			return cols, 1
		}
	}
	return steps[len(steps)-1], 1
}

// ablationNameW is the width of a row's start: the toggle's key, its box
// and the variant's name, padded ("1 [x] ▸MetaKernel  ").
const ablationNameW = 19

// ablationCellText pads cell to width, on the left for numbers.
func ablationCellText(c ablationCell, width int, right bool) string {
	gap := strings.Repeat(" ", max(width-c.width, 0))
	if right {
		return gap + c.text
	}
	return c.text + gap
}

func runsPane(t Theme, rows []runRow, w, h int) string {
	cols, gap := ablationColumns(t, rows, w)
	sep := strings.Repeat(" ", gap)
	widths := make([]int, len(cols))
	head := pad("   on  variant", ablationNameW-1)
	for k, c := range cols {
		widths[k] = c.width()
		if k > 0 {
			head += sep
		} else {
			head += " "
		}
		head += ablationCellText(plainCell(c.head), widths[k], c.right)
	}
	lines := []string{t.Dim.Render(strings.TrimRight(head, " "))}
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
		if r.State == runstate.Failed {
			errs = append(errs, t.Err.Render(r.Name+": ")+r.Err)
		}
		line := fmt.Sprintf("%s %s %s", t.Key.Render(r.Key), box, name)
		for k, c := range cols {
			if k > 0 {
				line += sep
			}
			line += ablationCellText(c.cells[i], widths[k], c.right)
		}
		lines = append(lines, line)
	}
	lines = append(lines, t.Dim.Render("same seed and task stream for every variant · 1-6 toggle · v selects"))
	if sel != nil && sel.Dir != "" {
		// Cut at the start: the end of a run's directory is what tells
		// it from the others.
		lead := "selected: " + sel.Variant + " → "
		dir := cutStart(runfile.Printable(sel.Dir), max(w-ansi.StringWidthWc(lead), 12))
		lines = append(lines, t.Dim.Render("selected: ")+sel.Variant+t.Dim.Render(" → ")+dir)
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
