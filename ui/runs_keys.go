package ui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/experiments/runs"

	"github.com/mkbench/mkbench/internal/runstate"
)

// runsKeys are the runs screen's keys. R in the picker and the dashboard
// opens it.
type runsKeys struct {
	globalKeys
	// The table.
	List                                         listKeys
	Mark, MarkAll, Sort, Reverse, Filter, Rescan key.Binding
	// What to do with the run under the cursor, or the marked runs.
	Open, Resume, Evaluate, Delete, Curves, Diff key.Binding
	// The curves view.
	Metric, TimeX, EMA, LogY key.Binding
	// Back leaves a view for the table, and the table for the screen it
	// was opened from.
	Back, Yes key.Binding
}

func newRunsKeys() runsKeys {
	return runsKeys{
		globalKeys: newGlobalKeys(),
		List:       newListKeys("run"),
		Mark:       bind("space", "mark / unmark the run (to compare)", " "),
		MarkAll:    bind("a", "mark every run shown / none", "a"),
		Sort:       bind("s", "sort by the next column", "s"),
		Reverse:    bind("S", "reverse the order", "S"),
		Filter:     bind("/", "filter (esc clears, enter keeps)", "/"),
		Rescan:     bind("ctrl+r", "read the runs root again", "ctrl+r"),
		Open:       bind("enter", "open the run: its curves and ω panes", "enter"),
		Resume:     bind("r", "resume the run on the dashboard", "r"),
		Evaluate:   bind("e", "evaluate the run (as mkbench eval --run)", "e"),
		Delete:     bind("x/delete", "delete the run's directory (asks first)", "x", "delete"),
		Curves:     bind("c", "overlay the marked runs' curves", "c"),
		Diff:       bind("d", "the settings that differ between the marked runs", "d"),
		Metric:     bind("←/→", "curves: previous / next metric", "left", "right"),
		TimeX:      bind("t", "curves: against iterations / training time", "t"),
		EMA:        bind("m", "curves: EMA-smooth", "m"),
		LogY:       bind("l", "curves: log-scale y axis", "l"),
		Back:       bind("esc", "back", "esc"),
		Yes:        bind("y", "yes, delete it", "y"),
	}
}

// groups are the screen's page of the help overlay.
func (k runsKeys) groups() []helpGroup {
	return []helpGroup{
		{"Runs", append(k.List.bindings(), k.Mark, k.MarkAll, k.Sort, k.Reverse, k.Filter, k.Rescan)},
		{"Actions", []key.Binding{k.Open, k.Resume, k.Evaluate, k.Delete, k.Curves, k.Diff}},
		{"Curves", []key.Binding{k.Metric, k.TimeX, k.EMA, k.LogY}},
		{"General", []key.Binding{k.Back, k.Help, k.Quit}},
	}
}

// ShortHelp is the screen's footer, for what it shows.
func (s *runsScreen) ShortHelp() []key.Binding {
	k := s.keys
	switch {
	case s.confirm != "":
		return []key.Binding{k.Yes, bind("n/esc", "keep it", "n")}
	case s.filtering:
		return []key.Binding{bind("enter", "keep the filter", "enter"), bind("esc", "clear it", "esc")}
	case s.stage == runsCurves:
		return []key.Binding{short(k.Metric, "metric"), short(k.TimeX, "x axis"), short(k.EMA, "EMA"), short(k.LogY, "log y"), short(k.Back, "table"), k.Help}
	case s.stage == runsDiff:
		return []key.Binding{short(k.Back, "table"), k.Help, k.Quit}
	}
	return []key.Binding{short(k.Open, "open"), short(k.Mark, "mark"), short(k.Curves, "curves"), short(k.Diff, "diff"),
		short(k.Resume, "resume"), short(k.Evaluate, "eval"), short(k.Delete, "delete"), short(k.Sort, "sort"), short(k.Filter, "filter"), k.Help, short(k.Back, "back")}
}

func (s *runsScreen) FullHelp() [][]key.Binding { return fullHelp(s.HelpGroups()) }

func (s *runsScreen) HelpGroups() []helpGroup { return s.keys.groups() }

// capturing reports whether keys are text (the filter) or an answer (the
// delete question), so the root does not take q or ? for itself.
func (s *runsScreen) capturing() bool { return s.filtering || s.confirm != "" }

