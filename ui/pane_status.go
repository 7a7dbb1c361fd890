package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/ui/session"

	"github.com/mkbench/mkbench/internal/runstate"
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
	// Device is where the backbones run when not on the CPU
	// ("opencl:0 NAME (PLATFORM)"); "" on the CPU, the default, which the
	// line leaves unsaid.
	Device string
	State  runstate.State
	Msg    note
	// Budget is the run's training-time budget (0: none) and Wall its
	// training time so far: the ETA is the budget's when it ends first.
	Budget, Wall time.Duration
	// Eval is the progress of the run's evaluation under way, if any: the
	// bar and ETA are then the evaluation's.
	Eval *session.EvalProgress
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
	var right string
	switch left2, byBudget := runETA(d.Iter, d.Iters, d.ItPerSec, d.Budget, d.Wall); {
	case d.Eval != nil && d.Eval.Total > 0:
		pct = float64(d.Eval.Done) / float64(d.Eval.Total)
		right = fmt.Sprintf(" evaluating %d/%d tasks │ ETA %s ", d.Eval.Done, d.Eval.Total, eta(d.Eval.Remaining()))
	case byBudget:
		pct = min(d.Wall.Seconds()/d.Budget.Seconds(), 1)
		right = fmt.Sprintf(" %3.0f%% │ %s │ ETA %s (%s budget) ", 100*pct, engine.FormatRate(d.ItPerSec), eta(left2), eta(d.Budget))
	default:
		right = fmt.Sprintf(" %3.0f%% │ %s │ ETA %s ", 100*pct, engine.FormatRate(d.ItPerSec), eta(left2))
	}
	if d.State != runstate.Running && (d.Eval == nil || d.State != runstate.Evaluating) {
		right += "│ " + t.Warn.Render(string(d.State)) + " "
	}
	if bw := w - ansi.StringWidthWc(left) - ansi.StringWidthWc(right); bw >= 5 {
		left += t.bar(min(bw, 40), pct)
	}
	// The directory gives way to the message down to half the line, cut
	// at its start: its end tells it from the run's neighbours.
	dir := runfile.Printable(d.Dir)
	if d.Msg.text != "" {
		dir = cutStart(dir, max(w-4-ansi.StringWidthWc(d.Msg.text), w/2-4, 16))
	}
	line2 := " " + t.Dim.Render(dir)
	if d.Device != "" {
		line2 = " " + t.Bold.Render(cutMiddle(d.Device, max(w/3, 12))) + t.Dim.Render(" │ ") + t.Dim.Render(dir)
	}
	if d.Msg.text != "" {
		line2 += t.Dim.Render(" │ ") + d.Msg.render(t)
	}
	return block(left+right+"\n"+line2, w, 2)
}
