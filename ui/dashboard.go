package ui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The dashboard is the training screen: four panes (pane_*.go) and a
// status bar, drawn from the runs' batches (dash_runs.go) into a frame
// (dash_render.go), with its keys in dash_keys.go. This file has the
// component and what its keys do.

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

// dashboard is the training screen. Rendering happens when data or
// layout change (render); View only returns the last frame.
type dashboard struct {
	theme    Theme
	keys     dashKeys
	sess     *session.Session // nil for an experiment's run
	preset   presets.Preset
	classify bool // a classification preset: accuracy instead of the sine fit

	views    [len(toggleVariants)]*runView
	selected int // index into views: whose ω, fit and numbers are shown

	focus     pane
	zoom      bool
	ema, logY bool
	dim       int
	pairX     int
	pairY     int
	task      int
	note      note
	quitting  bool
	readOnly  bool // an experiment's run: the experiment drives it, only view keys work
	opened    bool // read-only too: a finished run opened from its directory (run_open.go)
	// noDisplay says why an opened run has no display to draw (its data
	// set is missing): the fit and ω panes say it instead of waiting.
	noDisplay string
	w, h      int
	panes     [numPanes]string
	paneSize  [numPanes][2]int
	dirty     [numPanes]bool
	frame     string
}

func newDashboard(t Theme, k dashKeys, sess *session.Session, p presets.Preset) *dashboard {
	d := &dashboard{theme: t, keys: k, sess: sess, preset: p, classify: p.Config.Classify(),
		selected: variantIndex(p.Variant), pairY: 1}
	for i, v := range toggleVariants {
		d.views[i] = &runView{variant: v, state: runstate.Off, curve: curve{Variant: v}}
	}
	d.markAll()
	return d
}

// Init waits for the session's first batch.
func (d *dashboard) Init() tea.Cmd {
	if d.sess == nil {
		return nil
	}
	return waitBatch(d.sess)
}

func (d *dashboard) SetSize(w, h int) {
	d.w, d.h = w, h
	d.render()
}

// Update takes in the session's batches, re-arming the wait for the next
// one, and the keys.
func (d *dashboard) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		d.SetSize(msg.Width, msg.Height)
	case batchMsg:
		d.apply(msg.ups)
		d.render()
		if msg.ok && d.sess != nil {
			return d, waitBatch(d.sess)
		}
	case tea.KeyMsg:
		d.key(msg)
		d.render()
	}
	return d, nil
}

func (d *dashboard) View() string { return d.frame }

// ShortHelp is the reminder in the header: esc leads back to the picker,
// or from a read-only dashboard to whatever opened it.
func (d *dashboard) ShortHelp() []key.Binding {
	back := short(d.keys.Back, "picker")
	if d.readOnly {
		back = short(d.keys.Back, "back")
	}
	return append([]key.Binding{back}, d.keys.headerHelp()...)
}

func (d *dashboard) FullHelp() [][]key.Binding { return fullHelp(d.HelpGroups()) }

// HelpGroups are every key of the dashboard; of a read-only one, the
// view keys (the experiments screen that shows it adds its own).
func (d *dashboard) HelpGroups() []helpGroup {
	if d.readOnly {
		return []helpGroup{d.keys.viewOnly()}
	}
	return d.keys.groups()
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
	if v.run != nil && v.state == runstate.Stopped {
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
	v.run, v.state, v.ended, v.err, v.replied = r, runstate.Starting, false, nil, 0
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

func (d *dashboard) setMsg(s string)  { d.note.set(s) }
func (d *dashboard) setErr(err error) { d.note.fail(err) }

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
		if v.state != runstate.Stopping && v.run.Send(cmd) {
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
		if v.state != runstate.Stopping {
			v.run.Stop()
			v.state = runstate.Stopping
			n++
		}
	}
	d.dirty[paneRuns] = true
	return n
}

func (d *dashboard) key(msg tea.KeyMsg) {
	k := d.keys
	if d.readOnly && !key.Matches(msg, k.viewOnly().Keys...) {
		if d.opened {
			d.setMsg("a finished run, shown from its files: esc goes back, X runs an experiment on it")
		} else {
			d.setMsg("the experiment drives this run: esc returns to it, q stops it")
		}
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
			case runstate.Paused:
				paused++
			case runstate.Running, runstate.Starting:
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
	case runstate.Starting, runstate.Running, runstate.Paused:
		v.run.Stop()
		v.state = runstate.Stopping
		d.setMsg(fmt.Sprintf("stopping %s; it saves a checkpoint", v.variant))
		d.dirty[paneRuns] = true
	case runstate.Stopping:
		d.setMsg(v.variant + " is stopping")
	default:
		d.start(i)
	}
}
