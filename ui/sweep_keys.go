package ui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// sweepKeys are the sweep screen's keys. The picker's w opens it.
type sweepKeys struct {
	globalKeys
	// Choosing the directory.
	Watch, Pick key.Binding
	// The unit table.
	List          listKeys
	Mark, MarkAll key.Binding
	// The view.
	Results, LogY, EMA key.Binding
	// Back goes to the picker, or quits a workbench opened on the sweep
	// (mkbench tui --sweep): q too, since nothing runs here to stop.
	Back, ForceQuit key.Binding
}

func newSweepKeys() sweepKeys {
	return sweepKeys{
		globalKeys: newGlobalKeys(),
		Watch:      bind("enter", "watch the directory", "enter"),
		Pick:       bind("↑/↓", "pick a sweep found under the runs root", "up", "down"),
		List:       newListKeys("unit"),
		Mark:       bind("space", "mark / unmark the unit: its curve is drawn", " "),
		MarkAll:    bind("a", "mark every unit / none", "a"),
		Results:    bind("r", "results table: show / hide (small: instead of the curves)", "r"),
		LogY:       bind("l", "log-scale y axis", "l"),
		EMA:        bind("m", "EMA-smooth the curves", "m"),
		Back:       bind("q/esc", "back to the presets", "q", "esc"),
		ForceQuit:  bind("ctrl+c", "quit", "ctrl+c"),
	}
}

// back is Back as the screen's help names it: quit when there is no
// picker to go back to.
func (k sweepKeys) back(direct bool) key.Binding {
	if direct {
		return short(k.Back, "quit")
	}
	return k.Back
}

// groups are the screen's page of the help overlay.
func (k sweepKeys) groups(choosing, direct bool) []helpGroup {
	general := helpGroup{"General", []key.Binding{k.back(direct), k.ForceQuit, k.Help}}
	if choosing {
		return []helpGroup{{"Sweep directory", []key.Binding{k.Watch, k.Pick}}, general}
	}
	return []helpGroup{
		{"Units", append(k.List.bindings(), k.Mark, k.MarkAll)},
		{"View", []key.Binding{k.Results, k.LogY, k.EMA}},
		general,
	}
}

// footer is the screen's last line. While a directory is typed, q is
// text: esc alone goes back.
func (k sweepKeys) footer(choosing, direct bool) []key.Binding {
	desc := "back"
	if direct {
		desc = "quit"
	}
	if choosing {
		return []key.Binding{short(k.Watch, "watch"), short(k.Pick, "pick"), bind("esc", desc, "esc")}
	}
	return []key.Binding{short(k.Mark, "mark"), short(k.MarkAll, "all/none"), short(k.Results, "results"),
		short(k.LogY, "log y"), short(k.EMA, "EMA"), k.Help, short(k.Back, desc)}
}

// key answers a key while the screen shows (the root has taken the keys
// that leave it).
func (s *sweepScreen) key(msg tea.KeyMsg) tea.Cmd {
	k := s.keys
	if s.stage == sweepChoose {
		switch {
		case key.Matches(msg, k.Watch):
			return s.watch(strings.TrimSpace(s.input.Value()))
		case key.Matches(msg, k.Pick) && len(s.found) > 0:
			d := 1
			if msg.String() == "up" {
				d = -1
			}
			s.pick = s.pick.Len(len(s.found)).Move(d)
			s.input.SetValue(s.found[s.pick.At()].dir)
			s.input.CursorEnd()
			s.chooseErr = ""
			return nil
		}
		var cmd tea.Cmd
		s.input, cmd = s.input.Update(msg)
		return cmd
	}
	n := 0
	if s.st != nil {
		n = len(s.st.Units)
	}
	var moved bool
	if s.cursor, moved = s.cursor.Len(n).Height(s.tableRows()-1).Key(msg, k.List); moved {
		s.dirty = true
		return nil
	}
	switch {
	case key.Matches(msg, k.Mark) && n > 0:
		s.marks.toggle(s.st.Units[s.cursor.At()].Index)
	case key.Matches(msg, k.MarkAll) && n > 0:
		if len(s.marks) == n {
			s.marks = marks[int]{}
		} else {
			for _, u := range s.st.Units {
				if _, ok := s.marks[u.Index]; !ok {
					s.marks.toggle(u.Index)
				}
			}
		}
	case key.Matches(msg, k.Results):
		s.alt = !s.alt
	case key.Matches(msg, k.LogY):
		s.logY = !s.logY
	case key.Matches(msg, k.EMA):
		s.ema = !s.ema
	default:
		return nil
	}
	s.dirty = true
	return nil
}

// navigate: q or esc goes back to the picker (or quits a workbench opened
// on the sweep); while a directory is typed, q is text and esc alone goes.
func (s *sweepScreen) navigate(msg tea.KeyMsg) tea.Msg {
	if s.capturing() && msg.String() != "esc" {
		return nil
	}
	return s.leave(msg)
}

// leave is navigate while the directory takes no text (the help is over
// it): q and esc go back.
func (s *sweepScreen) leave(msg tea.KeyMsg) tea.Msg {
	if key.Matches(msg, s.keys.Back) {
		return backMsg{}
	}
	return nil
}
