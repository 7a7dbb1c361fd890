package ui

import (
	"slices"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// namedKey is the key event of a key's name as tea.KeyMsg.String spells it.
func namedKey(name string) tea.KeyMsg {
	switch name {
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(name)}
}

// checkCursor fails t unless c's cursor, top and visible rows are as wanted
// and its invariants hold.
func checkCursor(t *testing.T, what string, c listCursor, at, top int) {
	t.Helper()
	from, to := c.Visible()
	if c.At() != at || c.Top() != top || from != top {
		t.Errorf("%s: at %d top %d visible [%d,%d); want at %d top %d", what, c.At(), c.Top(), from, to, at, top)
	}
	if c.n > 0 && (c.At() < from || c.At() >= to) {
		t.Errorf("%s: cursor %d outside the rows shown [%d,%d)", what, c.At(), from, to)
	}
	if to-from > c.h || to > c.n && c.n > 0 {
		t.Errorf("%s: shows [%d,%d) of %d rows, %d high", what, from, to, c.n, c.h)
	}
}

func TestListCursorEmpty(t *testing.T) {
	c := listCursor{}.Len(0).Height(10)
	for _, k := range []string{"down", "j", "pgdown", "f", "end", "G", "up", "pgup", "home"} {
		var ok bool
		if c, ok = c.Key(namedKey(k), newListKeys("row")); !ok {
			t.Errorf("%s is not a list key", k)
		}
		checkCursor(t, "empty after "+k, c, 0, 0)
		if from, to := c.Visible(); to != from {
			t.Errorf("empty after %s shows rows [%d,%d)", k, from, to)
		}
	}
	if _, ok := c.Key(namedKey("x"), newListKeys("row")); ok {
		t.Error("x moved the cursor")
	}
}

func TestListCursorShorterThanPage(t *testing.T) {
	k := newListKeys("row")
	c := listCursor{}.Len(3).Height(10)
	for _, step := range []struct {
		key string
		at  int
	}{{"down", 1}, {"j", 2}, {"j", 2}, {"pgup", 0}, {"pgdown", 2}, {"home", 0}, {"G", 2}, {"k", 1}, {"g", 0}, {"up", 0}} {
		c, _ = c.Key(namedKey(step.key), k)
		checkCursor(t, step.key, c, step.at, 0)
		if _, to := c.Visible(); to != 3 {
			t.Errorf("after %s shows up to row %d of 3", step.key, to)
		}
	}
}

func TestListCursorPages(t *testing.T) {
	k := newListKeys("row")
	c := listCursor{}.Len(25).Height(10)
	for _, step := range []struct {
		key     string
		at, top int
	}{
		{"j", 1, 0},
		{"pgdown", 11, 10}, // the view turns a page; the cursor keeps its place on it
		{"f", 21, 15},      // the last page: no blank rows under the end
		{"pgdown", 24, 15}, // stops on the last row
		{"pgup", 14, 5},
		{"b", 4, 0},
		{"pgup", 0, 0},
		{"end", 24, 15},
		{"k", 23, 15},
		{"home", 0, 0},
		{"up", 0, 0},
	} {
		c, _ = c.Key(namedKey(step.key), k)
		checkCursor(t, step.key, c, step.at, step.top)
	}
	// Moving down one row at a time scrolls one row at a time.
	c = c.Home()
	for i := 1; i < 25; i++ {
		c = c.Move(1)
		checkCursor(t, "j", c, i, max(0, i-9))
	}
}

func TestListCursorResize(t *testing.T) {
	c := listCursor{}.Len(30).Height(10).Select(25)
	checkCursor(t, "select 25", c, 25, 16) // scrolled as little as it takes
	c = c.Len(12)                          // the list shrank past the cursor
	checkCursor(t, "shrunk to 12", c, 11, 2)
	c = c.Height(4) // the terminal shrank
	checkCursor(t, "4 high", c, 11, 8)
	c = c.Height(40) // grew past the list
	checkCursor(t, "40 high", c, 11, 0)
	c = c.Height(0) // a terminal too small still shows the cursor's row
	checkCursor(t, "0 high", c, 11, 11)
	c = c.Len(0)
	checkCursor(t, "emptied", c, 0, 0)
	c = c.Len(5).Height(3).End().Len(5)
	checkCursor(t, "refilled", c, 4, 2)
}

func TestListCursorScroll(t *testing.T) {
	k := newListKeys("line")
	c := listCursor{}.Len(25).Height(10)
	for _, step := range []struct {
		key string
		top int
	}{{"j", 1}, {"pgdown", 11}, {"f", 15}, {"k", 14}, {"home", 0}, {"up", 0}, {"G", 15}, {"pgup", 5}, {"b", 0}} {
		var ok bool
		if c, ok = c.Scroll(namedKey(step.key), k); !ok {
			t.Fatalf("%s does not scroll", step.key)
		}
		checkCursor(t, step.key, c, step.top, step.top)
	}
	short := listCursor{}.Len(3).Height(10)
	for _, key := range []string{"j", "pgdown", "end"} {
		short, _ = short.Scroll(namedKey(key), k)
		checkCursor(t, "short after "+key, short, 0, 0)
	}
}

func TestListCursorScrollTo(t *testing.T) {
	c := listCursor{}.Len(25).Height(10)
	for _, c2 := range []struct{ to, top int }{{-3, 0}, {0, 0}, {7, 7}, {15, 15}, {16, 15}, {99, 15}} {
		checkCursor(t, "scroll to", c.ScrollTo(c2.to), c2.top, c2.top)
	}
	checkCursor(t, "short list", listCursor{}.Len(3).Height(10).ScrollTo(2), 0, 0)
}

// The picker moves with the list keys: a page turns the list's page, and
// the ends are its ends, filtered or not.
func TestPickerListKeys(t *testing.T) {
	m := New(Options{Root: t.TempDir(), Renderer: testTheme().r})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 140, Height: 40})
	m = next.(Model)
	p := m.picker
	n, per := len(p.list.VisibleItems()), p.list.Paginator.PerPage
	if n <= per {
		t.Fatalf("%d entries fit one page of %d: nothing to page through", n, per)
	}
	for _, step := range []struct {
		key string
		at  int
	}{{"g", 0}, {"j", 1}, {"f", 1 + per}, {"pgdown", min(1+2*per, n-1)}, {"G", n - 1}, {"b", n - 1 - per}, {"home", 0}, {"k", 0}, {"end", n - 1}} {
		next, _ = m.Update(namedKey(step.key))
		m = next.(Model)
		if got := m.picker.list.Index(); got != step.at {
			t.Errorf("after %s the picker's cursor is on entry %d, want %d", step.key, got, step.at)
		}
		if page := m.picker.list.Paginator.Page; page != step.at/per {
			t.Errorf("after %s the picker shows page %d, want %d", step.key, page, step.at/per)
		}
	}
}

// Every list names the same keys in its help, so they move the same way.
func TestListsShareKeys(t *testing.T) {
	want := newListKeys("x").bindings()
	for name, ks := range map[string]listKeys{"picker": newPickerKeys().List, "runs": newRunsKeys().List, "sweep": newSweepKeys().List} {
		for i, b := range ks.bindings() {
			if !slices.Equal(b.Keys(), want[i].Keys()) {
				t.Errorf("%s: %s moves on %v, other lists on %v", name, b.Help().Desc, b.Keys(), want[i].Keys())
			}
		}
	}
}
