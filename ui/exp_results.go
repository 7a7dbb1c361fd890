package ui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/experiments"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The experiment's results as the screen shows them: a row per point of
// the experiment, and the table of those rows (beside or under the
// versatility heatmap, exp_heatmap.go). Like the dashboard's panes, the
// views are pure functions of their data and size.

// rowKey identifies a row: what the experiment varies.
type rowKey struct {
	Variant          string
	Bases, Way, Shot int
}

// rowKeyOf is the row a point of experiment kind belongs to.
func rowKeyOf(kind string, k experiments.PointKey) rowKey {
	switch kind {
	case experiments.Efficiency:
		return rowKey{Variant: k.Variant, Bases: k.Bases}
	case experiments.Shots:
		return rowKey{Variant: k.Variant, Shot: k.TrainShot}
	case experiments.Versatility:
		return rowKey{Variant: k.Variant, Way: k.Way, Shot: k.Shot}
	}
	return rowKey{Variant: k.Variant}
}

// expRow is one point of the experiment as the table shows it.
type expRow struct {
	rowKey
	Seeds  []experiments.SeedResult
	Status runstate.State // pending, running, evaluating, finished, failed or stopped
	Err    string
}

// planRows are the points of normalized options o, in plan order.
func planRows(o experiments.Options) []expRow {
	var rows []expRow
	add := func(k rowKey) { rows = append(rows, expRow{rowKey: k, Status: runstate.Pending}) }
	switch o.Experiment {
	case experiments.Ablation:
		for _, v := range o.Variants {
			add(rowKey{Variant: v})
		}
	case experiments.Efficiency:
		for _, d := range o.Bases {
			for _, v := range o.Variants {
				add(rowKey{Variant: v, Bases: d})
			}
		}
	case experiments.Shots:
		for _, k := range o.Shots {
			for _, v := range o.Variants {
				add(rowKey{Variant: v, Shot: k})
			}
		}
	case experiments.Versatility:
		for _, v := range o.Variants {
			for _, k := range o.Shots {
				if len(o.Ways) == 0 {
					add(rowKey{Variant: v, Shot: k})
				}
				for _, w := range o.Ways {
					add(rowKey{Variant: v, Way: w, Shot: k})
				}
			}
		}
	}
	return rows
}

// aggregate is the row's mean and 95% interval: the run's over its
// evaluation tasks with one seed, Student-t over the seeds with several
// (experiments.SeedStats, as results.json computes them).
func (r expRow) aggregate() (mean, ci float64, ok bool) {
	switch len(r.Seeds) {
	case 0:
		return 0, 0, false
	case 1:
		return r.Seeds[0].Mean, r.Seeds[0].CI95, true
	}
	means := make([]float64, len(r.Seeds))
	for i, s := range r.Seeds {
		means[i] = s.Mean
	}
	mean, _, ci = experiments.SeedStats(means)
	return mean, ci, true
}

