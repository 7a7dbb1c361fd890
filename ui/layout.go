package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// Frames are put together from exact blocks (block): w columns by h
// lines. Blocks are joined and framed without measuring them again
// (joinH, box), which on every frame cost more than drawing the charts.

// block makes s exactly w columns by h lines: longer lines are cut
// (escape-aware), shorter ones padded, missing lines added.
func block(s string, w, h int) string {
	if w <= 0 || h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	var sb strings.Builder
	for i := 0; i < h; i++ {
		if i > 0 {
			sb.WriteByte('\n')
		}
		var l string
		if i < len(lines) {
			l = lines[i]
		}
		// The wcwidth variants: grapheme clustering is several times
		// slower, and nothing drawn here needs it.
		lw := ansi.StringWidthWc(l)
		if lw > w {
			l = ansi.TruncateWc(l, w, "…")
			lw = ansi.StringWidthWc(l)
		}
		sb.WriteString(l)
		sb.WriteString(strings.Repeat(" ", w-lw))
	}
	return sb.String()
}

// center puts one line of text in the middle of a w×h block.
func center(text string, w, h int) string {
	pad := max(0, (w-ansi.StringWidthWc(text))/2)
	lines := make([]string, h)
	if h > 0 {
		lines[h/2] = strings.Repeat(" ", pad) + text
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// withRight is left with right at the right edge of a w-column line,
// when there is room for both; else left alone.
func withRight(left, right string, w int) string {
	if gap := w - ansi.StringWidthWc(left) - ansi.StringWidthWc(right); gap > 0 {
		return left + strings.Repeat(" ", gap) + right
	}
	return left
}

// minW and minH are the smallest terminal the screens draw on.
const minW, minH = 40, 12

// tooSmall is what a screen shows on a terminal smaller than minW×minH,
// and whether the terminal is that small.
func tooSmall(w, h int) (string, bool) {
	if w >= minW && h >= minH {
		return "", false
	}
	return center(fmt.Sprintf("mkbench needs at least %d×%d (now %d×%d)", minW, minH, w, h), w, h), true
}

// joinH sets exact blocks (see block) of equal height side by side.
// Nothing is measured: lipgloss.JoinHorizontal measures every line of
// every block.
func joinH(blocks ...string) string {
	split := make([][]string, len(blocks))
	n := 0
	for i, b := range blocks {
		split[i] = strings.Split(b, "\n")
		n = max(n, len(split[i]))
	}
	var sb strings.Builder
	for l := 0; l < n; l++ {
		if l > 0 {
			sb.WriteByte('\n')
		}
		for _, s := range split {
			if l < len(s) {
				sb.WriteString(s[l])
			}
		}
	}
	return sb.String()
}

// box draws border b in colour c around body, an exact (w-2)×(h-2)
// block; like joinH it measures nothing.
func box(t Theme, b lipgloss.Border, c lipgloss.TerminalColor, body string, w, h int) string {
	st := t.r.NewStyle().Foreground(c)
	left, right := st.Render(b.Left), st.Render(b.Right)
	var sb strings.Builder
	sb.WriteString(st.Render(b.TopLeft + strings.Repeat(b.Top, w-2) + b.TopRight))
	lines := strings.Split(body, "\n")
	for i := 0; i < h-2; i++ {
		sb.WriteByte('\n')
		sb.WriteString(left)
		if i < len(lines) {
			sb.WriteString(lines[i])
		}
		sb.WriteString(right)
	}
	sb.WriteByte('\n')
	sb.WriteString(st.Render(b.BottomLeft + strings.Repeat(b.Bottom, w-2) + b.BottomRight))
	return sb.String()
}
