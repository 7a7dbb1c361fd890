package ui

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"

	"github.com/charmbracelet/bubbles/key"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/runs"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The runs screen's drawing: a header with the counts, the table (a
// heading line before each experiment's or sweep's runs), a line on the
// run under the cursor, the note, and the footer; or, instead of the
// table, the marked runs' curves or their settings side by side.

func (s *runsScreen) View() string {
	w, h := s.w, s.h
	if f, small := tooSmall(w, h); small {
		return f
	}
	t := s.theme
	head := s.header()
	foot := block(footer(t, s.ShortHelp()), w, 1)
	bodyH := h - 5 // header, sub-header, detail, note, footer
	var body string
	switch s.stage {
	case runsCurves:
		body = s.curvesView(w, bodyH+1)
		return head + "\n" + body + "\n" + block(s.note.render(t), w, 1) + "\n" + foot
	case runsDiff:
		body = s.diffView(w, bodyH+1)
		return head + "\n" + body + "\n" + block(s.note.render(t), w, 1) + "\n" + foot
	}
	switch {
	case s.scanErr != "":
		body = center(t.Err.Render(s.scanErr), w, bodyH)
	case len(s.all) == 0 && s.scanning:
		body = center(t.Dim.Render("looking for runs under "+s.root+"…"), w, bodyH)
	case len(s.all) == 0:
		body = center(t.Dim.Render("no runs under "+s.root+" yet: mkbench run, the workbench and sweeps write them here"), w, bodyH)
	default:
		body = s.table(w, bodyH)
	}
	noteLine := s.note.render(t)
	if s.confirm != "" {
		noteLine = t.Warn.Render("delete " + s.confirm + " and everything in it? y deletes, any other key keeps it")
	}
	return head + "\n" + s.subHeader() + "\n" + body + "\n" + block(s.detail(), w, 1) + "\n" +
		block(noteLine, w, 1) + "\n" + foot
}

// header is the first line: the root and the counts by state.
func (s *runsScreen) header() string {
	t := s.theme
	counts := map[string]int{}
	for i, r := range s.all {
		if s.read[i] {
			counts[r.State]++
		}
	}
	parts := []string{plural(len(s.all), "run")}
	for _, st := range []string{runstate.Finished, runstate.Running, runstate.Stopped, runstate.Failed} {
		if counts[st] > 0 {
			parts = append(parts, stateStyle(t, st).Render(fmt.Sprintf("%d %s", counts[st], st)))
		}
	}
	if s.scanning {
		parts = append(parts, t.Dim.Render(fmt.Sprintf("reading %d/%d", s.nread, len(s.all))))
	}
	// The root last: a long path is what a narrow terminal cuts.
	left := t.Title.Render(" mkbench ") + t.Dim.Render("│ ") + strings.Join(parts, t.Dim.Render(" · ")) + t.Dim.Render(" under "+s.root)
	return withRight(left, shortHelp(t, []key.Binding{s.keys.Help})+" ", s.w)
}

// subHeader is the second line: the filter, the order and the marks.
func (s *runsScreen) subHeader() string {
	t := s.theme
	var parts []string
	switch {
	case s.filtering:
		parts = append(parts, s.filter.View())
	case s.filter.Value() != "":
		parts = append(parts, fmt.Sprintf("filter %q: %d shown", s.filter.Value(), len(s.view)))
	}
	order := "▲"
	if s.desc {
		order = "▼"
	}
	parts = append(parts, t.Dim.Render("sorted by "+runs.SortKeys[s.sortKey]+" "+order))
	if n := len(s.marks); n > 0 {
		parts = append(parts, fmt.Sprintf("%d marked", n))
	}
	return block(" "+strings.Join(parts, t.Dim.Render(" · ")), s.w, 1)
}

// tableRows is the table's height on this screen, its header included.
func (s *runsScreen) tableRows() int { return max(s.h-5, 3) }

// runsColumn is a column of the runs table.
type runsColumn struct {
	name  string
	width int
	cell  func(r runs.Run, now time.Time) string
}

