package ui

import (
	"fmt"
	"math"
	"strings"
)

// finite reports whether v can be drawn: NaN or ±Inf scaled to a canvas
// coordinate becomes an absurd integer, and the line between two such
// points is a huge allocation.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// num formats a metric in at most about 8 columns.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "+∞"
	case math.IsInf(v, -1):
		return "−∞"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e5 || math.Abs(v) < 1e-3:
		return fmt.Sprintf("%.2e", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// compact formats an axis label in as few columns as it can.
func compact(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a == 0:
		return "0"
	case a < 0.01:
		return fmt.Sprintf("%.0e", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// commaList writes integers as the command line takes them: 1,5,10.
func commaList[T int | uint64](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// note is a screen's latest message; an error is drawn in the error
// style.
type note struct {
	text string
	err  bool
}

func (n *note) set(s string) { *n = note{text: s} }

// fail shows the first line of err.
func (n *note) fail(err error) { *n = note{text: firstLine(err.Error()), err: true} }

func (n note) render(t Theme) string {
	if n.err {
		return t.Err.Render(n.text)
	}
	return n.text
}
