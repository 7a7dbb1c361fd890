package ui

import (
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/charmbracelet/lipgloss"
)

// styleKey is the part of a cell style the charts use. Cells are compared
// by it so that a run of equal cells is rendered with one Render call:
// canvas.Model.View renders every cell on its own, which costs more than
// the rest of a redraw together.
type styleKey struct {
	fg, bg lipgloss.TerminalColor
	bold   bool
}

func keyOf(s lipgloss.Style) styleKey {
	return styleKey{fg: s.GetForeground(), bg: s.GetBackground(), bold: s.GetBold()}
}

// renderCanvas draws c's cells as text, styled through t's renderer.
func renderCanvas(c *canvas.Model, t Theme) string {
	w, h := c.Width(), c.Height()
	var sb strings.Builder
	sb.Grow(w * h * 4)
	run := make([]rune, 0, w)
	// Each style is rendered once, around a placeholder, and its escape
	// codes reused for every run of cells: Render per run would still be
	// the most expensive part of a redraw.
	wraps := map[styleKey][2]string{}
	flush := func(k styleKey) {
		if len(run) == 0 {
			return
		}
		wr, ok := wraps[k]
		if !ok {
			const ph = "X"
			r := t.r.NewStyle().Foreground(k.fg).Background(k.bg).Bold(k.bold).Render(ph)
			i := strings.Index(r, ph)
			wr = [2]string{r[:i], r[i+len(ph):]}
			wraps[k] = wr
		}
		sb.WriteString(wr[0])
		sb.WriteString(string(run))
		sb.WriteString(wr[1])
		run = run[:0]
	}
	for y := 0; y < h; y++ {
		if y > 0 {
			sb.WriteByte('\n')
		}
		var cur styleKey
		for x := 0; x < w; x++ {
			cell := c.Cell(canvas.Point{X: x, Y: y})
			r := cell.Rune
			if r == 0 {
				r = ' '
			}
			k := keyOf(cell.Style)
			if r == ' ' && x > 0 {
				// A blank's foreground is invisible: keep the run going.
				k.fg, k.bold = cur.fg, cur.bold
			}
			if x > 0 && k != cur {
				flush(cur)
			}
			cur = k
			run = append(run, r)
		}
		flush(cur)
	}
	return sb.String()
}
