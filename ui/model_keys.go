package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/presets"
)

// How the root model routes keys: one key per rune of a fast burst, a
// text field's keys to it, then quit, help and the keys that move between
// screens, and the rest to the screen showing.

// keys1by1 handles a key event as the keys a person typed. Bubbletea v1
// delivers the letters of one read as one event ("jj"), which matches no
// binding: typed quickly, they were lost. Each rune is a key of its own
// here, until a text field has focus (the picker's filter, a form field):
// the rest is then its text, as is a bracketed paste.
func (m Model) keys1by1(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if msg.Type != tea.KeyRunes || msg.Paste || len(msg.Runes) < 2 || m.typing() || reply(msg.Runes) {
		return m.key(msg)
	}
	var cmds []tea.Cmd
	for i, r := range msg.Runes {
		k := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}
		if m.typing() {
			k.Runes = msg.Runes[i:]
		}
		next, cmd := m.key(k)
		m, cmds = next.(Model), append(cmds, cmd)
		if len(k.Runes) > 1 || m.ended {
			break
		}
	}
	return m, tea.Batch(cmds...)
}

// reply reports whether a burst of runes is a terminal's reply to a query
// (a cursor report "[24;1R", device attributes "[?1;2c", a colour
// "]11;rgb:…"), which can reach the program as runes too: split into keys,
// its digits would be the ablation toggles 1–6. Typed keys never start
// with a bracket nor hold a semicolon.
func reply(rs []rune) bool {
	return rs[0] == '[' || rs[0] == ']' || strings.ContainsRune(string(rs), ';')
}

// typing reports whether a text field has focus, so that every rune is
// its text rather than a key.
func (m Model) typing() bool {
	if m.help.open {
		return false
	}
	switch m.screen {
	case screenPicker:
		return m.picker.filtering()
	case screenExperiments:
		return m.exp.capturing()
	case screenSweep:
		return m.sweep.capturing()
	case screenRuns:
		return m.runs.filtering
	case screenFolder:
		return true
	}
	return false
}

// key handles a key: the picker's filter takes every key; a text field
// (or a question) takes every key but ctrl+c and its screen's way back;
// else the root answers quit and help, the help overlay takes the rest
// while open, and the screen showing otherwise, its keys that lead
// elsewhere as navigation messages (navigate.go), handled here at once.
func (m Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch {
	case m.screen == screenPicker && m.picker.filtering():
		_, cmd := m.picker.Update(msg) // every key is filter text
		return m, cmd
	case m.capturing() && !m.help.open:
		if msg.String() == "ctrl+c" { // q is text here
			return m.quit()
		}
		if nav := m.navigation(msg); nav != nil {
			return m.navigate(nav)
		}
		_, cmd := m.current().Update(msg) // the field's text, or the answer
		return m, cmd
	case m.screen == screenSweep && !(m.help.open && msg.String() == "esc"):
		// q leaves the sweep screen, under the help too (where its field
		// takes no text): the sweep runs elsewhere, nothing here to stop.
		nav := m.sweep.navigate(msg)
		if m.help.open {
			nav = m.sweep.leave(msg)
		}
		if nav != nil {
			return m.navigate(nav)
		}
	}
	switch {
	case key.Matches(msg, m.keys.Quit):
		return m.quit()
	case !m.help.open && key.Matches(msg, m.keys.Help):
		m.help.show(m.current())
		return m, nil
	case m.help.open:
		_, cmd := m.help.Update(msg) // ? and esc close it; it takes every other key
		return m, cmd
	}
	if nav := m.navigation(msg); nav != nil {
		return m.navigate(nav)
	}
	_, cmd := m.current().Update(msg)
	return m, cmd
}

// capturing reports whether the screen showing takes keys as text or as
// an answer (the folder prompt, a form's field, the sweep's directory,
// the runs screen's filter or delete question), so that q and ? are not
// the root's.
func (m Model) capturing() bool {
	switch m.screen {
	case screenExperiments:
		return m.exp.capturing()
	case screenSweep:
		return m.sweep.capturing()
	case screenRuns:
		return m.runs.capturing()
	case screenFolder:
		return true
	}
	return false
}

// backToDashboard answers a pick while a dashboard exists: the same
// preset shows it again; another one waits until its runs have ended,
// which the picker says (one dashboard trains one preset's runs).
func (m Model) backToDashboard(p presets.Preset) (tea.Model, tea.Cmd) {
	if p.Name != m.dash.preset.Name {
		m.picker.err = fmt.Sprintf("the dashboard trains %s: stop its runs there (s) before training %s", m.dash.preset.Name, p.Name)
		return m, nil
	}
	m.picker.err = ""
	m.screen = screenDashboard
	m.dash.markAll()
	m.dash.render()
	return m, nil
}
