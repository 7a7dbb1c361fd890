package ui

import (
	"fmt"
	"github.com/mkbench/mkbench/engine/runfile"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
)

// The dashboard's status bar, under the panes.

// statusData is the status bar's content.
type statusData struct {
	Preset      string
	Variants    []string
	Variant     string // the selected run's
	Iter, Iters int
	ItPerSec    float64
	Dir         string
	State       string
	Msg         note
}

// statusBar is two lines: the selected run's progress, then its
// directory and the latest message.
func statusBar(t Theme, d statusData, w int) string {
	if d.Preset == "" {
		return block("", w, 2)
	}
	vs := make([]string, len(d.Variants))
	for i, v := range d.Variants {
		vs[i] = v
		if v == d.Variant && len(d.Variants) > 1 {
			vs[i] = t.Bold.Render("▸" + v)
		}
	}
	if len(vs) == 0 {
		vs = []string{"no run"}
	}
	pct := 0.0
	if d.Iters > 0 {
		pct = float64(d.Iter) / float64(d.Iters)
	}
	left := fmt.Sprintf(" %s │ %s │ %s/%s ", t.Bold.Render(d.Preset), strings.Join(vs, " "), count(d.Iter), count(d.Iters))
	right := fmt.Sprintf(" %3.0f%% │ %s │ ETA %s ", 100*pct, engine.FormatRate(d.ItPerSec), eta(engine.Remaining(d.Iter, d.Iters, d.ItPerSec)))
	if d.State != "running" {
		right += "│ " + t.Warn.Render(d.State) + " "
	}
	if bw := w - ansi.StringWidthWc(left) - ansi.StringWidthWc(right); bw >= 5 {
		left += t.bar(min(bw, 40), pct)
	}
	line2 := " " + t.Dim.Render(runfile.Printable(d.Dir))
	if d.Msg.text != "" {
		line2 += t.Dim.Render(" │ ") + d.Msg.render(t)
	}
	return block(left+right+"\n"+line2, w, 2)
}
