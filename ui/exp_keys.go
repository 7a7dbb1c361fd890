package ui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// expKeys are the experiments screen's keys. The picker and the
// dashboard each have their own key that opens the screen.
type expKeys struct {
	globalKeys
	// The setup form.
	FieldNext, FieldPrev, Cycle, Run key.Binding
	// The results and the current run's dashboard.
	ShowRun, Back key.Binding
}

func newExpKeys() expKeys {
	return expKeys{
		globalKeys: newGlobalKeys(),
		FieldNext:  bind("↓/tab", "next field", "down", "tab"),
		FieldPrev:  bind("↑/shift+tab", "previous field", "up", "shift+tab"),
		Cycle:      bind("←/→", "change experiment / preset", "left", "right"),
		Run:        bind("enter", "start the experiment", "enter"),
		ShowRun:    bind("enter", "the current run's dashboard", "enter"),
		Back:       bind("esc", "back: run → results, setup → previous", "esc"),
	}
}

// groups are the screen's page of the help overlay.
func (k expKeys) groups() []helpGroup {
	return []helpGroup{
		{"Setup", []key.Binding{k.FieldNext, k.FieldPrev, k.Cycle, k.Run}},
		{"Running", []key.Binding{k.ShowRun, k.Back, short(k.Quit, "stop the experiment (checkpoint) and quit")}},
		{"General", []key.Binding{k.Help}},
	}
}

// dashGroups are the help over an experiment run's dashboard: its view
// keys only, since the experiment drives the run.
func (k expKeys) dashGroups(dk dashKeys) []helpGroup {
	return []helpGroup{
		dk.viewOnly(),
		{"General", []key.Binding{short(k.Back, "back to the experiment"), k.Help, short(k.Quit, "stop the experiment and quit")}},
	}
}

// setupHelp is the setup form's footer.
func (k expKeys) setupHelp() []key.Binding {
	return []key.Binding{short(k.Run, "start"), short(k.FieldNext, "field"),
		short(k.Cycle, "change"), short(k.Back, "back"), k.Help, short(k.Quit, "quit")}
}

// resultsHelp is the results' footer, while the experiment runs and
// after.
func (k expKeys) resultsHelp(running bool) []key.Binding {
	if running {
		return []key.Binding{short(k.ShowRun, "current run's dashboard"), short(k.Quit, "stop & quit"), k.Help}
	}
	return []key.Binding{short(k.ShowRun, "last run's dashboard"), short(k.Back, "new experiment"), k.Help, short(k.Quit, "quit")}
}

// navigate: esc on the setup form goes back to the screen the
// experiments screen was opened from.
func (s *expScreen) navigate(msg tea.KeyMsg) tea.Msg {
	if s.stage == expSetup && key.Matches(msg, s.keys.Back) {
		return backMsg{}
	}
	return nil
}
