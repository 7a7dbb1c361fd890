package ui

import (
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// Options configure the workbench.
type Options struct {
	Preset string // start this preset at once instead of showing the picker
	Iters  int    // iteration budget; 0 is the preset's
	Seed   int64  // < 0 is the preset's
	Root   string // runs root; "" is presets.RunsRoot()
	Data   string // Omniglot folder (as mkbench run --data); "" is the default search
	// Overrides replace preset settings in every run and experiment, as
	// presets.Spec applies them; Iters and Seed are added to them.
	Overrides presets.Overrides
	// NewSources builds a run's task sources; nil is presets.NewSources
	// with the default data directory.
	NewSources func(family string, cfg engine.Config) (presets.Sources, error)
	// Renderer styles the output; nil is lipgloss's default renderer,
	// which follows the terminal and NO_COLOR.
	Renderer *lipgloss.Renderer
	// Interval is the shortest time between redraws for new data; 0 is
	// session.DefaultInterval.
	Interval time.Duration
}

// screen is the root model's state.
type screen int

const (
	screenPicker screen = iota
	screenDashboard
	screenExperiments
)

// batchMsg carries one batch of run updates from the session.
type batchMsg struct {
	ups []session.Update
	ok  bool
}

// waitBatch is the command that brings the next batch; Update re-arms it
// after each one, so exactly one is ever waiting.
func waitBatch(s *session.Session) tea.Cmd {
	return func() tea.Msg {
		ups, ok := s.Next()
		return batchMsg{ups, ok}
	}
}

// Model is the root bubbletea model: the picker, then the dashboard,
// with the help overlay above either.
type Model struct {
	opts     Options
	theme    Theme
	keys     KeyMap
	screen   screen
	picker   picker
	dash     dashboard
	sess     *session.Session
	exp      expScreen
	exps     *expRegistry
	from     screen // where the experiments screen was opened from
	help     bool
	quitting bool
	w, h     int
}

// New returns the workbench model. Its session exists from the start, so
// whoever runs the program can stop its runs afterwards (Session).
func New(opts Options) Model {
	r := opts.Renderer
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	t := NewTheme(r)
	k := DefaultKeyMap()
	sess := session.New(presets.Preset{}, opts.Root)
	sess.NewSources, sess.Interval = opts.NewSources, opts.Interval
	if sess.NewSources == nil && opts.Data != "" {
		sess.NewSources = func(family string, cfg engine.Config) (presets.Sources, error) {
			return presets.NewSources(family, cfg, opts.Data)
		}
	}
	sess.Overrides = opts.runOverrides()
	reg := &expRegistry{}
	return Model{opts: opts, theme: t, keys: k, picker: newPicker(t, k, presets.All()), sess: sess,
		exp: newExpScreen(t, k, opts, reg), exps: reg}
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

// Session is where the model's runs live.
func (m Model) Session() *session.Session { return m.sess }

// Experiments are the experiments started from the workbench.
func (m Model) Experiments() []*expWorker { return m.exps.Workers() }

// Init starts the preset given in the options, if any.
func (m Model) Init() tea.Cmd {
	if m.opts.Preset == "" {
		return nil
	}
	p, err := presets.Get(m.opts.Preset)
	if err != nil {
		return tea.Sequence(tea.Println(err.Error()), tea.Quit)
	}
	return func() tea.Msg { return pickedMsg{p} }
}

// Update routes messages: sizes and run data to every screen, keys only
// to the one showing.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		var cmd tea.Cmd
		m.picker, cmd = m.picker.update(msg)
		cmds = append(cmds, cmd)
		if m.screen == screenDashboard {
			m.dash, _ = m.dash.update(msg)
		}
		m.exp, _ = m.exp.update(msg)
		return m, tea.Batch(cmds...)

	case expBatchMsg:
		m.exp, _ = m.exp.update(msg)
		if m.quitting && m.allEnded() {
			return m, tea.Quit
		}
		if msg.ended {
			return m, nil
		}
		return m, waitExp(msg.w)

	case expStartMsg:
		var cmd tea.Cmd
		m.exp, cmd = m.exp.update(msg)
		return m, cmd

	case pickedMsg:
		m.sess.Preset = msg.p
		m.dash = newDashboard(m.theme, m.keys, m.sess, msg.p)
		m.dash.w, m.dash.h = m.w, m.h
		m.screen = screenDashboard
		m.dash.start(variantIndex(msg.p.Variant)) // the preset's default: metakernel
		m.dash.render()
		return m, waitBatch(m.sess)

	case batchMsg:
		m.dash, _ = m.dash.update(msg)
		if m.quitting && m.allEnded() {
			return m, tea.Quit
		}
		if !msg.ok {
			return m, nil
		}
		return m, waitBatch(m.sess)

	case tea.KeyMsg:
		if m.screen == screenPicker && m.picker.filtering() {
			break // every key is filter text
		}
		if m.screen == screenExperiments && m.exp.capturing() && !m.help {
			switch msg.String() {
			case "ctrl+c":
				return m.quit()
			case "esc":
				return m.leaveExperiments(), nil
			}
			break // every other key is text for the field
		}
		switch {
		case key.Matches(msg, m.keys.Quit):
			return m.quit()
		case key.Matches(msg, m.keys.Help):
			m.help = !m.help
			return m, nil
		case m.help && msg.String() == "esc":
			m.help = false
			return m, nil
		}
		if m.help {
			return m, nil // the overlay takes the keys it does not know
		}
		switch {
		case m.screen == screenPicker && key.Matches(msg, m.keys.Experiments),
			m.screen == screenDashboard && key.Matches(msg, m.keys.DashExperiments):
			preset := ""
			if it, ok := m.picker.list.SelectedItem().(presetItem); ok {
				preset = it.p.Name
			}
			if m.screen == screenDashboard {
				preset = m.dash.preset.Name
			}
			m.from, m.screen = m.screen, screenExperiments
			m.exp.open(preset)
			return m, nil
		case m.screen == screenExperiments && m.exp.stage == expSetup && key.Matches(msg, m.keys.Back):
			return m.leaveExperiments(), nil
		}
	}
	var cmd tea.Cmd
	switch m.screen {
	case screenPicker:
		m.picker, cmd = m.picker.update(msg)
	case screenDashboard:
		m.dash, cmd = m.dash.update(msg)
	case screenExperiments:
		m.exp, cmd = m.exp.update(msg)
	}
	return m, cmd
}

