package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runstate"
)

// The sweep screen's drawing: the directory prompt, and the watch — a
// header with the counts, the unit table, a line on the unit under the
// cursor, and the curves beside (or, on small terminals, instead of) the
// results. The tables and the curves are pure functions of data and size
// like the dashboard's panes.

// sideBySideW is the narrowest terminal that shows the curves and the
// results side by side.
const sideBySideW = 110

func (s *sweepScreen) render() string {
	w, h := s.w, s.h
	if f, small := tooSmall(w, h); small {
		return f
	}
	t := s.theme
	foot := block(footer(t, s.ShortHelp()), w, 1)
	if s.stage == sweepChoose {
		return s.chooseView() + "\n" + foot
	}
	head := s.header()
	if s.st == nil {
		return head + "\n" + center(t.Dim.Render("reading "+s.dir+"…"), w, h-3) + "\n" + foot
	}
	tH := s.tableRows()
	rows := tH - 1
	s.cursor = s.cursor.Len(len(s.st.Units)).Height(rows)
	table := unitTable(t, *s.st, s.marks, s.cursor, w, tH)
	bottomH := h - 3 - tH - 1
	return head + "\n" + table + "\n" + block(s.detail(), w, 1) + "\n" + s.bottom(w, bottomH) + "\n" + foot
}

// tableRows is the unit table's height, its header included: every unit
// up to half the body.
func (s *sweepScreen) tableRows() int {
	n := 0
	if s.st != nil {
		n = len(s.st.Units)
	}
	return max(min(n+1, (s.h-3)/2), 3)
}

// header is the screen's two first lines: the directory, the counts and
// the Slurm jobs.
func (s *sweepScreen) header() string {
	t, st := s.theme, s.st
	fs := s.ShortHelp()
	right := footer(t, []key.Binding{s.keys.Help, fs[len(fs)-1]}) + " "
	top := withRight(t.Title.Render(" mkbench ")+t.Dim.Render("│ ")+"sweep "+s.dir, right, s.w)
	var parts []string
	if st != nil {
		parts = append(parts, plural(len(st.Units), "unit"))
		for _, state := range []string{sweep.StateDone, sweep.StateRunning, sweep.StatePending, sweep.StateFailed} {
			style := stateStyle(t, state)
			if st.Counts[state] == 0 {
				style = t.Dim
			}
			parts = append(parts, style.Render(fmt.Sprintf("%d %s", st.Counts[state], state)))
		}
		if len(st.Jobs) > 0 {
			ids := make([]string, len(st.Jobs))
			for i, j := range st.Jobs {
				ids[i] = j.Job
			}
			parts = append(parts, "slurm job "+strings.Join(ids, ", "))
		}
		if st.Cancelled {
			parts = append(parts, t.Warn.Render(runstate.Stopped+" by mkbench sweep cancel"))
		}
	}
	line := " " + strings.Join(parts, t.Dim.Render(" · "))
	if s.readErr != "" {
		line += "  " + t.Err.Render(s.readErr)
	}
	if s.queueErr != "" {
		line += "  " + t.Warn.Render("squeue: "+s.queueErr)
	}
	return block(top, s.w, 1) + "\n" + block(line, s.w, 1)
}

