package ui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// The one cursor of the workbench's lists: the picker's presets, the runs
// screen's runs, the sweep screen's units and found sweeps, and the help
// overlay's lines. Each list keeps a listCursor and moves it with the same
// keys (listKeys), so the same key moves the same way everywhere.

// listKeys move a cursor through a list (or, in the help overlay, scroll
// a page of text): a row, a page, to either end.
type listKeys struct {
	Up, Down, PageUp, PageDown, Home, End key.Binding
}

// newListKeys are the list keys, their help naming the list's item
// ("run", "unit", …).
func newListKeys(item string) listKeys {
	return listKeys{
		Up:       bind("↑/k", "previous "+item, "up", "k"),
		Down:     bind("↓/j", "next "+item, "down", "j"),
		PageUp:   bind("pgup/b", "a page up", "pgup", "b"),
		PageDown: bind("pgdn/f", "a page down", "pgdown", "f"),
		Home:     bind("home/g", "first "+item, "home", "g"),
		End:      bind("end/G", "last "+item, "end", "G"),
	}
}

// bindings are the keys in the order the help lists them.
func (k listKeys) bindings() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.End}
}

// listCursor is a cursor on one of n rows of which h show at once, from
// row top: the cursor's row is always among them, and no row past the
// end shows while the list could fill them. It is a value: each method
// returns the moved cursor, so a list's state is one field and a test
// needs no screen.
type listCursor struct {
	at, top, n, h int
}

// Len is c on a list of n rows: a cursor past the end goes to the last
// row.
func (c listCursor) Len(n int) listCursor { c.n = n; return c.fix() }

// Height is c with h rows showing (at least one): the view scrolls to
// keep the cursor in sight.
func (c listCursor) Height(h int) listCursor { c.h = h; return c.fix() }

// At is the cursor's row (0 on an empty list).
func (c listCursor) At() int { return c.at }

// Top is the first row showing.
func (c listCursor) Top() int { return c.top }

// Visible are the rows showing: from ≤ row < to.
func (c listCursor) Visible() (from, to int) { return c.top, min(c.top+c.h, c.n) }

// Select puts the cursor on row i, scrolling as little as it takes to
// show it.
func (c listCursor) Select(i int) listCursor { c.at = i; return c.fix() }

// Move moves the cursor d rows (up when negative).
func (c listCursor) Move(d int) listCursor { c.at += d; return c.fix() }

// Page moves the cursor and the view d pages, so the cursor keeps its
// place on the screen; at either end the cursor stops on the end row.
func (c listCursor) Page(d int) listCursor {
	c.at += d * c.h
	c.top += d * c.h
	return c.fix()
}

// Home is c on the first row; End on the last.
func (c listCursor) Home() listCursor { c.at = 0; return c.fix() }
func (c listCursor) End() listCursor  { c.at = c.n - 1; return c.fix() }

// Key moves the cursor as a list key asks; false when msg is none.
func (c listCursor) Key(msg tea.KeyMsg, k listKeys) (listCursor, bool) {
	switch {
	case key.Matches(msg, k.Up):
		return c.Move(-1), true
	case key.Matches(msg, k.Down):
		return c.Move(1), true
	case key.Matches(msg, k.PageUp):
		return c.Page(-1), true
	case key.Matches(msg, k.PageDown):
		return c.Page(1), true
	case key.Matches(msg, k.Home):
		return c.Home(), true
	case key.Matches(msg, k.End):
		return c.End(), true
	}
	return c, false
}

// Scroll moves the view, not a cursor, as a list key asks (a page of
// text has no rows to choose): the cursor stays on the first row shown.
// False when msg is no list key.
func (c listCursor) Scroll(msg tea.KeyMsg, k listKeys) (listCursor, bool) {
	top := c.top
	switch {
	case key.Matches(msg, k.Up):
		top--
	case key.Matches(msg, k.Down):
		top++
	case key.Matches(msg, k.PageUp):
		top -= c.h
	case key.Matches(msg, k.PageDown):
		top += c.h
	case key.Matches(msg, k.Home):
		top = 0
	case key.Matches(msg, k.End):
		top = c.n
	default:
		return c, false
	}
	return c.ScrollTo(top), true
}

// ScrollTo shows the rows from top on (or the last h rows, if fewer are
// left), the cursor on the first of them.
func (c listCursor) ScrollTo(top int) listCursor {
	c = c.fix()
	c.top = max(min(top, c.n-c.h), 0)
	c.at = c.top
	return c.fix()
}

// fix restores the invariants: 0 ≤ at < n (at 0 when empty), at among the
// rows showing, and top no further down than needed to fill h rows.
func (c listCursor) fix() listCursor {
	c.n, c.h = max(c.n, 0), max(c.h, 1)
	c.at = max(min(c.at, c.n-1), 0)
	c.top = max(min(c.top, c.at), c.at-c.h+1)
	c.top = max(min(c.top, c.n-c.h), 0)
	return c
}
