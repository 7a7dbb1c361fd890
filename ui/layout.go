package ui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// joinH sets exact blocks (see block) of equal height side by side.
// Nothing is measured: lipgloss.JoinHorizontal measures every line of
// every block, which on each frame cost more than drawing the charts.
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
