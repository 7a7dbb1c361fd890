package ui

import (
	"math"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runstate"
)

// The dashboard's frame: where the panes go, what each is given to draw,
// the header and the status bar. Panes are re-rendered only when their
// data or size changed (dirty, paneSize); View returns the last frame.

// layout places the panes: a 2×2 grid when the terminal is large enough,
// otherwise (or zoomed) the focused pane alone, the others one tab away.
func (d *dashboard) layout() (grid bool, sizes [numPanes][2]int) {
	bodyH := d.h - 3 // header and two status lines
	// Below 140×39 the grid's panes are too small for three charts side
	// by side; one pane at a time reads better.
	grid = !d.zoom && d.w >= 140 && bodyH >= 36
	if !grid {
		sizes[d.focus] = [2]int{d.w, bodyH}
		return false, sizes
	}
	lw, th := d.w/2, bodyH/2
	rw, bh := d.w-lw, bodyH-th
	sizes[paneCurves] = [2]int{lw, th}
	sizes[paneFit] = [2]int{rw, th}
	sizes[paneOmega] = [2]int{lw, bh}
	sizes[paneRuns] = [2]int{rw, bh}
	return true, sizes
}

// paneBody renders pane p's content at w×h.
func (d *dashboard) paneBody(p pane, w, h int) string {
	sel := d.views[d.selected]
	switch p {
	case paneCurves:
		cd := curvesData{EMA: d.ema, LogY: d.logY, DataName: "MSE", Selected: -1}
		if d.classify {
			cd.DataName = "NLL"
		}
		for i, v := range d.views {
			if v.run == nil || len(v.curve.Iter) == 0 {
				continue
			}
			if i == d.selected {
				cd.Selected = len(cd.Curves)
			}
			cd.Curves = append(cd.Curves, v.curve)
		}
		return curvesPane(d.theme, cd, w, h)
	case paneFit:
		if d.classify {
			ad := accuracyData{Selected: -1, Every: d.preset.Config.ValEvery, Tasks: d.preset.Config.ValTasks}
			for i, v := range d.views {
				if v.run == nil {
					continue
				}
				if i == d.selected {
					ad.Selected = len(ad.Runs)
				}
				ad.Runs = append(ad.Runs, accuracyRun{Variant: v.variant, Vals: v.vals})
			}
			return accuracyPane(d.theme, ad, w, h)
		}
		return fitPane(d.theme, fitData{Variant: sel.variant, Display: sel.display, Task: d.task, NoDisplay: d.noDisplay}, w, h)
	case paneOmega:
		return omegaPane(d.theme, omegaData{Variant: sel.variant, Display: sel.display, Dim: d.dim, PairX: d.pairX, PairY: d.pairY, NoDisplay: d.noDisplay}, w, h)
	case paneRuns:
		return runsPane(d.theme, d.rows(), w, h)
	}
	return ""
}

func (d *dashboard) rows() []runRow {
	var rows []runRow
	for i, v := range d.views {
		r := runRow{Key: string(rune('1' + i)), Name: toggleNames[i], Variant: v.variant, State: v.shown(),
			Loss: math.NaN(), Eval: v.eval, EvalFinal: v.final, Selected: i == d.selected}
		if v.run != nil {
			r.Dir, r.Iters = v.run.Dir, v.run.Config.Iters
		}
		if v.last != nil {
			r.Iters, r.ItPerSec, r.Loss = v.last.Iters, v.last.ItersPerSec, v.last.Loss
		}
		r.Iter = v.iteration()
		if v.err != nil {
			r.Err = firstLine(v.err.Error())
		}
		_, _, r.Smoothed = stats(v.curve.Iter, v.curve.Loss, false)
		rows = append(rows, r)
	}
	return rows
}

// framePane draws a pane's border and title around its body.
func (d *dashboard) framePane(p pane, w, h int) string {
	t := d.theme
	border, color := t.Pane, t.PaneColor
	if p == d.focus {
		border, color = t.PaneFocus, t.FocusColor
	}
	title := t.Title.Render(d.title(p))
	if p == paneFit || p == paneOmega {
		title += t.Dim.Render(" · " + d.views[d.selected].variant + " (v)")
	}
	if p == paneCurves {
		title += t.Dim.Render(" · m EMA · l log y")
	}
	if p == paneFit && !d.classify {
		title += t.Dim.Render(" · n new task")
	}
	body := d.paneBody(p, w-2, h-3)
	return box(t, border, color, block(title, w-2, 1)+"\n"+body, w, h)
}

// render rebuilds what changed and composes the frame.
func (d *dashboard) render() {
	if d.w <= 0 || d.h <= 0 {
		return
	}
	t := d.theme
	if f, small := tooSmall(d.w, d.h); small {
		d.frame = f
		return
	}
	grid, sizes := d.layout()
	for p := range numPanes {
		sz := sizes[p]
		if sz[0] == 0 {
			continue
		}
		if d.dirty[p] || d.paneSize[p] != sz {
			d.panes[p] = d.framePane(p, sz[0], sz[1])
			d.paneSize[p], d.dirty[p] = sz, false
		}
	}
	// The panes are exact blocks, so the frame is put together without
	// measuring anything.
	var body string
	if grid {
		body = joinH(d.panes[paneCurves], d.panes[paneFit]) + "\n" + joinH(d.panes[paneOmega], d.panes[paneRuns])
	} else {
		body = d.panes[d.focus]
	}
	d.frame = block(d.header(), d.w, 1) + "\n" + body + "\n" + statusBar(t, d.status(), d.w)
}

// header names the panes, the focused one in brackets (shown alone when
// the terminal is small), and how to get help.
func (d *dashboard) header() string {
	t := d.theme
	s := t.Title.Render(" mkbench ") + t.Dim.Render("│")
	for p := range numPanes {
		if p == d.focus {
			s += t.TabActive.Render("[" + d.tab(p) + "]")
		} else {
			s += t.Tab.Render(d.tab(p))
		}
	}
	return withRight(s, shortHelp(t, d.ShortHelp())+" ", d.w)
}

func (d *dashboard) status() statusData {
	sel := d.views[d.selected]
	s := statusData{Preset: d.preset.Name, Variant: sel.variant, Msg: d.note, State: sel.shown()}
	if dev := engine.DeviceLabel(); dev != engine.CPU {
		s.Device = dev
	}
	for i, v := range d.views {
		if v.active() || i == d.selected && v.run != nil {
			s.Variants = append(s.Variants, v.variant)
		}
	}
	if sel.run != nil {
		s.Dir, s.Iters, s.Budget = sel.run.Dir, sel.run.Config.Iters, sel.run.Budget
	}
	s.Iter = sel.iteration()
	s.Eval = sel.evalProg
	if sel.last != nil {
		s.Iters, s.ItPerSec, s.Wall = sel.last.Iters, sel.last.ItersPerSec, sel.last.Wall
		if sel.state != runstate.Running {
			s.ItPerSec = 0
		}
	}
	if d.quitting {
		s.Msg.set("stopping runs and saving checkpoints… (q again quits at once)")
	}
	return s
}
