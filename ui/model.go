package ui

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
	"github.com/mkbench/mkbench/ui/session"

	"github.com/mkbench/mkbench/internal/runstate"
)

// Options configure the workbench.
type Options struct {
	Preset string // start this preset at once instead of showing the picker
	Iters  int    // iteration budget; 0 is the preset's
	// Minutes is every run's training-time budget (mkbench run
	// --minutes); 0 is none. Status lines then give the budget's ETA when
	// it ends a run before its iterations do.
	Minutes float64
	Seed    int64  // < 0 is the preset's
	Root    string // runs root; "" is presets.RunsRoot()
	// Data is the data folder (as mkbench run --data); "" is the default
	// search, and a folder preset then asks for its folder (folder_prompt.go).
	Data string
	// Overrides replace preset settings in every run and experiment, as
	// presets.Spec applies them; Iters and Seed are added to them.
	Overrides presets.Overrides
	// NewSources builds a run's task sources; nil is presets.NewSources
	// with Data (or the folder a folder preset's prompt was given).
	NewSources func(family string, cfg engine.Config) (presets.Sources, error)
	// Renderer styles the output; nil is lipgloss's default renderer,
	// which follows the terminal and NO_COLOR.
	Renderer *lipgloss.Renderer
	// Interval is the shortest time between redraws for new data; 0 is
	// session.DefaultInterval.
	Interval time.Duration
	// Sweep opens the workbench on the sweep screen watching this sweep
	// directory instead of the picker; leaving that screen quits.
	Sweep string
	// Models are the trained models the picker lists; nil is the models
	// shipped in mkbench (models.Shipped).
	Models *models.Library
	// Runs opens the workbench on the runs screen listing the runs under
	// this folder instead of the picker (mkbench tui --runs).
	Runs string
	// Devices lets the picker choose the device the runs train on (d);
	// nil offers no choice: the runs train where the process's device is
	// (engine.UseDevice).
	Devices DeviceChooser
}

// models is the library of Options.Models and its models. A library that
// cannot be listed offers none: the workbench works without them, and
// mkbench models says what is wrong. A library with damaged models offers
// the others, and damaged says which are left out and why.
func (o Options) models() (lib models.Library, list []models.Info, damaged error) {
	lib = models.Shipped()
	if o.Models != nil {
		lib = *o.Models
	}
	list, err := lib.List()
	if errors.Is(err, models.ErrDamaged) {
		return lib, list, err
	}
	if err != nil {
		return lib, nil, nil
	}
	return lib, list, nil
}

// screen is the root model's state: which screen shows.
type screen int

const (
	screenPicker screen = iota
	screenDashboard
	screenExperiments
	screenSweep
	screenFolder // the folder prompt of a folder preset
	screenOpened // a finished run or shipped model, read from its files
	screenRuns   // every run under the runs root (runs_screen.go)
)

// Model is the root bubbletea model. It owns the session and the
// experiments, and holds the workbench's components: the picker, then
// the dashboard, and the experiments screen (opened from either), with
// the help overlay above whichever shows. Window sizes and run data go
// to every component, keys only to the one showing.
type Model struct {
	opts    Options
	theme   Theme
	keys    globalKeys
	screen  screen
	picker  *picker
	dash    *dashboard // nil until a preset is picked
	opened  *dashboard // the run opened from its files (run_open.go); nil if none
	openRun openedRun
	runs    *runsScreen // nil until opened
	// runsFrom and openedFrom are the screens the runs screen and the
	// opened run go back to.
	runsFrom, openedFrom screen
	exp                  *expScreen
	sweep                *sweepScreen
	folder               *folderPrompt
	help                 *helpOverlay
	sess                 *session.Session
	exps                 *expRegistry
	from                 screen // where the experiments screen was opened from
	quitting             bool
	// ended is set with the tea.Quit that ends the program: the last
	// frame is then empty, so the terminal keeps nothing of the
	// workbench (see View).
	ended bool
	w, h  int
}