// fmtMetric formats a value as the results tables do: accuracy in
// percent, MSE with four decimals.
func fmtMetric(metric string, v float64) string {
	if metric == "accuracy" {
		return strconv.FormatFloat(100*v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// expTableData is what the results table shows.
type expTableData struct {
	Kind   string // the experiment
	Metric string // "mse" or "accuracy"
	Seeds  int    // seeds per point
	Rows   []expRow
}

// expTable draws the results table at exactly w×h: one row per point,
// scrolled so that the first unfinished point is in view.
func expTable(t Theme, d expTableData, w, h int) string {
	if h <= 0 || w <= 0 {
		return block("", w, h)
	}
	metric := "MSE ± 95% CI"
	if d.Metric == "accuracy" {
		metric = "accuracy % ± 95% CI"
	}
	type col struct {
		name string
		w    int
	}
	cols := []col{{"variant", 12}}
	switch d.Kind {
	case experiments.Efficiency:
		cols = append(cols, col{"D", 6})
	case experiments.Shots:
		cols = append(cols, col{"shot", 5})
	case experiments.Versatility:
		if slices.ContainsFunc(d.Rows, func(r expRow) bool { return r.Way > 0 }) {
			cols = append(cols, col{"way", 5})
		}
		cols = append(cols, col{"shot", 5})
	}
	cols = append(cols, col{"seeds", 6}, col{metric, 21}, col{"train s", 8}, col{"status", 0})
	var head strings.Builder
	for _, c := range cols {
		if c.w > 0 {
			fmt.Fprintf(&head, "%-*s ", c.w, c.name)
		} else {
			head.WriteString(c.name)
		}
	}
	lines := []string{t.Bold.Render(head.String())}
	avail := h - 1
	first := slices.IndexFunc(d.Rows, func(r expRow) bool { return r.Status != runstate.Finished })
	start := 0
	if len(d.Rows) > avail && first >= avail-1 {
		start = min(first-(avail-2), len(d.Rows)-(avail-1))
	}
	more := 0
	for i := start; i < len(d.Rows); i++ {
		if len(lines) == h-1 && i < len(d.Rows)-1 {
			more = len(d.Rows) - i
			break
		}
		r := d.Rows[i]
		var sb strings.Builder
		for _, c := range cols {
			var v string
			switch c.name {
			case "variant":
				v = r.Variant
			case "D":
				v = strconv.Itoa(r.Bases)
			case "way":
				v = strconv.Itoa(r.Way)
			case "shot":
				v = strconv.Itoa(r.Shot)
			case "seeds":
				v = fmt.Sprintf("%d/%d", len(r.Seeds), d.Seeds)
			case metric:
				if m, ci, ok := r.aggregate(); ok {
					v = fmtMetric(d.Metric, m) + " ± " + fmtMetric(d.Metric, ci)
				} else {
					v = "–"
				}
			case "train s":
				v = "–"
				if len(r.Seeds) > 0 {
					var s float64
					for _, x := range r.Seeds {
						s += x.TrainSeconds
					}
					v = strconv.FormatFloat(s/float64(len(r.Seeds)), 'f', 1, 64)
				}
			}
			if c.w > 0 {
				fmt.Fprintf(&sb, "%-*s ", c.w, ansi.TruncateWc(v, c.w, "…"))
			}
		}
		st := string(r.Status)
		switch r.Status {
		case runstate.Finished:
		case runstate.Pending:
			st = t.Dim.Render(st)
		case runstate.Failed:
			st = t.Err.Render(st)
			if r.Err != "" {
				st += " " + t.Dim.Render(r.Err)
			}
		case runstate.Stopped:
			st = t.Warn.Render(st)
		default:
			st = t.Key.Render(st)
		}
		lines = append(lines, sb.String()+st)
	}
	if start > 0 {
		lines[0] += t.Dim.Render(fmt.Sprintf("  (%d above)", start))
	}
	if more > 0 {
		lines = append(lines, t.Dim.Render(fmt.Sprintf("… %d more", more)))
	}
	return block(strings.Join(lines, "\n"), w, h)
}

// expBody is the table, with the heatmap beside it (wide terminals) or
// above it for versatility; exactly w×h.
func expBody(t Theme, d expTableData, w, h int) string {
	if d.Kind != experiments.Versatility {
		return expTable(t, d, w, h)
	}
	variants := 0
	seen := map[string]bool{}
	ways := map[int]bool{}
	for _, r := range d.Rows {
		if !seen[r.Variant] {
			seen[r.Variant] = true
			variants++
		}
		ways[r.Way] = true
	}
	heatH := variants*(len(ways)+3) + 1
	shots := map[int]bool{}
	for _, r := range d.Rows {
		shots[r.Shot] = true
	}
	heatW := max(7+9*len(shots)+2, 56)
	if w >= 120 {
		tw := w - heatW - 2
		return joinH(expTable(t, d, tw, h), block("", 2, h), expHeatmap(t, d.Metric, d.Rows, heatW, h))
	}
	heatH = min(heatH, h/2)
	return expHeatmap(t, d.Metric, d.Rows, w, heatH) + "\n" + expTable(t, d, w, h-heatH)
}
