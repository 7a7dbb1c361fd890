package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// pane names the dashboard's panes, in focus order.
type pane int

const (
	paneCurves pane = iota
	paneFit
	paneOmega
	paneRuns
	numPanes
)

// paneTitles and paneTabs (short, for the header) name the panes; a
// classification preset has an accuracy curve where regression has the
// sine fit.
var (
	paneTitles = [numPanes]string{"Curves", "Sine fit", "ω after each flow step", "Ablation toggles"}
	paneTabs   = [numPanes]string{"Curves", "Fit", "ω", "Ablation"}
)

func (d *dashboard) title(p pane) string {
	if p == paneFit && d.classify {
		return "Validation accuracy"
	}
	return paneTitles[p]
}

func (d *dashboard) tab(p pane) string {
	if p == paneFit && d.classify {
		return "Accuracy"
	}
	return paneTabs[p]
}

// maxCurvePoints bounds a curve's history; past it every other point is
// dropped, which a chart a few hundred columns wide cannot show anyway.
const maxCurvePoints = 20000

// runView is everything the dashboard knows of one variant's run.
type runView struct {
	variant string
	run     *session.Run // the latest run of the variant; nil: never started
	state   string       // see runRow.State
	ended   bool
	curve   curve
	last    *engine.Snapshot
	display *engine.Display
	eval    *engine.EvalResult
	final   bool
	vals    []session.ValPoint
	err     error
}

func (v *runView) active() bool { return v.run != nil && !v.ended }

// shown is the state as the table and status bar say it: a run past its
// last iteration is in its final evaluation, which can take a while.
func (v *runView) shown() string {
	if v.state == "running" && v.last != nil && v.last.Iters > 0 && v.last.Iter >= v.last.Iters {
		return "evaluating"
	}
	return v.state
}

// dashboard is the training screen: four panes and a status bar, drawn
// from the runs' batches. Rendering happens when data or layout change
// (render); View only returns the last frame.
type dashboard struct {
	theme    Theme
	keys     KeyMap
	sess     *session.Session
	preset   presets.Preset
	classify bool // a classification preset: accuracy instead of the sine fit

	views    [len(toggleVariants)]*runView
	selected int // index into views: whose ω, fit and numbers are shown

	focus      pane
	zoom       bool
	ema, logY  bool
	dim        int
	pairX      int
	pairY      int
	task       int
	msg        string
	msgErr     bool
	quitting   bool
	readOnly   bool // an experiment's run: the experiment drives it, only view keys work
	w, h       int
	panes      [numPanes]string
	paneSize   [numPanes][2]int
	dirty      [numPanes]bool
	frame      string
	helpFooter help.Model
}

func newDashboard(t Theme, k KeyMap, sess *session.Session, p presets.Preset) dashboard {
	d := dashboard{theme: t, keys: k, sess: sess, preset: p, classify: p.Config.Classify(),
		selected: variantIndex(p.Variant), pairY: 1}
	for i, v := range toggleVariants {
		d.views[i] = &runView{variant: v, state: "off", curve: curve{Variant: v}}
	}
	d.helpFooter = help.New()
	d.helpFooter.Styles.ShortKey = t.Key
	d.helpFooter.Styles.ShortDesc = t.Dim
	d.helpFooter.Styles.ShortSeparator = t.Dim
	d.markAll()
	return d
}

func (d *dashboard) markAll() {
	for i := range d.dirty {
		d.dirty[i] = true
	}
}

// start begins (or resumes) the run of toggle i.
func (d *dashboard) start(i int) {
	v := d.views[i]
	var r *session.Run
	var err error
	if v.run != nil && v.state == "stopped" {
		r, err = d.sess.Resume(v.run, d.task)
	} else {
		r, err = d.sess.Start(v.variant, d.task)
		if err == nil {
			*v = runView{variant: v.variant, curve: curve{Variant: v.variant}}
		}
	}
	if err != nil {
		d.setErr(err)
		return
	}
	v.run, v.state, v.ended, v.err = r, "starting", false, nil
	verb := "started"
	if r.Resumed {
		verb = "resumed"
	}
	d.setMsg(fmt.Sprintf("%s %s → %s", verb, v.variant, r.Dir))
	if !d.views[d.selected].active() && d.views[d.selected].run == nil {
		d.selected = i
	}
	d.markAll()
}

