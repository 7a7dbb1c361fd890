package ui

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// update is m after msg, with the command it returned.
func update(m Model, msg tea.Msg) (Model, tea.Cmd) {
	next, cmd := m.Update(msg)
	return next.(Model), cmd
}

// Screens say where a key leads by a message; they switch nothing
// themselves.
func TestScreensNavigateByMessages(t *testing.T) {
	p, err := presets.Get("sine-5shot")
	if err != nil {
		t.Fatal(err)
	}
	th := testTheme()
	esc := tea.KeyMsg{Type: tea.KeyEsc}
	d := newDashboard(th, newDashKeys(), session.New(p, t.TempDir()), p)
	opened := newDashboard(th, newDashKeys(), nil, p)
	opened.readOnly, opened.opened = true, true
	for _, c := range []struct {
		name string
		got  tea.Msg
		want tea.Msg
	}{
		{"dashboard esc", d.navigate(esc), backMsg{}},
		{"dashboard R", d.navigate(keys("R")), openRunsMsg{}},
		{"dashboard X", d.navigate(keys("X")), openExperimentsMsg{preset: "sine-5shot"}},
		{"dashboard p", d.navigate(keys("p")), nil},
		{"opened esc", opened.navigate(esc), backMsg{}},
		{"opened X", opened.navigate(keys("X")), openExperimentsMsg{onOpened: true}},
		{"opened R", opened.navigate(keys("R")), nil},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#v, want %#v", c.name, c.got, c.want)
		}
	}
	pk := newPicker(th, newPickerKeys(), presets.All(), nil)
	if got := pk.navigate(keys("w")); got != (openSweepMsg{}) {
		t.Errorf("picker w: %#v", got)
	}
	pk.list, _ = pk.list.Update(keys("/"))
	if got := pk.navigate(keys("R")); got != nil {
		t.Errorf("picker R while filtering: %#v", got)
	}
}

// esc on the dashboard is a backMsg the root answers with the picker, and
// the picker's R opens the runs screen, whose esc goes back to the
// picker; X from the dashboard opens the experiments, whose esc goes back
// to the dashboard.
func TestRootHandlesNavigation(t *testing.T) {
	m := New(Options{Root: t.TempDir(), Renderer: testTheme().r})
	m, _ = update(m, tea.WindowSizeMsg{Width: 140, Height: 40})
	p, _ := presets.Get("sine-5shot")
	m.dash = newDashboard(m.theme, newDashKeys(), m.sess, p)
	m.dash.SetSize(m.w, m.h)
	m.screen = screenDashboard
	for _, step := range []struct {
		msg  tea.Msg
		want screen
	}{
		{tea.KeyMsg{Type: tea.KeyEsc}, screenPicker},
		{backMsg{}, screenPicker},
		{keys("R"), screenRuns},
		{tea.KeyMsg{Type: tea.KeyEsc}, screenPicker},
		{openExperimentsMsg{preset: "sine-5shot"}, screenExperiments},
		{backMsg{}, screenPicker},
	} {
		m, _ = update(m, step.msg)
		if m.screen != step.want {
			t.Fatalf("after %#v: screen %d, want %d", step.msg, m.screen, step.want)
		}
	}
	m.screen = screenDashboard
	m, _ = update(m, keys("X"))
	if m.screen != screenExperiments || m.from != screenDashboard {
		t.Fatalf("X on the dashboard: screen %d from %d", m.screen, m.from)
	}
	m, _ = update(m, tea.KeyMsg{Type: tea.KeyEsc})
	if m.screen != screenDashboard {
		t.Fatalf("esc on the experiments' setup: screen %d, want the dashboard", m.screen)
	}
}

// A key's navigation is handled at once: the keys after it in one burst
// reach the screen it opened (here, the sweep's directory as text).
func TestBurstAfterNavigation(t *testing.T) {
	m := New(Options{Root: t.TempDir(), Renderer: testTheme().r})
	m, _ = update(m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m, _ = update(m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("wruns/x")})
	if m.screen != screenSweep || m.sweep.input.Value() != "runs/x" {
		t.Fatalf("after the burst \"wruns/x\": screen %d, the directory %q", m.screen, m.sweep.input.Value())
	}
	m, _ = update(m, tea.KeyMsg{Type: tea.KeyEsc})
	if m.screen != screenPicker {
		t.Fatalf("esc on the sweep's directory: screen %d", m.screen)
	}
}
