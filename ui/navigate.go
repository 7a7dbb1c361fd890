package ui

import (
	"path/filepath"

	tea "github.com/charmbracelet/bubbletea"
)

// Moving between screens. A screen never switches to another itself: it
// answers a key with a navigation message (navigator), or returns one from
// a command, and the root model alone handles the message, knowing where
// each screen was opened from. A key's message is handled at once, so the
// keys after it in a burst reach the screen it opened.

// navigator is a screen with keys that lead to other screens.
type navigator interface {
	// navigate is the navigation message of a key (nil for the screen's
	// own keys): backMsg, openRunsMsg, openSweepMsg, openExperimentsMsg.
	navigate(msg tea.KeyMsg) tea.Msg
}

// backMsg leaves the screen showing for the one it was opened from: the
// dashboard, the folder prompt and the sweep screen go back to the
// picker (a workbench opened on a sweep quits instead), the runs screen,
// an opened run and the experiments' setup to wherever they were opened.
type backMsg struct{}

// openRunsMsg shows the runs screen, reading the runs root afresh.
type openRunsMsg struct{}

// openSweepMsg shows the sweep screen, asking for the directory to watch.
type openSweepMsg struct{}

// openExperimentsMsg shows the experiments screen: its form on preset,
// or, with onOpened, set up on the run or model opened from its files.
type openExperimentsMsg struct {
	preset   string
	onOpened bool
}

// navigation is the navigation message of key msg on the screen showing.
func (m Model) navigation(msg tea.KeyMsg) tea.Msg {
	if n, ok := m.current().(navigator); ok {
		return n.navigate(msg)
	}
	return nil
}

// navigate handles a navigation message.
func (m Model) navigate(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case backMsg:
		return m.back()
	case openRunsMsg:
		return m.openRuns()
	case openSweepMsg:
		m.screen = screenSweep
		return m, m.sweep.choose()
	case openExperimentsMsg:
		if msg.onOpened {
			return m.experimentsOnOpened(), nil
		}
		return m.openExperiments(msg.preset), nil
	}
	return m, nil
}

// back leaves the screen showing for the one it was opened from.
func (m Model) back() (tea.Model, tea.Cmd) {
	switch m.screen {
	case screenDashboard:
		m.screen = screenPicker // the runs keep training; the picker says so
	case screenRuns:
		m.screen = m.runsFrom
		if m.screen == screenDashboard {
			m.dash.markAll()
			m.dash.render()
		}
	case screenOpened:
		m.screen = m.openedFrom
	case screenExperiments:
		return m.leaveExperiments(), nil
	case screenSweep:
		return m.leaveSweep()
	case screenFolder:
		m.folder.close()
		m.screen = screenPicker
	}
	return m, nil
}

// openRuns shows the runs screen, reading the runs root afresh.
func (m Model) openRuns() (tea.Model, tea.Cmd) {
	if m.runs == nil {
		m.runs = newRunsScreen(m.theme, m.runsRoot(), m.opts.Data)
		m.runs.SetSize(m.w, m.h)
	}
	m.runsFrom, m.screen = m.screen, screenRuns
	return m, m.runs.scan()
}

// openExperiments shows the experiments screen, its form on preset.
func (m Model) openExperiments(preset string) Model {
	m.from, m.screen = m.screen, screenExperiments
	m.exp.open(preset)
	return m
}

// experimentsOnOpened shows the experiments screen set up on the run or
// model opened from its files.
func (m Model) experimentsOnOpened() Model {
	r := m.openRun
	name := r.Model
	if name == "" {
		name = filepath.Base(r.Dir)
	}
	m.from, m.screen = m.screen, screenExperiments
	m.exp.openOn(name, r.Preset.Name, r.Dir)
	return m
}

// leaveExperiments goes back from the setup form to the screen it was
// opened from.
func (m Model) leaveExperiments() Model {
	m.screen = m.from
	switch m.screen {
	case screenDashboard:
		m.dash.markAll()
		m.dash.render()
	case screenOpened:
		m.opened.markAll()
		m.opened.render()
	}
	return m
}

// leaveSweep goes back from the sweep screen to the picker, or quits a
// workbench opened on the sweep.
func (m Model) leaveSweep() (tea.Model, tea.Cmd) {
	if m.sweep.direct {
		return m.quit()
	}
	m.sweep.close()
	m.screen, m.help.open = screenPicker, false
	return m, nil
}