func (d *dashboard) setMsg(s string) { d.msg, d.msgErr = s, false }
func (d *dashboard) setErr(err error) {
	d.msg, d.msgErr = firstLine(err.Error()), true
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// activeViews are the runs that still train (or are paused or stopping).
func (d *dashboard) activeViews() []*runView {
	var out []*runView
	for _, v := range d.views {
		if v.active() {
			out = append(out, v)
		}
	}
	return out
}

// broadcast sends cmd to every active run and says how many took it.
func (d *dashboard) broadcast(cmd engine.Command) int {
	n := 0
	for _, v := range d.activeViews() {
		if v.state != "stopping" && v.run.Send(cmd) {
			n++
		}
	}
	return n
}

// allEnded reports whether no run is left training.
func (d *dashboard) allEnded() bool { return len(d.activeViews()) == 0 }

// stopAll asks every active run to stop; each checkpoints first.
func (d *dashboard) stopAll() int {
	n := 0
	for _, v := range d.activeViews() {
		if v.state != "stopping" {
			v.run.Stop()
			v.state = "stopping"
			n++
		}
	}
	d.dirty[paneRuns] = true
	return n
}

func (d dashboard) update(msg tea.Msg) (dashboard, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		d.w, d.h = msg.Width, msg.Height
	case batchMsg:
		d.apply(msg.ups)
	case tea.KeyMsg:
		d.key(msg)
	}
	d.render()
	return d, nil
}

func (d *dashboard) key(msg tea.KeyMsg) {
	k := d.keys
	if d.readOnly && !key.Matches(msg, k.NextPane, k.PrevPane, k.Zoom, k.EMA, k.LogY, k.DimNext, k.DimPrev, k.PairX, k.PairY) {
		d.setMsg("the experiment drives this run: esc returns to it, q stops it")
		d.dirty[paneRuns] = true
		return
	}
	for i, b := range k.Toggles {
		if key.Matches(msg, b) {
			d.toggle(i)
			return
		}
	}
	switch {
	case key.Matches(msg, k.Pause):
		var running, paused int
		for _, v := range d.activeViews() {
			switch v.state {
			case "paused":
				paused++
			case "running", "starting":
				running++
			}
		}
		switch {
		case running > 0:
			d.broadcast(engine.Command{Kind: engine.CmdPause})
			d.setMsg("pausing…")
		case paused > 0:
			d.broadcast(engine.Command{Kind: engine.CmdResume})
			d.setMsg("resuming…")
		default:
			d.setMsg("nothing to pause")
		}
	case key.Matches(msg, k.Stop):
		if n := d.stopAll(); n > 0 {
			d.setMsg(fmt.Sprintf("stopping %d run(s); each saves a checkpoint", n))
		} else {
			d.setMsg("nothing to stop")
		}
	case key.Matches(msg, k.Checkpoint):
		if n := d.broadcast(engine.Command{Kind: engine.CmdCheckpoint}); n > 0 {
			d.setMsg(fmt.Sprintf("saving %d checkpoint(s)…", n))
		} else {
			d.setMsg("no active run to checkpoint")
		}
	case key.Matches(msg, k.Evaluate):
		if n := d.broadcast(engine.Command{Kind: engine.CmdEvaluate}); n > 0 {
			d.setMsg(fmt.Sprintf("evaluating %d run(s) on %d fresh tasks…", n, engine.QuickEvalTasks))
		} else {
			d.setMsg("no active run to evaluate")
		}
	case key.Matches(msg, k.NewTask):
		d.task++
		d.broadcast(engine.Command{Kind: engine.CmdDisplayTask, Task: d.task})
		d.setMsg(fmt.Sprintf("display task #%d", d.task))
	case key.Matches(msg, k.NextPane):
		d.focus = (d.focus + 1) % numPanes
		d.markAll()
	case key.Matches(msg, k.PrevPane):
		d.focus = (d.focus + numPanes - 1) % numPanes
		d.markAll()
	case key.Matches(msg, k.Zoom):
		d.zoom = !d.zoom
		d.markAll()
	case key.Matches(msg, k.CycleRun):
		for j := 1; j <= len(d.views); j++ {
			if n := (d.selected + j) % len(d.views); d.views[n].run != nil {
				d.selected = n
				break
			}
		}
		d.markAll()
	case key.Matches(msg, k.EMA):
		d.ema = !d.ema
		d.dirty[paneCurves] = true
	case key.Matches(msg, k.LogY):
		d.logY = !d.logY
		d.dirty[paneCurves] = true
	case key.Matches(msg, k.DimNext):
		d.dim++
		d.dirty[paneOmega] = true
	case key.Matches(msg, k.DimPrev):
		d.dim--
		d.dirty[paneOmega] = true
	case key.Matches(msg, k.PairX):
		d.pairX++
		d.dirty[paneOmega] = true
	case key.Matches(msg, k.PairY):
		d.pairY++
		d.dirty[paneOmega] = true
	}
}