// unitTable is the units the cursor shows, one line each, under a
// header line: h lines of w columns. Columns that do not fit go, least useful
// first: the Slurm state, validation, the bar, the errors (which the line
// under the table then shows for the unit under the cursor).
func unitTable(t Theme, st sweep.Status, marks map[int]int, cursor listCursor, w, h int) string {
	units := st.Units
	idxW, nameW, itW := len(fmt.Sprint(max(len(units)-1, 0))), 4, 10
	hasVal, hasErr, hasDev := false, false, false
	for _, u := range units {
		nameW, itW = max(nameW, len(u.Name)), max(itW, len(iterText(u)))
		hasVal, hasErr = hasVal || u.Val != nil, hasErr || u.Error != ""
		// A column of "cpu" tells nothing: it shows for another device.
		hasDev = hasDev || onDevice(u) != ""
	}
	const stateW, lossW, valW, resW, slurmW, barW, errMin, devW = 8, 8, 6, 15, 18, 10, 16, 18
	fixed := 3 + idxW + 1 + 1 + stateW + 1 + itW + 1 + lossW + 1 + resW
	nameW = min(nameW, max(12, w-fixed))
	rest := w - fixed - nameW
	use := func(ok bool, need int) bool {
		if ok && rest >= need+1 {
			rest -= need + 1
			return true
		}
		return false
	}
	showDev := use(hasDev, devW)
	showSlurm, showVal, showBar := use(len(st.Jobs) > 0, slurmW), use(hasVal, valW), use(true, barW)
	showErr := use(hasErr, errMin)
	errW := errMin + max(rest, 0)

	hdr := fmt.Sprintf("   %*s %s %s %s", idxW, "#", pad("unit", nameW), pad("state", stateW), pad("iterations", itW))
	if showBar {
		hdr += " " + pad("", barW)
	}
	hdr += " " + pad("loss", lossW)
	if showVal {
		hdr += " " + pad("val", valW)
	}
	hdr += " " + pad("result", resW)
	if showDev {
		hdr += " " + pad("device", devW)
	}
	if showSlurm {
		hdr += " " + pad("slurm", slurmW)
	}
	if showErr {
		hdr += " error"
	}
	rows := h - 1
	from, to := cursor.Visible()
	more := ""
	if len(units) > rows {
		more = t.Dim.Render(fmt.Sprintf("%d–%d of %d ", from+1, to, len(units)))
	}
	lines := []string{withRight(t.Dim.Render(hdr), more, w)}
	for i := from; i < to; i++ {
		u := units[i]
		lead := " "
		if i == cursor.At() {
			lead = t.Key.Render("▸")
		}
		mark := " "
		if c, ok := marks[u.Index]; ok {
			mark = t.Series(c).Render("●")
			if t.Mono {
				mark = string(t.Marker(c))
			}
		}
		name := pad(u.Name, nameW)
		if i == cursor.At() {
			name = t.Bold.Render(name)
		}
		l := lead + mark + " " + fmt.Sprintf("%*d", idxW, u.Index) + " " + name + " " + stateStyle(t, u.State).Render(pad(u.State, stateW))
		if u.State == sweep.StateFailed && !showErr {
			// No room for an error column: the error takes the cells of
			// numbers a failed unit no longer updates.
			lines = append(lines, l+" "+t.Err.Render(u.Error))
			continue
		}
		l += " " + pad(iterText(u), itW)
		if showBar {
			frac := 0.0
			if u.Iters > 0 {
				frac = min(float64(u.Iter)/float64(u.Iters), 1)
			}
			l += " " + t.bar(barW, frac)
		}
		l += " " + pad(optNum(u.Loss), lossW)
		if showVal {
			v := "–"
			if u.Val != nil {
				v = fmt.Sprintf("%.1f%%", 100**u.Val)
			}
			l += " " + pad(v, valW)
		}
		l += " " + pad(evalText(u.Eval, false), resW)
		if showDev {
			d := runs.DeviceText(u.DeviceText())
			if d == "–" {
				d = "cpu" // not recorded: $MKBENCH_DEVICE's, as before devices
			}
			l += " " + pad(d, devW)
		}
		if showSlurm {
			l += " " + pad(strings.TrimSpace(u.Slurm+" "+u.Node), slurmW)
		}
		if showErr && u.Error != "" {
			l += " " + t.Err.Render(pad(u.Error, errW))
		}
		lines = append(lines, l)
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// onDevice is "on DEVICE" for a unit on another device than the CPU
// (where it ran once finished, else where its worker was asked to run),
// "" on the CPU.
func onDevice(u sweep.UnitStatus) string {
	d := u.DeviceText()
	if d == "" || d == engine.CPU {
		return ""
	}
	if u.Ran != "" {
		return "ran on " + d
	}
	return "on " + d
}

// detail is the line on the unit under the cursor: where it runs or why
// it failed, and its directory.
func (s *sweepScreen) detail() string {
	t := s.theme
	if len(s.st.Units) == 0 {
		return t.Dim.Render(" the sweep has no units")
	}
	u := s.st.Units[s.cursor.At()]
	parts := []string{t.Bold.Render(u.Name), stateStyle(t, u.State).Render(u.State)}
	switch {
	case u.State == sweep.StateFailed:
		parts = append(parts, t.Err.Render(u.Error))
	case u.Eval != nil:
		parts = append(parts, u.Eval.String())
	case u.Owner != nil:
		o := fmt.Sprintf("on %s pid %d", u.Owner.Host, u.Owner.PID)
		if u.Owner.Job != "" {
			o += " (job " + u.Owner.Job + ")"
		}
		parts = append(parts, o)
	}
	if d := onDevice(u); d != "" {
		parts = append(parts, d)
	}
	if u.Slurm != "" {
		parts = append(parts, "slurm "+strings.TrimSpace(u.Slurm+" "+u.Node))
	}
	if u.Starts > 1 {
		parts = append(parts, fmt.Sprintf("started %d×", u.Starts))
	}
	parts = append(parts, t.Dim.Render(u.Dir))
	return " " + t.Key.Render("▸") + " " + strings.Join(parts, t.Dim.Render(" · "))
}

// bottom is the curves and the results: side by side on a wide terminal
// (r hides the results), else one of them (r switches).
func (s *sweepScreen) bottom(w, h int) string {
	t := s.theme
	if w >= sideBySideW && !s.alt {
		rw := min(max(w*2/5, 40), 70)
		cw := w - rw - 3
		sep := block(strings.TrimSuffix(strings.Repeat(" "+t.Dim.Render("│")+" \n", h), "\n"), 3, h)
		return joinH(sweepCurves(t, s.curvesData(), cw, h), sep, resultsPane(t, sweepResults(*s.st), rw, h))
	}
	if w < sideBySideW && s.alt {
		return resultsPane(t, sweepResults(*s.st), w, h)
	}
	return sweepCurves(t, s.curvesData(), w, h)
}

// sweepCurve is one unit's loss curve as drawn: slot fixes its colour.
type sweepCurve struct {
	name       string
	slot       int
	iter, loss []float64
}

type sweepCurvesData struct {
	curves          []sweepCurve
	marked          bool // false: the unit under the cursor, none marked
	logY, ema, none bool
}

func (s *sweepScreen) curvesData() sweepCurvesData {
	d := sweepCurvesData{marked: len(s.marks) > 0, logY: s.logY, ema: s.ema}
	for _, i := range s.shown() {
		c := sweepCurve{name: s.st.Units[i].Name, slot: s.marks[i]}
		if uc := s.curves[i]; uc != nil {
			c.iter, c.loss = uc.iter, uc.loss
		}
		d.curves = append(d.curves, c)
	}
	return d
}

// sweepCurves draws the loss of the shown units against the iteration
// with a legend under it, w×h.
func sweepCurves(t Theme, d sweepCurvesData, w, h int) string {
	title := "training loss · " + plural(len(d.curves), "marked unit")
	if !d.marked {
		title = "training loss · the unit under the cursor (space marks units to compare)"
	}
	if d.ema {
		title += " · EMA"
	}
	if d.logY {
		title += " · log y"
	}
	if len(d.curves) == 0 {
		return block(t.Bold.Render(title)+"\n"+center(t.Dim.Render("no units"), w, h-1), w, h)
	}
	var sets []xySet
	var legend []string
	for _, c := range d.curves {
		y := c.loss
		if d.ema {
			y = ema(c.iter, y)
		}
		sets = append(sets, xySet{idx: c.slot, x: c.iter, y: y})
		latest := ""
		if n := len(c.loss); n > 0 {
			latest = t.Dim.Render(" " + num(c.loss[n-1]))
		}
		legend = append(legend, t.Swatch(c.slot)+" "+t.Series(c.slot).Render(c.name)+latest)
	}
	legendLines := wrapItems(legend, w, max(1, min(3, (h-6)/3)))
	chart := lineChart(t, title, sets, w, h-len(legendLines), chartSpec{logY: d.logY, iterX: true})
	return block(chart+"\n"+strings.Join(legendLines, "\n"), w, h)
}

// wrapItems puts items on lines of at most w columns, two spaces apart,
// in at most n lines; the last says how many did not fit.
func wrapItems(items []string, w, n int) []string {
	var lines []string
	cur := ""
	for i, it := range items {
		switch {
		case cur == "":
			cur = it
		case ansi.StringWidthWc(cur)+2+ansi.StringWidthWc(it) <= w:
			cur += "  " + it
		default:
			if len(lines) == n-1 {
				return append(lines, cur+fmt.Sprintf("  +%d more", len(items)-i))
			}
			lines, cur = append(lines, cur), it
		}
	}
	return append(lines, cur)
}

// sweepResult is a row of the results table: sweep.Report's row, built
// in memory (Report writes files), and how many of its units failed.
type sweepResult struct {
	sweep.Row
	failed int
}

// sweepResults groups the finished units by preset, variant and setting
// as sweep.Report does: the mean over seeds with the Student-t interval,
// or with one seed the evaluation's own interval.
func sweepResults(st sweep.Status) []sweepResult {
	var rows []sweepResult
	index := map[string]int{}
	for _, u := range st.Units {
		k := u.Preset + "\x00" + u.Variant + "\x00" + u.Setting()
		i, ok := index[k]
		if !ok {
			i = len(rows)
			index[k] = i
			rows = append(rows, sweepResult{Row: sweep.Row{Preset: u.RecordedPreset(), Variant: u.Variant, Setting: u.Setting()}})
		}
		r := &rows[i]
		r.Planned++
		if u.State == sweep.StateFailed {
			r.failed++
		}
		if u.State == sweep.StateDone && u.Eval != nil {
			r.Metric = u.Eval.Metric
			r.Seeds = append(r.Seeds, sweep.SeedValue{Seed: u.Seed, Mean: u.Eval.Mean, CI95: u.Eval.CI95, Tasks: u.Eval.Tasks})
		}
	}
	for i := range rows {
		r := &rows[i]
		means := make([]float64, len(r.Seeds))
		for j, sv := range r.Seeds {
			means[j] = sv.Mean
		}
		r.Mean, r.SD, r.CI95 = experiments.SeedStats(means)
		if len(r.Seeds) == 1 {
			r.CI95 = r.Seeds[0].CI95
		}
	}
	return rows
}

// resultsPane is the results table filling in, w×h.
func resultsPane(t Theme, rows []sweepResult, w, h int) string {
	cells := [][]string{{"preset", "variant", "setting", "result", "seeds"}}
	hasSetting := false
	for _, r := range rows {
		res := "–"
		if len(r.Seeds) > 0 {
			res = evalText(&engine.EvalResult{Metric: r.Metric, Mean: r.Mean, CI95: r.CI95}, true)
		}
		cells = append(cells, []string{r.Preset, r.Variant, r.Setting, res, fmt.Sprintf("%d/%d", len(r.Seeds), r.Planned)})
		hasSetting = hasSetting || r.Setting != ""
	}
	widths := make([]int, 5)
	for _, c := range cells {
		for j, v := range c {
			widths[j] = max(widths[j], ansi.StringWidthWc(v))
		}
	}
	if !hasSetting {
		widths[2] = -1
	}
	line := func(c []string) string {
		var parts []string
		for j, v := range c {
			if widths[j] >= 0 {
				parts = append(parts, pad(v, widths[j]))
			}
		}
		return strings.Join(parts, "  ")
	}
	lines := []string{t.Bold.Render("results") + t.Dim.Render(" · mean ± 95% CI over seeds · seeds done/planned"), t.Dim.Render(line(cells[0]))}
	for i, r := range rows {
		if len(lines) == h-1 && i < len(rows)-1 {
			lines = append(lines, t.Dim.Render(fmt.Sprintf("… %d more", len(rows)-i)))
			break
		}
		l := line(cells[i+1])
		if r.failed > 0 {
			l += " " + t.Err.Render(fmt.Sprintf("%d failed", r.failed))
		}
		lines = append(lines, l)
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// chooseView is the directory prompt and the sweeps found under the
// runs root, all but the footer.
func (s *sweepScreen) chooseView() string {
	t, w := s.theme, s.w
	right := footer(t, s.ShortHelp()[2:]) + " "
	lines := []string{withRight(t.Title.Render(" mkbench ")+t.Dim.Render("│ ")+"watch a sweep", right, w), "",
		t.Bold.Render("  Sweep directory"), "  " + s.input.View()}
	if s.chooseErr != "" {
		lines = append(lines, "  "+t.Err.Render(s.chooseErr))
	} else {
		lines = append(lines, t.Dim.Render("  enter watches it, wherever its units run (here or on Slurm)"))
	}
	lines = append(lines, "")
	if len(s.found) == 0 {
		lines = append(lines, t.Dim.Render("  no sweeps under "+s.root+" yet: mkbench sweep run FILE starts one"))
	} else {
		lines = append(lines, t.Bold.Render("  Sweeps under "+s.root)+t.Dim.Render(", newest first (↑/↓)"))
		dirW := 0
		for _, f := range s.found {
			dirW = max(dirW, ansi.StringWidthWc(f.dir))
		}
		room := max(s.h-1-len(lines), 1)
		s.pick = s.pick.Len(len(s.found)).Height(room)
		from, to := s.pick.Visible()
		for i := from; i < to; i++ {
			f := s.found[i]
			lead := "    "
			if i == s.pick.At() && s.input.Value() == f.dir {
				lead = "  " + t.Key.Render("▸") + " "
			}
			lines = append(lines, lead+pad(f.dir, dirW)+t.Dim.Render("  "+f.mod.Format("2006-01-02 15:04")))
		}
	}
	return block(strings.Join(lines, "\n"), w, s.h-1)
}

// pad is s cut or padded to w columns; s holds no escapes.
func pad(s string, w int) string {
	n := ansi.StringWidthWc(s)
	if n > w {
		return ansi.TruncateWc(s, w, "…")
	}
	return s + strings.Repeat(" ", w-n)
}

func iterText(u sweep.UnitStatus) string {
	if u.Iters == 0 {
		return count(u.Iter)
	}
	return count(u.Iter) + "/" + count(u.Iters)
}

func optNum(v *float64) string {
	if v == nil {
		return "–"
	}
	return num(*v)
}

// evalText is a final metric: accuracy in percent, else the value, with
// the metric's name when named.
func evalText(e *engine.EvalResult, named bool) string {
	if e == nil {
		return "–"
	}
	if e.Metric == "accuracy" {
		return fmt.Sprintf("%.2f%% ± %.2f", 100*e.Mean, 100*e.CI95)
	}
	s := fmt.Sprintf("%.4f ± %.4f", e.Mean, e.CI95)
	if named {
		s = e.Metric + " " + s
	}
	return s
}