// New returns the workbench model. Its session exists from the start, so
// whoever runs the program can stop its runs afterwards (Session).
func New(opts Options) Model {
	r := opts.Renderer
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	t := NewTheme(r)
	sess := session.New(presets.Preset{}, opts.Root)
	sess.NewSources, sess.Data, sess.Interval = opts.NewSources, opts.Data, opts.Interval
	sess.Overrides = opts.runOverrides()
	budget, budgetErr := engine.MinutesBudget(opts.Minutes)
	sess.Budget = budget
	reg := &expRegistry{}
	root := opts.runsRoot()
	_, shipped, damaged := opts.models()
	m := Model{opts: opts, theme: t, keys: newGlobalKeys(), picker: newPicker(t, newPickerKeys(), presets.All(), shipped),
		exp: newExpScreen(t, opts, reg), sweep: newSweepScreen(t, root), folder: newFolderPrompt(t, sess.Overrides),
		help: newHelpOverlay(t), sess: sess, exps: reg}
	m.picker.askFolder = opts.Data == ""
	m.picker.dev.chooser, m.picker.busy = opts.Devices, m.training
	if damaged != nil {
		m.picker.err = firstLine(damaged.Error())
	}
	if budgetErr != nil {
		m.picker.err = firstLine(budgetErr.Error())
	}
	if opts.Sweep != "" {
		m.screen, m.sweep.direct = screenSweep, true
		m.sweep.watch(opts.Sweep) // Init reads it
	}
	if opts.Runs != "" {
		m.runs = newRunsScreen(t, opts.Runs, opts.Data)
		m.screen, m.runsFrom = screenRuns, screenPicker
	}
	return m
}

// training says what of the workbench trains ("2 runs", "an
// experiment"), "" when nothing does: the device cannot change under it.
func (m Model) training() string {
	n := 0
	for _, r := range m.sess.Runs() {
		if r.Alive() {
			n++
		}
	}
	if n > 0 {
		return plural(n, "run")
	}
	for _, w := range m.exps.Workers() {
		if _, ended, _ := w.Outcome(); !ended {
			return "an experiment's runs"
		}
	}
	return ""
}

// runOverrides are the overrides of every run: Options.Overrides with the
// iteration budget and seed, when set, added.
func (o Options) runOverrides() presets.Overrides {
	ov := o.Overrides
	if o.Iters > 0 {
		ov = ov.With("iters", o.Iters)
	}
	if o.Seed >= 0 {
		ov = ov.With("seed", int(o.Seed))
	}
	return ov
}

// runsRoot is the runs root: Root, else presets.RunsRoot().
func (o Options) runsRoot() string {
	if o.Root == "" {
		return presets.RunsRoot()
	}
	return o.Root
}

// runsRoot is the runs root of the options.
func (m Model) runsRoot() string { return m.opts.runsRoot() }

// Session is where the model's runs live.
func (m Model) Session() *session.Session { return m.sess }

// Experiments are the experiments started from the workbench.
func (m Model) Experiments() []*expWorker { return m.exps.Workers() }

// Init starts the preset given in the options, if any, or reads the
// sweep.
func (m Model) Init() tea.Cmd {
	if m.opts.Sweep != "" {
		return m.sweep.Init()
	}
	if m.runs != nil {
		return m.runs.Init()
	}
	if m.opts.Preset == "" {
		return nil
	}
	p, err := presets.Get(m.opts.Preset)
	if err != nil {
		return tea.Sequence(tea.Println(err.Error()), tea.Quit)
	}
	return func() tea.Msg { return pickedMsg{p: p} }
}

// components are the components that exist.
func (m Model) components() []component {
	cs := []component{m.picker, m.exp, m.sweep, m.folder, m.help}
	if m.dash != nil {
		cs = append(cs, m.dash)
	}
	if m.opened != nil {
		cs = append(cs, m.opened)
	}
	if m.runs != nil {
		cs = append(cs, m.runs)
	}
	return cs
}