// toggle switches ablation variant i: off or stopped turns it on (a
// stopped run resumes in its directory), a training run is stopped.
func (d *dashboard) toggle(i int) {
	v := d.views[i]
	switch v.state {
	case "starting", "running", "paused":
		v.run.Stop()
		v.state = "stopping"
		d.setMsg(fmt.Sprintf("stopping %s; it saves a checkpoint", v.variant))
		d.dirty[paneRuns] = true
	case "stopping":
		d.setMsg(v.variant + " is stopping")
	default:
		d.start(i)
	}
}

// apply takes in one batch of run updates.
func (d *dashboard) apply(ups []session.Update) {
	for _, u := range ups {
		var v *runView
		var vi int
		for i, w := range d.views {
			if w.run == u.Run {
				v, vi = w, i
			}
		}
		if v == nil {
			continue // a run the dashboard has since replaced
		}
		sel := vi == d.selected
		if len(u.Points) > 0 {
			v.addPoints(u.Points)
			d.dirty[paneCurves] = true
		}
		if u.Last != nil {
			v.last = u.Last
			if v.state == "starting" {
				v.state = "running"
			}
		}
		if u.Display != nil {
			v.display = u.Display
			if sel {
				d.dirty[paneFit], d.dirty[paneOmega] = true, true
			}
		}
		if len(u.Vals) > 0 {
			v.vals = append(v.vals, u.Vals...)
			d.dirty[paneFit] = true
		}
		if u.Eval != nil {
			v.eval, v.final = u.Eval, u.Final
			if !u.Final && u.Last != nil {
				d.setMsg(fmt.Sprintf("%s at iteration %d: %s", v.variant, u.Last.Iter, u.Eval))
			}
		}
		for _, rep := range u.Replies {
			d.reply(v, rep)
		}
		if u.Ended {
			d.ended(v, u)
		}
		d.dirty[paneRuns] = true
	}
}

func (v *runView) addPoints(ps []session.Point) {
	c := &v.curve
	for _, p := range ps {
		// Snapshots sent for a command repeat an iteration, and one sent
		// before the first step has no loss yet.
		if n := len(c.Iter); n > 0 && float64(p.Iter) <= c.Iter[n-1] || p.Iter == 0 {
			continue
		}
		c.Iter = append(c.Iter, float64(p.Iter))
		c.ELBO = append(c.ELBO, p.ELBO)
		c.Data = append(c.Data, p.Data)
		c.KL = append(c.KL, p.KL)
		c.Loss = append(c.Loss, p.Loss)
	}
	if len(c.Iter) > maxCurvePoints {
		for _, s := range []*[]float64{&c.Iter, &c.ELBO, &c.Data, &c.KL, &c.Loss} {
			x := *s
			k := 0
			for i := 0; i < len(x); i += 2 {
				x[k] = x[i]
				k++
			}
			*s = x[:k]
		}
	}
}

