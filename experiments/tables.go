package experiments

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// lowerIsBetter reports whether smaller values of metric are better.
func lowerIsBetter(metric string) bool { return metric != "accuracy" }

// fmtValue formats a metric value the way the paper reports it: accuracy
// in percent, MSE with three decimals.
func fmtValue(metric string, v float64) string {
	if metric == "accuracy" {
		return strconv.FormatFloat(100*v, 'f', 2, 64)
	}
	if v != 0 && math.Abs(v) < 0.01 {
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func fmtPM(metric string, mean, ci float64) string {
	return fmtValue(metric, mean) + " ± " + fmtValue(metric, ci)
}

// metricLabel names the metric with its unit for table headers and axes.
func metricLabel(metric string) string {
	if metric == "accuracy" {
		return "accuracy (%)"
	}
	return "MSE"
}

// VariantLabel is the row name the paper's tables use for a variant.
func VariantLabel(v string) string {
	switch v {
	case "rbf":
		return "RBF kernel"
	case "rff":
		return "RFFs"
	case "vrf":
		return "Variational RFFs"
	case "vrf+ctx":
		return "Variational RFFs & task context"
	case "vrf+cnf":
		return "Variational RFFs & flows"
	case "metakernel":
		return "MetaKernel (full model)"
	case MAML:
		return "MAML"
	}
	return v
}

// CSV renders results.csv: one row per point, per-seed values joined by
// ";" in seed order.
func (r *Results) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"experiment", "preset", "variant", "bases", "train_way", "train_shot", "way", "shot",
		"metric", "mean", "ci95", "ci_kind", "sd", "n_seeds", "seeds", "values", "eval_tasks", "eval_query",
		"train_seconds", "ms_per_iter", "iters", "run_dirs"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, p := range r.Points {
		var seeds, vals, iters, dirs []string
		for _, s := range p.Seeds {
			seeds = append(seeds, strconv.FormatUint(s.Seed, 10))
			vals = append(vals, g(s.Mean))
			iters = append(iters, strconv.Itoa(s.Iters))
			dirs = append(dirs, s.RunDir)
		}
		w.Write([]string{r.Experiment, r.Preset, p.Variant, strconv.Itoa(p.Bases), strconv.Itoa(p.TrainWay), strconv.Itoa(p.TrainShot),
			strconv.Itoa(p.Way), strconv.Itoa(p.Shot), p.Metric, g(p.Mean), g(p.CI95), p.CIKind, g(p.SD),
			strconv.Itoa(len(p.Seeds)), strings.Join(seeds, ";"), strings.Join(vals, ";"), strconv.Itoa(p.EvalTasks),
			strconv.Itoa(p.EvalQuery), g(p.TrainSeconds), g(p.MsPerIter), strings.Join(iters, ";"), strings.Join(dirs, ";")})
	}
	w.Flush()
	return b.Bytes()
}

// cell is one table entry; best marks it bold.
type cell struct {
	p    *Point
	best bool
}

// markBest bolds, as the paper does, the best value of a column and every
// other whose mean lies within the best one's 95% interval.
func markBest(cells []*cell) {
	var best *Point
	for _, c := range cells {
		if c == nil || c.p == nil {
			continue
		}
		if best == nil || (lowerIsBetter(c.p.Metric) && c.p.Mean < best.Mean) || (!lowerIsBetter(c.p.Metric) && c.p.Mean > best.Mean) {
			best = c.p
		}
	}
	for _, c := range cells {
		if c != nil && c.p != nil && best != nil && math.Abs(c.p.Mean-best.Mean) <= best.CI95 {
			c.best = true
		}
	}
}

func (c *cell) String() string {
	if c == nil || c.p == nil {
		return "–"
	}
	s := fmtPM(c.p.Metric, c.p.Mean, c.p.CI95)
	if c.best {
		s = "**" + s + "**"
	}
	return s
}

// Markdown renders results.md: the experiment's table in the shape of the
// paper's, the checks of the paper's claims where there are any, every
// point in detail, and the figures.
func (r *Results) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s: %s\n\n", r.Experiment, r.Preset)
	iters := "the preset's"
	if r.Iters > 0 {
		iters = strconv.Itoa(r.Iters)
	}
	fmt.Fprintf(&b, "%s, %s iterations per run, %s; evaluation on %d tasks × %d query points", r.Source, iters, plural(len(r.seeds()), "seed")+" "+seedList(r.seeds()), r.EvalTasks, r.EvalQuery)
	if r.Metric == "accuracy" {
		b.WriteString(" per class")
	}
	fmt.Fprintf(&b, ", predictions averaged over %d %s.", r.EvalSamples, plural(r.EvalSamples, "draw")+" of ω")
	if r.Options.Minutes > 0 {
		fmt.Fprintf(&b, " Training budget %.4g minutes per run.", r.Options.Minutes)
	}
	if r.Options.FromRun != "" {
		fmt.Fprintf(&b, " Model from `%s`.", r.Options.FromRun)
	}
	b.WriteString(" Values: mean ± 95% interval — over evaluation tasks with one seed, over seeds (Student t) with several; bold: the best and any within its interval.")
	if !r.Complete {
		b.WriteString(" **Incomplete**: some runs have not finished (resume the experiment).")
	}
	b.WriteString("\n\n")
	switch r.Experiment {
	case Ablation:
		r.ablationTable(&b)
	case Efficiency:
		r.gridTable(&b, "D", func(p *Point) (int, string) { return p.Bases, p.Variant }, r.Options.Variants)
	case Shots:
		r.shotsTable(&b)
	case Versatility:
		r.versatilityTables(&b)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("## All points\n\n")
	b.WriteString("| variant | D | train way/shot | eval way/shot | " + metricLabel(r.Metric) + " | interval | per seed | eval tasks × query | train s | ms/iter | run |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Points {
		var per, dirs []string
		for _, s := range p.Seeds {
			per = append(per, fmt.Sprintf("s%d: %s", s.Seed, fmtValue(p.Metric, s.Mean)))
			dirs = append(dirs, "`"+s.RunDir+"`")
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %d × %d | %.1f | %.2f | %s |\n", p.Variant, p.Bases,
			WayShot(p.TrainWay, p.TrainShot), WayShot(p.Way, p.Shot), fmtPM(p.Metric, p.Mean, p.CI95), p.CIKind,
			strings.Join(per, ", "), p.EvalTasks, p.EvalQuery, p.TrainSeconds, p.MsPerIter, strings.Join(dirs, " "))
	}
	if len(r.Figures) > 0 {
		b.WriteString("\n## Figures\n\n")
		for _, f := range r.Figures {
			if strings.HasSuffix(f, ".png") {
				name := strings.TrimSuffix(f[strings.LastIndex(f, "/")+1:], ".png")
				fmt.Fprintf(&b, "![%s](%s) (also [SVG](%s))\n\n", name, f, strings.TrimSuffix(f, ".png")+".svg")
			}
		}
	}
	return b.Bytes()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func seedList(s []uint64) string {
	var out []string
	for _, v := range s {
		out = append(out, strconv.FormatUint(v, 10))
	}
	return strings.Join(out, ",")
}

func (r *Results) ablationTable(b *bytes.Buffer) {
	var cells []*cell
	for i := range r.Points {
		cells = append(cells, &cell{p: &r.Points[i]})
	}
	markBest(cells)
	col := r.Preset
	if len(r.Points) > 0 {
		col = fmt.Sprintf("%s (%s)", r.Preset, WayShot(r.Points[0].Way, r.Points[0].Shot))
	}
	fmt.Fprintf(b, "| method | variant | %s: %s | per seed | train s | ms/iter |\n|---|---|---|---|---|---|\n", col, metricLabel(r.Metric))
	for i, c := range cells {
		p := &r.Points[i]
		var per []string
		for _, s := range p.Seeds {
			per = append(per, fmtValue(p.Metric, s.Mean))
		}
		fmt.Fprintf(b, "| %s | `%s` | %s | %s | %.1f | %.2f |\n", VariantLabel(p.Variant), p.Variant, c, strings.Join(per, ", "), p.TrainSeconds, p.MsPerIter)
	}
	b.WriteString("\n")
	for _, line := range r.AblationChecks() {
		fmt.Fprintf(b, "- %s\n", line)
	}
	b.WriteString("\n")
}

// AblationChecks compares the ablation's points with the paper's claims:
// variational features beat the fixed kernels, task context improves on
// them, and flows improve further. Each line says whether the claim holds
// here and whether the two 95% intervals separate.
func (r *Results) AblationChecks() []string {
	get := func(v string) *Point {
		for i := range r.Points {
			if r.Points[i].Variant == v {
				return &r.Points[i]
			}
		}
		return nil
	}
	var out []string
	claim := func(better, worse, why string) {
		a, w := get(better), get(worse)
		if a == nil || w == nil {
			return
		}
		holds := a.Mean < w.Mean
		if !lowerIsBetter(a.Metric) {
			holds = a.Mean > w.Mean
		}
		verdict := "holds"
		if !holds {
			verdict = "does not hold"
		}
		sep := "intervals overlap"
		if math.Abs(a.Mean-w.Mean) > a.CI95+w.CI95 {
			sep = "intervals separate"
		}
		out = append(out, fmt.Sprintf("`%s` better than `%s` (%s): %s (%s vs %s, %s)", better, worse, why, verdict,
			fmtValue(a.Metric, a.Mean), fmtValue(w.Metric, w.Mean), sep))
	}
	claim("rff", "rbf", "random Fourier features vs RBF")
	claim("vrf", "rbf", "learned vs fixed kernel")
	claim("vrf", "rff", "learned vs fixed spectral distribution")
	claim("vrf+ctx", "vrf", "task context")
	claim("vrf+cnf", "vrf", "flows")
	claim("metakernel", "vrf+ctx", "flows on top of context")
	claim("metakernel", MAML, "the paper's regression comparison")
	if len(r.Points) > 1 {
		var order []string
		pts := slices.Clone(r.Points)
		slices.SortStableFunc(pts, func(a, b Point) int {
			if lowerIsBetter(a.Metric) {
				return cmpFloat(a.Mean, b.Mean)
			}
			return cmpFloat(b.Mean, a.Mean)
		})
		for _, p := range pts {
			order = append(order, "`"+p.Variant+"`")
		}
		out = append([]string{"Best to worst: " + strings.Join(order, ", ") + "."}, out...)
	}
	return out
}

func cmpFloat(a, b float64) int { return cmp.Compare(a, b) }

// gridTable renders rows × columns of points: row values (ints) down,
// column names across, in the order given. Bold compares the columns
// within a row (which kernel wins at this D).
func (r *Results) gridTable(b *bytes.Buffer, rowName string, key func(*Point) (int, string), cols []string) {
	var rows []int
	at := map[[2]string]*cell{}
	for i := range r.Points {
		p := &r.Points[i]
		row, col := key(p)
		if !slices.Contains(rows, row) {
			rows = append(rows, row)
		}
		at[[2]string{strconv.Itoa(row), col}] = &cell{p: p}
	}
	for _, row := range rows {
		var line []*cell
		for _, c := range cols {
			line = append(line, at[[2]string{strconv.Itoa(row), c}])
		}
		markBest(line)
	}
	fmt.Fprintf(b, "| %s |", rowName)
	for _, c := range cols {
		fmt.Fprintf(b, " `%s`: %s |", c, metricLabel(r.Metric))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, row := range rows {
		fmt.Fprintf(b, "| %d |", row)
		for _, c := range cols {
			fmt.Fprintf(b, " %s |", at[[2]string{strconv.Itoa(row), c}])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// shotsTable is the regression comparison: variants down, shots across,
// best per shot in bold. It needs a point for its header (the way), so an
// experiment stopped before its first run finished has none yet.
func (r *Results) shotsTable(b *bytes.Buffer) {
	if len(r.Points) == 0 {
		return
	}
	shots := r.Options.Shots
	at := map[string]map[int]*cell{}
	for i := range r.Points {
		p := &r.Points[i]
		if at[p.Variant] == nil {
			at[p.Variant] = map[int]*cell{}
		}
		at[p.Variant][p.Shot] = &cell{p: p}
	}
	for _, k := range shots {
		var col []*cell
		for _, v := range r.Options.Variants {
			col = append(col, at[v][k])
		}
		markBest(col)
	}
	b.WriteString("| method | variant |")
	for _, k := range shots {
		fmt.Fprintf(b, " %s: %s |", WayShot(r.Points[0].Way, k), metricLabel(r.Metric))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(shots)) + "\n")
	for _, v := range r.Options.Variants {
		fmt.Fprintf(b, "| %s | `%s` |", VariantLabel(v), v)
		for _, k := range shots {
			fmt.Fprintf(b, " %s |", at[v][k])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	// The paper's claim: every MetaKernel variant beats MAML at every shot.
	for _, k := range shots {
		m := at[MAML][k]
		if m == nil {
			continue
		}
		var beat, not []string
		for _, v := range r.Options.Variants {
			if c := at[v][k]; v != MAML && c != nil {
				if (c.p.Mean < m.p.Mean) == lowerIsBetter(c.p.Metric) {
					beat = append(beat, "`"+v+"`")
				} else {
					not = append(not, "`"+v+"`")
				}
			}
		}
		line := fmt.Sprintf("- %d-shot: better than MAML: %s", k, strings.Join(beat, ", "))
		if len(beat) == 0 {
			line = fmt.Sprintf("- %d-shot: better than MAML: none", k)
		}
		if len(not) > 0 {
			line += "; not better: " + strings.Join(not, ", ")
		}
		b.WriteString(line + "\n")
	}
	if at[MAML] != nil {
		b.WriteString("\n")
	}
}

// versatilityTables: per trained model, evaluation shots down and ways
// across (classification), or variants down and shots across
// (regression); † marks the setting the model was trained at.
func (r *Results) versatilityTables(b *bytes.Buffer) {
	if len(r.Points) == 0 {
		return
	}
	if r.Metric != "accuracy" {
		shots := r.Options.Shots
		fmt.Fprintf(b, "| model | trained at |")
		for _, k := range shots {
			fmt.Fprintf(b, " %d-shot: MSE |", k)
		}
		b.WriteString("\n|---|---|" + strings.Repeat("---|", len(shots)) + "\n")
		for _, v := range variantsOf(r.Points) {
			var tr int
			row := map[int]*Point{}
			for i := range r.Points {
				if p := &r.Points[i]; p.Variant == v {
					row[p.Shot], tr = p, p.TrainShot
				}
			}
			fmt.Fprintf(b, "| `%s` | %d-shot |", v, tr)
			for _, k := range shots {
				s := (&cell{p: row[k]}).String()
				if row[k] != nil && k == tr {
					s += " †"
				}
				fmt.Fprintf(b, " %s |", s)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n† the shot the model was trained at.\n\n")
		return
	}
	for _, v := range variantsOf(r.Points) {
		var tw, ts int
		at := map[[2]int]*Point{}
		var ways, shots []int
		for i := range r.Points {
			p := &r.Points[i]
			if p.Variant != v {
				continue
			}
			tw, ts = p.TrainWay, p.TrainShot
			at[[2]int{p.Way, p.Shot}] = p
			if !slices.Contains(ways, p.Way) {
				ways = append(ways, p.Way)
			}
			if !slices.Contains(shots, p.Shot) {
				shots = append(shots, p.Shot)
			}
		}
		slices.Sort(ways)
		slices.Sort(shots)
		fmt.Fprintf(b, "`%s` trained %s, tested N-way k-shot (accuracy %%):\n\n| k \\ N |", v, WayShot(tw, ts))
		for _, w := range ways {
			fmt.Fprintf(b, " %d-way |", w)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(ways)) + "\n")
		for _, k := range shots {
			fmt.Fprintf(b, "| %d-shot |", k)
			for _, w := range ways {
				s := (&cell{p: at[[2]int{w, k}]}).String()
				if at[[2]int{w, k}] != nil && w == tw && k == ts {
					s += " †"
				}
				fmt.Fprintf(b, " %s |", s)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n† the setting the model was trained at.\n\n")
	}
}