// leaveExperiments goes back from the setup form to the screen it was
// opened from.
func (m Model) leaveExperiments() Model {
	m.screen = m.from
	if m.screen == screenDashboard {
		m.dash.markAll()
		m.dash.render()
	}
	return m
}

// allEnded reports whether no run and no experiment is left working.
func (m Model) allEnded() bool {
	return (m.dash.views[0] == nil || m.dash.allEnded()) && !m.exp.running()
}

// quit stops the runs first: each saves a checkpoint and the program ends
// when the last one has. A second quit does not wait.
func (m Model) quit() (tea.Model, tea.Cmd) {
	if m.quitting || m.allEnded() {
		return m, tea.Quit
	}
	m.quitting = true
	if m.dash.views[0] != nil && !m.dash.allEnded() {
		m.dash.quitting = true
		m.dash.stopAll()
		m.dash.render()
	}
	m.exp.stop()
	return m, nil
}

// View returns the last rendered frame, with the help overlay if open.
func (m Model) View() string {
	if m.w == 0 {
		return ""
	}
	if m.help {
		groups := m.keys.Groups()
		switch {
		case m.screen == screenPicker:
			groups = m.keys.PickerGroups()
		case m.screen == screenExperiments && m.exp.stage == expDash:
			groups = m.keys.ExperimentDashGroups()
		case m.screen == screenExperiments:
			groups = m.keys.ExperimentGroups()
		}
		return helpView(m.theme, groups, m.w, m.h)
	}
	switch m.screen {
	case screenPicker:
		return m.picker.view()
	case screenExperiments:
		return m.exp.view()
	}
	return m.dash.view()
}