// runsColumns are the table's columns, most useful first: those that do
// not fit a narrow terminal go from the end of this list.
var runsColumns = []runsColumn{
	{"state", 11, func(r runs.Run, _ time.Time) string { return r.State }},
	{"metric", 17, func(r runs.Run, _ time.Time) string { return runs.MetricText(r) }},
	{"iters", 13, func(r runs.Run, _ time.Time) string { return fmt.Sprintf("%s/%s", count(r.Iter), count(r.Iters)) }},
	{"preset", 14, func(r runs.Run, _ time.Time) string { return r.Preset }},
	{"age", 4, func(r runs.Run, now time.Time) string { return runs.Age(now.Sub(r.Modified)) }},
	{"time", 6, func(r runs.Run, _ time.Time) string { return runs.Duration(r.TrainSeconds) }},
	{"variant", 10, func(r runs.Run, _ time.Time) string { return r.Variant }},
	{"seed", 4, func(r runs.Run, _ time.Time) string { return fmt.Sprint(r.Seed) }},
	{"device", 18, func(r runs.Run, _ time.Time) string { return runs.DeviceText(r.Device) }},
}

// runsOrder is the columns' order on the screen (the sort keys' order;
// the device is none).
var runsOrder = []string{"preset", "variant", "seed", "iters", "state", "metric", "time", "device", "age"}

// table draws the rows from the one that keeps the cursor in sight: h
// lines of w columns.
func (s *runsScreen) table(w, h int) string {
	t := s.theme
	now := time.Now()
	// The run column takes what the others leave, at least 18; columns go
	// until it has that.
	// The device column shows when a run is on another device than the
	// CPU: a column of "cpu" tells nothing.
	columns := runsColumns
	if !slices.ContainsFunc(s.all, func(r runs.Run) bool { return r.Device != "" && r.Device != engine.CPU }) {
		columns = slices.DeleteFunc(slices.Clone(columns), func(c runsColumn) bool { return c.name == "device" })
	}
	cols := len(columns)
	fixed := func(n int) int {
		f := 3
		for _, c := range columns[:n] {
			f += c.width + 1
		}
		return f
	}
	for cols > 2 && w-fixed(cols) < 18 {
		cols--
	}
	shown := map[string]bool{}
	for _, c := range columns[:cols] {
		shown[c.name] = true
	}
	runW := max(w-fixed(cols), 8)
	sortName := runs.SortKeys[s.sortKey]
	label := func(name string, width int) string {
		key := name
		if name == "iters" {
			key = "iter"
		}
		if key == sortName {
			if s.desc {
				name += "▼"
			} else {
				name += "▲"
			}
		}
		return pad(name, width)
	}
	hdr := "   " + label("run", runW)
	for _, name := range runsOrder {
		if shown[name] {
			hdr += " " + label(name, columnWidth(name))
		}
	}
	type line struct {
		text string
		row  int // index into view; -1 for a heading
	}
	var lines []line
	// first[i] is the first line of row i: its group's heading when it is
	// the group's first, else its own.
	first := make([]int, len(s.view))
	// Names too long for the column keep what tells them apart, their
	// ends (fitNames).
	names := make([]string, len(s.view))
	for i, j := range s.view {
		names[i] = runfile.Printable(runs.InGroup(s.all[j]))
	}
	names = fitNames(names, runW)
	group := "\x00"
	for i, j := range s.view {
		r := s.all[j]
		first[i] = len(lines)
		if r.Group != group {
			group = r.Group
			if group != "" {
				lines = append(lines, line{t.Bold.Render(r.Kind+" "+runfile.Printable(group)) + t.Dim.Render(" · "+plural(s.groupSize(group), "run")), -1})
			}
		}
		lead := " "
		if i == s.cursor.At() {
			lead = t.Key.Render("▸")
		}
		mark := " "
		if c, ok := s.marks[r.Dir]; ok {
			mark = t.Series(c).Render("●")
			if t.Mono {
				mark = string(t.Marker(c))
			}
		}
		name := pad(names[i], runW)
		if i == s.cursor.At() {
			name = t.Bold.Render(name)
		}
		l := lead + mark + " " + name
		for _, cname := range runsOrder {
			if !shown[cname] {
				continue
			}
			cell := "…"
			if s.read[j] {
				cell = cellOf(cname, r, now)
			}
			if job := s.evals[r.Dir]; job != nil && cname == "metric" {
				cell = job.text(s.spin)
			}
			c := pad(cell, columnWidth(cname))
			if cname == "state" {
				c = stateStyle(t, r.State).Render(c)
			}
			l += " " + c
		}
		lines = append(lines, line{l, i})
	}
	rows := h - 1
	at := 0
	for k, l := range lines {
		if l.row == s.cursor.At() {
			at = k
		}
	}
	// The lines start where the cursor's rows do, so a page turns the
	// lines as it does the rows; the cursor's line stays in sight, and
	// its group's heading with it when it is the group's first run.
	lc := listCursor{}.Len(len(lines)).Height(rows)
	if len(first) > 0 {
		lc = lc.ScrollTo(first[s.cursor.Top()])
	}
	if at > 0 && lines[at-1].row < 0 {
		lc = lc.Select(at - 1)
	}
	lc = lc.Select(at)
	from, to := lc.Visible()
	more := ""
	if len(lines) > rows {
		more = t.Dim.Render(fmt.Sprintf("%d–%d of %d lines ", from+1, to, len(lines)))
	}
	out := []string{withRight(t.Dim.Render(hdr), more, w)}
	for _, l := range lines[from:to] {
		out = append(out, l.text)
	}
	return block(strings.Join(out, "\n"), w, h)
}