// current is the screen showing (under the help overlay, if open).
func (m Model) current() component {
	switch m.screen {
	case screenDashboard:
		return m.dash
	case screenExperiments:
		return m.exp
	case screenSweep:
		return m.sweep
	case screenFolder:
		return m.folder
	case screenOpened:
		return m.opened
	case screenRuns:
		return m.runs
	}
	return m.picker
}

// toAll sends msg to every component.
func (m Model) toAll(msg tea.Msg) tea.Cmd {
	var cmds []tea.Cmd
	for _, c := range m.components() {
		_, cmd := c.Update(msg)
		cmds = append(cmds, cmd)
	}
	return tea.Batch(cmds...)
}

// Update routes messages: sizes and run data to every component, keys
// only to the one showing; the root itself answers quit and help, and
// the navigation messages that move between screens (navigate.go).
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		return m, m.toAll(msg)

	case batchMsg, expBatchMsg:
		cmd := m.toAll(msg) // the component the data is for re-arms its wait
		if m.quitting && m.allEnded() {
			return m.end()
		}
		return m, cmd

	case expStartMsg:
		_, cmd := m.exp.Update(msg)
		return m, cmd

	case folderCheckedMsg:
		_, cmd := m.folder.Update(msg)
		return m, cmd

	case pickedMsg:
		if m.dash != nil && (msg.p.Name == m.dash.preset.Name || !m.dash.allEnded()) {
			return m.backToDashboard(msg.p)
		}
		if msg.p.Source == "folder" && msg.data == "" {
			if m.opts.Data == "" {
				m.screen = screenFolder // ask for the folder of the images
				return m, m.folder.open(msg.p)
			}
			return m, folderGiven(msg.p, m.opts.Data) // --data: read its channels, then start
		}
		m.sess.Preset = msg.p
		if msg.data != "" {
			m.sess.Data = msg.data
		}
		if _, given := m.opts.Overrides["channels"]; msg.channels > 0 && !given {
			m.sess.Overrides = m.sess.Overrides.With("channels", msg.channels)
		}
		// A dashboard whose runs have all ended gives way to the new
		// preset's; its batches' wait, armed already, serves the new one.
		waiting := m.dash != nil
		m.dash = newDashboard(m.theme, newDashKeys(), m.sess, msg.p)
		m.picker.dash = m.dash
		m.dash.SetSize(m.w, m.h)
		m.screen = screenDashboard
		m.dash.start(variantIndex(msg.p.Variant)) // the preset's default: metakernel
		m.dash.render()
		if waiting {
			return m, nil
		}
		return m, m.dash.Init()

	case openModelMsg:
		return m, m.openModel(msg.name)

	case runOpenedMsg:
		m.picker.opened(msg.err)
		if m.screen != screenPicker && m.screen != screenRuns {
			return m, nil // the user went elsewhere meanwhile
		}
		if msg.err != nil {
			if m.screen == screenRuns {
				m.runs.note.fail(msg.err)
			}
			return m, nil
		}
		m.openRun = msg.run
		m.opened = newOpenedDashboard(m.theme, newDashKeys(), msg.run)
		m.opened.SetSize(m.w, m.h)
		m.openedFrom, m.screen = m.screen, screenOpened
		return m, nil

	case openRunMsg:
		return m, openRunCmd(msg.dir, "", m.opts.Data)

	case resumeRunMsg:
		return m.resumeRun(msg.r)

	case runsFoundMsg, runsReadMsg, runsCurvesMsg, runsEvalMsg, runsDeletedMsg, runsTickMsg:
		if m.runs == nil {
			return m, nil
		}
		_, cmd := m.runs.Update(msg) // the runs screen's, wherever the user is
		return m, cmd

	case backMsg, openRunsMsg, openSweepMsg, openExperimentsMsg:
		return m.navigate(msg)

	case signalMsg: // SIGHUP, SIGTERM, SIGINT: as q
		return m.quit()

	case tea.KeyMsg:
		return m.keys1by1(msg)
	}
	_, cmd := m.current().Update(msg)
	return m, cmd
}

