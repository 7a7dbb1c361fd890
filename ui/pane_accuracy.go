package ui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/ui/session"
)

// The accuracy pane (classification presets, in the sine fit's place):
// every run's validation accuracy over iterations.

// accuracyRun is one run's validation curve.
type accuracyRun struct {
	Variant string
	Vals    []session.ValPoint
}

// accuracyData is what the accuracy pane (classification presets) shows.
type accuracyData struct {
	Runs         []accuracyRun
	Selected     int
	Every, Tasks int // validation schedule, for the header
}

// accuracyPane draws every run's validation accuracy over iterations, in
// the place regression presets have the sine fit.
func accuracyPane(t Theme, d accuracyData, w, h int) string {
	head := fmt.Sprintf("validation on %d tasks every %d iterations", d.Tasks, d.Every)
	if d.Every <= 0 {
		head = "this preset does not validate during training; e evaluates now"
	}
	var sets []xySet
	var legend []string
	for i, r := range d.Runs {
		vi := variantIndex(r.Variant)
		s := xySet{idx: vi}
		for _, v := range r.Vals {
			s.x = append(s.x, float64(v.Iter))
			s.y = append(s.y, v.Eval.Mean)
		}
		sets = append(sets, s)
		l := t.Swatch(vi) + " " + t.Series(vi).Render(r.Variant)
		if n := len(r.Vals); n > 0 {
			best := slices.MaxFunc(r.Vals, func(a, b session.ValPoint) int { return cmp.Compare(a.Eval.Mean, b.Eval.Mean) })
			l += fmt.Sprintf(" %s (best %s at %d)", num(r.Vals[n-1].Eval.Mean), num(best.Eval.Mean), best.Iter)
		}
		if i == d.Selected {
			l = t.Bold.Render("▸") + l
		}
		legend = append(legend, l)
	}
	body := lineChart(t, "accuracy", sets, w, h-2, chartSpec{iterX: true, nonNeg: true})
	return block(t.Dim.Render(head)+"\n"+strings.Join(legend, "  ")+"\n"+body, w, h)
}
