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
// is drawn. When they do not fit the terminal they scroll.
type helpOverlay struct {
	theme  Theme
	close  key.Binding
	scroll listKeys // through a page taller than the terminal
	open   bool
	of     component  // the screen whose keys are shown
	view   listCursor // on the body's lines: the first shown when it scrolls
	w, h   int
}

func newHelpOverlay(t Theme) *helpOverlay {
	return &helpOverlay{theme: t, close: bind("? or esc", "closes", "?", "esc"),
		scroll: helpScrollKeys()}
}

// helpScrollKeys are the list keys, and space pages down as in a pager:
// a help page has nothing to mark.
func helpScrollKeys() listKeys {
	k := newListKeys("line")
	k.PageDown = bind("pgdn/f/space", k.PageDown.Help().Desc, "pgdown", "f", " ")
	return k
}

// show opens the overlay over c, at the top of its page.
func (o *helpOverlay) show(c component) { o.of, o.open, o.view = c, true, listCursor{} }

func (o *helpOverlay) Init() tea.Cmd { return nil }

func (o *helpOverlay) SetSize(w, h int) { o.w, o.h = w, h }

// Update closes the overlay on its close keys and scrolls it on the
// scroll keys; it takes every other key.
func (o *helpOverlay) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		o.SetSize(msg.Width, msg.Height)
	case tea.KeyMsg:
		if key.Matches(msg, o.close) {
			o.open = false
			return o, nil
		}
		lines, rows := helpBody(o.theme, o.groups(), o.w, o.h)
		o.view, _ = o.view.Len(len(lines)).Height(rows).Scroll(msg, o.scroll)
	}
	return o, nil
}

// groups are the key groups of the screen under the overlay.
func (o *helpOverlay) groups() []helpGroup {
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
	return groups
}

func (o *helpOverlay) View() string {
	return helpView(o.theme, o.groups(), o.close, o.w, o.h, o.view.Top())
}

func (o *helpOverlay) ShortHelp() []key.Binding  { return []key.Binding{o.close} }
func (o *helpOverlay) FullHelp() [][]key.Binding { return [][]key.Binding{{o.close}} }

// helpView is the help overlay: every binding of groups under its
// group's title, in as few columns as fit the terminal, and how to close
// it. A page taller than the terminal shows rows from line top on, and
// how to scroll, on the line under the title.
func helpView(t Theme, groups []helpGroup, close key.Binding, w, h, top int) string {
	if f, small := tooSmall(w, h); small {
		return f
	}
	lines, rows := helpBody(t, groups, w, h)
	// top was kept for the size of the last key; the terminal may have
	// changed since.
	from, to := listCursor{}.Len(len(lines)).Height(rows).ScrollTo(top).Visible()
	sub := ""
	if len(lines) > rows {
		sub = t.Dim.Render(fmt.Sprintf("↑↓ pgup pgdn: lines %d–%d of %d", from+1, to, len(lines)))
	}
	title := t.Title.Render("mkbench keys") + t.Dim.Render("   "+close.Help().Key+" "+close.Help().Desc)
	// The box is as wide as the whole page, wherever it is scrolled to.
	inner := 0
	for _, l := range append([]string{title, sub}, lines...) {
		inner = max(inner, ansi.StringWidthWc(l))
	}
	inner = min(inner, w-helpFrameW)
	lines = lines[from:to]
	box := t.HelpBox.Render(block(title+"\n"+sub+"\n"+strings.Join(lines, "\n"), inner, len(lines)+2))
	return block(lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, box), w, h)
}

// helpFrameW and helpFrameH are what the box and the title take around
// the body: a border and padding on either side; the top and bottom
// border, the title and the line under it.
const helpFrameW, helpFrameH = 4, 4

// helpBody lays the groups out in columns for a w×h terminal and returns
// the body's lines and how many of them show at once. It takes the
// fewest columns that fit with a margin around the box, else the fewest
// that fit at all, else the shortest layout that fits the width, which
// then scrolls. Lines wider than the terminal are wrapped.
func helpBody(t Theme, groups []helpGroup, w, h int) (lines []string, rows int) {
	maxW, maxH := max(1, w-helpFrameW), max(1, h-helpFrameH)
	blocks := helpBlocks(t, groups, maxW)
	var layouts [][]string
	for n := 1; n <= len(blocks); n++ {
		body := helpColumns(blocks, n)
		if n > 1 && ansi.StringWidthWc(body[0]) > maxW {
			break // more columns are wider still
		}
		layouts = append(layouts, body)
	}
	fits := func(body []string, mw, mh int) bool {
		width := 0
		for _, l := range body {
			width = max(width, ansi.StringWidthWc(l))
		}
		return width <= mw && len(body) <= mh
	}
	for _, margin := range []int{4, 0} {
		for _, body := range layouts {
			if fits(body, maxW-margin, maxH-margin/2) {
				return body, len(body)
			}
		}
	}
	best := layouts[0]
	for _, body := range layouts[1:] {
		if len(body) < len(best) {
			best = body
		}
	}
	return best, min(len(best), maxH)
}

// helpBlocks are the groups' blocks of lines: a title, then one line per
// binding; a description that makes its line wider than w goes on under
// itself.
func helpBlocks(t Theme, groups []helpGroup, w int) [][]string {
	var blocks [][]string
	for _, g := range groups {
		lines := []string{t.Title.Render(g.Title)}
		kw := 0
		for _, b := range g.Keys {
			kw = max(kw, ansi.StringWidth(b.Help().Key))
		}
		dw := max(8, w-kw-2)
		for _, b := range g.Keys {
			desc := strings.Split(lipgloss.NewStyle().Width(dw).Render(b.Help().Desc), "\n")
			for i, d := range desc {
				d = strings.TrimRight(d, " ")
				if i == 0 {
					lines = append(lines, t.Key.Render(fmt.Sprintf("%-*s", kw, b.Help().Key))+"  "+d)
				} else {
					lines = append(lines, strings.Repeat(" ", kw+2)+d)
				}
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks
}

// helpColumns fills n columns with the blocks in order, each up to a
// height that spreads them evenly (but at least the tallest block), one
// blank line between blocks and three spaces between columns.
func helpColumns(blocks [][]string, n int) []string {
	limit, total := 0, 0
	for _, b := range blocks {
		limit = max(limit, len(b))
		total += len(b) + 1
	}
	limit = max(limit, (total+n-1)/n)
	var cols []string
	var cur []string
	for _, b := range blocks {
		switch {
		case cur == nil:
			cur = append([]string(nil), b...)
		case len(cur)+1+len(b) <= limit:
			cur = append(append(cur, ""), b...)
		default:
			cols = append(cols, strings.Join(cur, "\n"))
			cur = append([]string(nil), b...)
		}
	}
	cols = append(cols, strings.Join(cur, "\n"))
	return strings.Split(lipgloss.JoinHorizontal(lipgloss.Top, interleave(cols, "   ")...), "\n")
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