// openModel writes shipped model name as a run directory under the runs
// root (kept as it is when it holds the model already; an earlier model
// there is moved aside, which the opened run's note says) and opens it.
func (m Model) openModel(name string) tea.Cmd {
	lib, _, _ := m.opts.models()
	dir := models.RunDir(m.runsRoot(), name)
	data := m.opts.Data
	return func() tea.Msg {
		aside, err := lib.Materialize(name, dir)
		if err != nil {
			return runOpenedMsg{err: err}
		}
		msg := openRunCmd(dir, name, data)().(runOpenedMsg)
		if aside != "" {
			// Short, and the sibling's name only: the message line is one
			// row, after the run's folder.
			moved := "earlier model moved to " + filepath.Base(aside)
			if msg.run.Note != "" {
				moved = msg.run.Note + "; " + moved
			}
			msg.run.Note = moved
		}
		return msg
	}
}

// resumeRun continues run r on the dashboard, its curves so far drawn
// from its files. One dashboard trains one preset's runs: with one up
// already, the run is resumed from there instead.
func (m Model) resumeRun(r runs.Run) (tea.Model, tea.Cmd) {
	if m.dash != nil {
		m.runs.note.set(fmt.Sprintf("the dashboard trains %s already: resume %s with mkbench run --resume %s, or from a new workbench", m.dash.preset.Name, r.Rel, r.Dir))
		return m, nil
	}
	or, err := openRun(r.Dir, m.opts.Data)
	if err != nil {
		m.runs.note.fail(err)
		return m, nil
	}
	rc, err := engine.ReadRunConfig(r.Dir)
	if err != nil {
		m.runs.note.fail(err)
		return m, nil
	}
	m.sess.Preset = or.Preset
	if rc.Data != "" {
		m.sess.Data = rc.Data
	}
	m.dash = newDashboard(m.theme, newDashKeys(), m.sess, or.Preset)
	m.picker.dash = m.dash
	vi := variantIndex(or.Run.Variant)
	m.dash.views[vi].run = or.Run
	or.Update.Display = nil // the live run draws its own
	m.dash.apply([]session.Update{or.Update})
	m.dash.views[vi].state = runstate.Stopped // resumable, failed or not
	m.dash.selected = vi
	m.dash.SetSize(m.w, m.h)
	m.dash.start(vi)
	m.dash.render()
	m.screen = screenDashboard
	return m, m.dash.Init()
}

// allEnded reports whether no run and no experiment is left working.
func (m Model) allEnded() bool {
	return (m.dash == nil || m.dash.allEnded()) && !m.exp.running()
}

// quit stops the runs first: each saves a checkpoint and the program ends
// when the last one has. A second quit does not wait.
func (m Model) quit() (tea.Model, tea.Cmd) {
	if m.quitting || m.allEnded() {
		return m.end()
	}
	m.quitting = true
	if m.dash != nil && !m.dash.allEnded() {
		m.dash.quitting = true
		m.dash.stopAll()
		m.dash.render()
	}
	m.exp.stop()
	return m, nil
}

// end ends the program with an empty last frame.
func (m Model) end() (tea.Model, tea.Cmd) {
	m.ended = true
	return m, tea.Quit
}

// View is the frame of the component showing: the help overlay if open,
// else the screen's (which the dashboard renders when its data changes).
// The last frame, drawn as the program ends, is empty: bubbletea flushes
// it into the alternate screen before leaving it, and a blank screen with
// the cursor at its top is what a terminal that reflows the alternate
// screen on leaving it (tmux after the window grew) can copy back without
// leaving a piece of the dashboard above the summary Run prints.
func (m Model) View() string {
	if m.w == 0 || m.ended {
		return ""
	}
	if m.help.open {
		return m.help.View()
	}
	return m.current().View()
}