func (d *dashboard) reply(v *runView, rep engine.Reply) {
	if rep.Err != nil {
		d.setErr(fmt.Errorf("%s: %w", v.variant, rep.Err))
		return
	}
	switch rep.Kind {
	case engine.CmdPause:
		if v.state != "stopping" {
			v.state = "paused"
		}
		d.setMsg(fmt.Sprintf("paused at iteration %d; p resumes", rep.Iter))
	case engine.CmdResume:
		if v.state == "paused" {
			v.state = "running"
		}
		d.setMsg("resumed")
	case engine.CmdCheckpoint:
		d.setMsg(fmt.Sprintf("checkpoint saved: %s at iteration %d → %s", v.variant, rep.Iter, v.run.Dir))
	}
}

func (d *dashboard) ended(v *runView, u session.Update) {
	v.ended = true
	res, err := u.Result, u.Err
	switch {
	case err == nil:
		v.state = "done"
		ev := ""
		if res.Eval != nil {
			ev = "; eval " + res.Eval.String()
		}
		d.setMsg(fmt.Sprintf("%s finished %d iterations%s", v.variant, res.Iters, ev))
	case res.Interrupted && (errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrStopped)):
		v.state = "stopped"
		d.setMsg(fmt.Sprintf("%s stopped at iteration %d; checkpoint in %s", v.variant, res.Iters, v.run.Dir))
	default:
		v.state, v.err = "failed", err
		d.setErr(fmt.Errorf("%s failed: %w", v.variant, err))
	}
	d.markAll()
}

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
		return fitPane(d.theme, fitData{Variant: sel.variant, Display: sel.display, Task: d.task}, w, h)
	case paneOmega:
		return omegaPane(d.theme, omegaData{Variant: sel.variant, Display: sel.display, Dim: d.dim, PairX: d.pairX, PairY: d.pairY}, w, h)
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
			r.Iter, r.Iters, r.ItPerSec, r.Loss = v.last.Iter, v.last.Iters, v.last.ItersPerSec, v.last.Loss
		}
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
	if d.w < 40 || d.h < 12 {
		d.frame = center("mkbench needs at least 40×12 (now "+fmt.Sprintf("%d×%d", d.w, d.h)+")", d.w, d.h)
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
	hint := d.helpFooter.ShortHelpView(d.keys.HeaderHelp()) + " "
	if gap := d.w - ansi.StringWidthWc(s) - ansi.StringWidthWc(hint); gap > 0 {
		s += strings.Repeat(" ", gap) + hint
	}
	return s
}

func (d *dashboard) status() statusData {
	sel := d.views[d.selected]
	s := statusData{Preset: d.preset.Name, Variant: sel.variant, Msg: d.msg, MsgErr: d.msgErr, State: sel.shown()}
	for i, v := range d.views {
		if v.active() || i == d.selected && v.run != nil {
			s.Variants = append(s.Variants, v.variant)
		}
	}
	if sel.run != nil {
		s.Dir, s.Iters = sel.run.Dir, sel.run.Config.Iters
	}
	if sel.last != nil {
		s.Iter, s.Iters, s.ItPerSec = sel.last.Iter, sel.last.Iters, sel.last.ItersPerSec
		if sel.state != "running" {
			s.ItPerSec = 0
		}
	}
	if d.quitting {
		s.Msg, s.MsgErr = "stopping runs and saving checkpoints… (q again quits at once)", false
	}
	return s
}

func (d dashboard) view() string { return d.frame }