func columnWidth(name string) int {
	for _, c := range runsColumns {
		if c.name == name {
			return c.width
		}
	}
	return 0
}

func cellOf(name string, r runs.Run, now time.Time) string {
	if r.State == "" && name == "state" {
		return "unreadable"
	}
	for _, c := range runsColumns {
		if c.name == name {
			return runfile.Printable(c.cell(r, now))
		}
	}
	return ""
}

func (s *runsScreen) groupSize(g string) int {
	n := 0
	for _, j := range s.view {
		if s.all[j].Group == g {
			n++
		}
	}
	return n
}

// detail is the line on the run under the cursor: its directory, and why
// it failed or could not be read.
func (s *runsScreen) detail() string {
	t := s.theme
	r, ok := s.current()
	if !ok {
		return ""
	}
	parts := []string{t.Key.Render("▸") + " " + runfile.Printable(r.Dir)}
	if r.Error != "" {
		parts = append(parts, t.Err.Render(runfile.Printable(r.Error)))
	} else if r.Eval != nil {
		e := r.Eval.String()
		if r.Val {
			e = "validation " + e
		}
		parts = append(parts, e)
	}
	return " " + strings.Join(parts, t.Dim.Render(" · "))
}

// overlayMetrics are what the curves view draws: a metrics.jsonl field or
// the validation curve.
var overlayMetrics = []struct {
	name   string
	get    func(engine.MetricsRow) float64 // nil: the validation curve
	nonNeg bool                            // never negative: the axis starts no lower than 0
}{
	{"loss (−ELBO)", func(m engine.MetricsRow) float64 { return m.Loss }, false},
	{"ELBO", func(m engine.MetricsRow) float64 { return m.ELBO }, false},
	{"KL", func(m engine.MetricsRow) float64 { return m.KL }, true},
	{"data term", func(m engine.MetricsRow) float64 { return m.Data }, true},
	{"validation", nil, true},
}