// key answers a key while the screen shows.
func (s *runsScreen) key(msg tea.KeyMsg) tea.Cmd {
	k := s.keys
	switch {
	case s.confirm != "":
		dir := s.confirm
		s.confirm = ""
		if key.Matches(msg, k.Yes) {
			s.note.set("deleting " + dir + "…")
			return remove(dir)
		}
		s.note.set("kept " + dir)
		return nil
	case s.filtering:
		switch msg.String() {
		case "enter":
			s.filtering = false
			s.filter.Blur()
		case "esc":
			s.filtering = false
			s.filter.Blur()
			s.filter.SetValue("")
		default:
			var cmd tea.Cmd
			s.filter, cmd = s.filter.Update(msg)
			s.refresh(s.currentDir())
			return cmd
		}
		s.refresh(s.currentDir())
		return nil
	case s.stage != runsTable:
		return s.viewKey(msg)
	}
	var moved bool
	if s.cursor, moved = s.cursor.Len(len(s.view)).Height(s.tableRows()-1).Key(msg, k.List); moved {
		return nil
	}
	r, ok := s.current()
	switch {
	case key.Matches(msg, k.Mark) && ok:
		s.marks.toggle(r.Dir)
	case key.Matches(msg, k.MarkAll):
		if len(s.marks) > 0 {
			s.marks = marks[string]{}
		} else {
			for _, j := range s.view {
				s.marks.toggle(s.all[j].Dir)
			}
		}
	case key.Matches(msg, k.Sort):
		s.sortKey = (s.sortKey + 1) % len(runs.SortKeys)
		s.refresh(s.currentDir())
		s.note.set("sorted by " + runs.SortKeys[s.sortKey])
	case key.Matches(msg, k.Reverse):
		s.desc = !s.desc
		s.refresh(s.currentDir())
	case key.Matches(msg, k.Filter):
		s.filtering = true
		return s.filter.Focus()
	case key.Matches(msg, k.Rescan):
		return s.scan()
	case key.Matches(msg, k.Curves) && ok:
		s.stage = runsCurves
		return s.loadCurves()
	case key.Matches(msg, k.Diff):
		if len(s.marked()) < 2 {
			s.note.set("mark two runs or more (space) to see how their settings differ")
			return nil
		}
		s.stage = runsDiff
	case key.Matches(msg, k.Open) && ok:
		if r.State == "" {
			s.note.set(r.Rel + " cannot be read: " + r.Error)
			return nil
		}
		dir := r.Dir
		s.note.set("opening " + r.Rel + "…")
		return func() tea.Msg { return openRunMsg{dir} }
	case key.Matches(msg, k.Resume) && ok:
		return s.resume(*r)
	case key.Matches(msg, k.Evaluate) && ok:
		return s.evaluate(*r)
	case key.Matches(msg, k.Delete) && ok:
		switch {
		case s.scanning:
			s.note.set("the runs are still being read: delete when the listing is complete")
		case r.State == runstate.Running:
			s.note.set(r.Rel + " is running: stop it first")
		default:
			s.confirm = r.Dir
		}
	}
	return nil
}

// viewKey answers a key on the curves and diff views.
func (s *runsScreen) viewKey(msg tea.KeyMsg) tea.Cmd {
	k := s.keys
	switch {
	case key.Matches(msg, k.Back):
		s.stage = runsTable
	case s.stage != runsCurves:
	case key.Matches(msg, k.Metric):
		d := 1
		if msg.String() == "left" {
			d = -1
		}
		s.metric = (s.metric + d + len(overlayMetrics)) % len(overlayMetrics)
	case key.Matches(msg, k.TimeX):
		s.timeX = !s.timeX
	case key.Matches(msg, k.EMA):
		s.ema = !s.ema
	case key.Matches(msg, k.LogY):
		s.logY = !s.logY
	}
	return nil
}

// resume asks the root to continue run r on the dashboard: a run stopped
// or failed before its end.
func (s *runsScreen) resume(r runs.Run) tea.Cmd {
	switch r.State {
	case runstate.Stopped, runstate.Failed:
		return func() tea.Msg { return resumeRunMsg{r} }
	case runstate.Finished:
		s.note.set(r.Rel + " has finished: nothing to resume (mkbench run --resume DIR --iters N trains it further)")
	case runstate.Running:
		s.note.set(r.Rel + " is running elsewhere")
	default:
		s.note.set(r.Rel + " cannot be read: " + r.Error)
	}
	return nil
}

// navigate: esc leaves the table (with no filter or question open) for
// the screen the runs screen was opened from.
func (s *runsScreen) navigate(msg tea.KeyMsg) tea.Msg {
	if key.Matches(msg, s.keys.Back) && s.stage == runsTable && !s.capturing() {
		return backMsg{}
	}
	return nil
}
