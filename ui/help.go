package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// helpOverlay is the help (?) over the screen showing: that screen's key
// bindings under their groups' titles, read from the screen whenever it
// is drawn.
type helpOverlay struct {
	theme Theme
	close key.Binding
	open  bool
	of    component // the screen whose keys are shown
	w, h  int
}

func newHelpOverlay(t Theme) *helpOverlay {
	return &helpOverlay{theme: t, close: bind("? or esc", "closes", "?", "esc")}
}

// show opens the overlay over c.
func (o *helpOverlay) show(c component) { o.of, o.open = c, true }

func (o *helpOverlay) Init() tea.Cmd { return nil }

func (o *helpOverlay) SetSize(w, h int) { o.w, o.h = w, h }

// Update closes the overlay on its close keys; it takes every other key.
func (o *helpOverlay) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		o.SetSize(msg.Width, msg.Height)
	case tea.KeyMsg:
		if key.Matches(msg, o.close) {
			o.open = false
		}
	}
	return o, nil
}

func (o *helpOverlay) View() string {
	var groups []helpGroup
	switch c := o.of.(type) {
	case titledHelp:
		groups = c.HelpGroups()
	case nil:
	default:
		for _, col := range c.FullHelp() {
			groups = append(groups, helpGroup{Keys: col})
		}
	}
	return helpView(o.theme, groups, o.close, o.w, o.h)
}

func (o *helpOverlay) ShortHelp() []key.Binding  { return []key.Binding{o.close} }
func (o *helpOverlay) FullHelp() [][]key.Binding { return [][]key.Binding{{o.close}} }

// helpView is the help overlay: every binding of groups under its
// group's title, in as few columns as fit the height, and how to close
// it.
func helpView(t Theme, groups []helpGroup, close key.Binding, w, h int) string {
	var blocks []string
	for _, g := range groups {
		lines := []string{t.Title.Render(g.Title)}
		kw := 0
		for _, b := range g.Keys {
			kw = max(kw, ansi.StringWidth(b.Help().Key))
		}
		for _, b := range g.Keys {
			lines = append(lines, t.Key.Render(fmt.Sprintf("%-*s", kw, b.Help().Key))+"  "+b.Help().Desc)
		}
		blocks = append(blocks, strings.Join(lines, "\n"))
	}
	title := t.Title.Render("mkbench keys") + t.Dim.Render("   "+close.Help().Key+" "+close.Help().Desc)
	// Fill columns in order, each up to a height limit; take the fewest
	// columns whose tallest fits, else the most.
	var body string
	for n := 1; n <= len(blocks); n++ {
		limit := 0
		for _, b := range blocks {
			limit = max(limit, lipgloss.Height(b))
		}
		total := 0
		for _, b := range blocks {
			total += lipgloss.Height(b) + 1
		}
		limit = max(limit, (total+n-1)/n)
		var cols []string
		cur := ""
		for _, b := range blocks {
			switch {
			case cur == "":
				cur = b
			case lipgloss.Height(cur)+1+lipgloss.Height(b) <= limit:
				cur += "\n\n" + b
			default:
				cols = append(cols, cur)
				cur = b
			}
		}
		cols = append(cols, cur)
		body = lipgloss.JoinHorizontal(lipgloss.Top, interleave(cols, "   ")...)
		if lipgloss.Height(body)+6 <= h || lipgloss.Width(body)+8 > w {
			break
		}
	}
	box := t.HelpBox.Render(title + "\n\n" + body)
	return block(lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, box), w, h)
}

func interleave(xs []string, sep string) []string {
	var out []string
	for i, x := range xs {
		if i > 0 {
			out = append(out, sep)
		}
		out = append(out, x)
	}
	return out
}
