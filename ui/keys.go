package ui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
)

// Each screen keeps its key bindings beside it (pickerKeys in picker.go,
// dashKeys in dash_keys.go, expKeys in exp_keys.go) and matches keys
// against them; its footer and its page of the help overlay are generated
// from the same bindings, so they cannot drift from what works. This file
// has what the screens share.

// bind is a binding of keys, shown in help as helpKey and desc.
func bind(helpKey, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(helpKey, desc))
}

// globalKeys work on every screen; the root model answers them.
type globalKeys struct {
	Help, Quit key.Binding
}

func newGlobalKeys() globalKeys {
	return globalKeys{
		Help: bind("?", "help", "?"),
		Quit: bind("q/ctrl+c", "quit (checkpoints runs)", "q", "ctrl+c"),
	}
}

// headerHelp is the reminder at the right of a screen's header.
func (k globalKeys) headerHelp() []key.Binding {
	return []key.Binding{k.Help, short(k.Quit, "quit")}
}

// short is b with a shorter description, for footers.
func short(b key.Binding, desc string) key.Binding {
	b.SetHelp(b.Help().Key, desc)
	return b
}

// helpGroup is one titled column of the help overlay.
type helpGroup struct {
	Title string
	Keys  []key.Binding
}

// titledHelp is a help.KeyMap whose FullHelp columns have titles: every
// screen's, which the help overlay shows.
type titledHelp interface {
	help.KeyMap
	HelpGroups() []helpGroup
}

// fullHelp is groups as help.KeyMap's FullHelp: a column per group.
func fullHelp(groups []helpGroup) [][]key.Binding {
	cols := make([][]key.Binding, len(groups))
	for i, g := range groups {
		cols[i] = g.Keys
	}
	return cols
}

// shortHelp draws bindings on one line, as footers and headers show them.
func shortHelp(t Theme, bs []key.Binding) string {
	f := help.New()
	f.Styles.ShortKey, f.Styles.ShortDesc, f.Styles.ShortSeparator = t.Key, t.Dim, t.Dim
	return f.ShortHelpView(bs)
}

// footer is a screen's last line: its short help.
func footer(t Theme, bs []key.Binding) string { return " " + shortHelp(t, bs) }