// curvesView overlays the marked runs' curves of one metric with a
// legend, against iterations or training time: w×h.
func (s *runsScreen) curvesView(w, h int) string {
	t := s.theme
	m := overlayMetrics[s.metric]
	rs := s.marked()
	xName := "iterations"
	if s.timeX {
		xName = "training time (s)"
	}
	title := fmt.Sprintf("%s · %s against %s", m.name, plural(len(rs), "run"), xName)
	if len(s.marks) == 0 {
		title += " (the run under the cursor; space marks runs to compare)"
	}
	if s.ema {
		title += " · EMA"
	}
	if s.logY {
		title += " · log y"
	}
	var sets []xySet
	var legend []string
	var notes []string
	for i, r := range rs {
		slot, ok := s.marks[r.Dir]
		if !ok {
			slot = i
		}
		rc := s.curves[r.Dir]
		label := t.Swatch(slot) + " " + t.Series(slot).Render(runfile.Printable(runs.InGroup(r)))
		switch {
		case rc == nil:
			legend = append(legend, label+t.Dim.Render(" reading…"))
			continue
		case rc.err != nil:
			legend = append(legend, label+" "+t.Err.Render(firstLine(rc.err.Error())))
			continue
		}
		set := xySet{idx: slot}
		c := rc.c
		if m.get == nil {
			for _, v := range c.Val {
				x := float64(v.Iter)
				if s.timeX {
					x = v.TrainSeconds
				}
				set.x, set.y = append(set.x, x), append(set.y, v.Mean)
			}
		} else {
			if s.timeX && c.Seconds == nil {
				notes = append(notes, runfile.Printable(runs.InGroup(r))+" recorded no training time")
				continue
			}
			for k, row := range c.Metrics {
				x := float64(row.Iter)
				if s.timeX {
					x = c.Seconds[k]
				}
				set.x, set.y = append(set.x, x), append(set.y, m.get(row))
			}
		}
		if s.ema && len(set.y) > 0 {
			set.y = ema(set.x, set.y)
		}
		latest := ""
		if n := len(set.y); n > 0 {
			latest = t.Dim.Render(" " + num(set.y[n-1]))
		}
		legend = append(legend, label+latest)
		sets = append(sets, set)
	}
	legendLines := wrapItems(legend, w, max(1, min(4, (h-6)/3)))
	if len(notes) > 0 {
		legendLines = append(legendLines, t.Dim.Render(strings.Join(notes, "; ")))
	}
	chart := lineChart(t, title, sets, w, h-len(legendLines), chartSpec{logY: s.logY, iterX: !s.timeX, nonNeg: m.nonNeg})
	return block(chart+"\n"+strings.Join(legendLines, "\n"), w, h)
}

// diffView shows the settings that differ between the marked runs, one
// column per run: w×h.
func (s *runsScreen) diffView(w, h int) string {
	t := s.theme
	rs := s.marked()
	cfgs := make([]engine.Config, len(rs))
	for i, r := range rs {
		cfgs[i] = r.Config
	}
	keys, vals := runs.Diff(cfgs)
	title := t.Bold.Render(fmt.Sprintf("settings that differ between %s", plural(len(rs), "marked run")))
	if len(keys) == 0 {
		return block(title+"\n"+center(t.Dim.Render("none: the marked runs have the same settings"), w, h-1), w, h)
	}
	keyW := 8
	for _, k := range keys {
		keyW = max(keyW, len(k))
	}
	keyW = min(keyW, w/3)
	colW := max((w-keyW-1)/len(rs)-1, 6)
	hdr := pad("setting", keyW)
	for i, r := range rs {
		slot, ok := s.marks[r.Dir]
		if !ok {
			slot = i
		}
		hdr += " " + t.Series(slot).Render(pad(runfile.Printable(runs.InGroup(r)), colW))
	}
	lines := []string{title, hdr}
	for k, key := range keys {
		l := pad(key, keyW)
		for i := range rs {
			l += " " + pad(vals[i][k], colW)
		}
		lines = append(lines, l)
	}
	if len(lines) > h {
		lines = append(lines[:h-1], t.Dim.Render(fmt.Sprintf("… %d more settings", len(lines)-h+1)))
	}
	return block(strings.Join(lines, "\n"), w, h)
}
