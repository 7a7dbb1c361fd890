package sweep

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/internal/runfile"
)

// Results is a sweep's results.json: one row per preset, variant and grid
// point, its metric's mean over the finished seeds with the Student-t 95%
// interval across them (the evaluation's own interval when one seed).
type Results struct {
	Dir     string    `json:"dir"`
	Units   int       `json:"units"`
	Done    int       `json:"done"`
	Failed  int       `json:"failed"`
	Rows    []Row     `json:"rows"`
	Figures []string  `json:"figures,omitempty"`
	Updated time.Time `json:"updated"`
}

// Row is one preset × variant × grid point.
type Row struct {
	Preset  string      `json:"preset"`
	Variant string      `json:"variant"`
	Setting string      `json:"setting,omitempty"`
	Metric  string      `json:"metric"`
	Mean    float64     `json:"mean"`
	SD      float64     `json:"sd"`   // across seeds
	CI95    float64     `json:"ci95"` // across seeds; the evaluation's with one seed
	Seeds   []SeedValue `json:"seeds"`
	Planned int         `json:"planned"` // units planned for the row; len(Seeds) are done
	// TrainSeconds and Iters are the mean over the seeds.
	TrainSeconds float64 `json:"train_seconds"`
	Iters        float64 `json:"iters"`
}

// SeedValue is one finished unit's result.
type SeedValue struct {
	Seed         uint64  `json:"seed"`
	Mean         float64 `json:"mean"`
	CI95         float64 `json:"ci95"`
	Tasks        int     `json:"tasks"`
	Iters        int     `json:"iters"`
	TrainSeconds float64 `json:"train_seconds"`
	Unit         string  `json:"unit"` // the run directory, relative to the sweep
}

// Report reads every unit of the sweep in dir and writes results.json,
// results.csv, results.md and one figure per preset under figures/. It
// reports what has finished so far; units still running or failed are
// counted, not waited for.
func Report(dir string) (*Results, error) {
	st, err := ReadStatus(dir)
	if err != nil {
		return nil, err
	}
	res := &Results{Dir: dir, Units: len(st.Units), Done: st.Counts[StateDone], Failed: st.Counts[StateFailed], Updated: time.Now().UTC()}
	index := map[string]int{}
	for _, us := range st.Units {
		key := us.Preset + "\x00" + us.Variant + "\x00" + us.Setting()
		i, ok := index[key]
		if !ok {
			i = len(res.Rows)
			index[key] = i
			res.Rows = append(res.Rows, Row{Preset: us.RecordedPreset(), Variant: us.Variant, Setting: us.Setting()})
		}
		r := &res.Rows[i]
		r.Planned++
		if us.State != StateDone || us.Eval == nil {
			continue
		}
		r.Metric = us.Eval.Metric
		r.Seeds = append(r.Seeds, SeedValue{Seed: us.Seed, Mean: us.Eval.Mean, CI95: us.Eval.CI95, Tasks: us.Eval.Tasks,
			Iters: us.Iters, TrainSeconds: us.TrainSeconds, Unit: us.Dir})
	}
	for i := range res.Rows {
		r := &res.Rows[i]
		var means []float64
		for _, s := range r.Seeds {
			means = append(means, s.Mean)
			r.TrainSeconds += s.TrainSeconds / float64(len(r.Seeds))
			r.Iters += float64(s.Iters) / float64(len(r.Seeds))
		}
		r.Mean, r.SD, r.CI95 = experiments.SeedStats(means)
		if len(r.Seeds) == 1 {
			r.CI95 = r.Seeds[0].CI95
		}
	}
	if res.Figures, err = res.figures(dir); err != nil {
		return res, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{experiments.FileCSV, res.CSV()}, {experiments.FileMarkdown, res.Markdown()}} {
		if err := runfile.WriteAtomic(filepath.Join(dir, f.name), f.data, runfile.Shared); err != nil {
			return res, err
		}
	}
	return res, runfile.WriteJSON(filepath.Join(dir, experiments.FileResults), res, runfile.Shared)
}

// figures draws one figure per preset that has finished units.
func (res *Results) figures(dir string) ([]string, error) {
	var out []string
	byPreset := map[string][]experiments.Group{}
	var order []string
	metric := map[string]string{}
	for _, r := range res.Rows {
		if len(r.Seeds) == 0 {
			continue
		}
		if _, ok := byPreset[r.Preset]; !ok {
			order = append(order, r.Preset)
		}
		g := experiments.Group{Variant: r.Variant, Setting: r.Setting, Mean: r.Mean, CI95: r.CI95}
		for _, s := range r.Seeds {
			g.Runs = append(g.Runs, filepath.Join(dir, s.Unit))
		}
		byPreset[r.Preset] = append(byPreset[r.Preset], g)
		metric[r.Preset] = r.Metric
	}
	for _, p := range order {
		base := filepath.Join(dir, experiments.DirFigures, "sweep-"+SafeName(p))
		files, err := experiments.GroupsFigure(base, fmt.Sprintf("sweep %s: %s", filepath.Base(dir), p), metric[p], byPreset[p])
		if err != nil {
			return out, fmt.Errorf("sweep: drawing %s: %w", base, err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(dir, f)
			out = append(out, rel)
		}
	}
	return out, nil
}

// CSV is one line per finished unit: preset, variant, setting, seed and
// its result, the tidy form for a spreadsheet or pandas.
func (res *Results) CSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"preset", "variant", "setting", "seed", "metric", "mean", "ci95", "tasks", "iters", "train_seconds", "unit"})
	for _, r := range res.Rows {
		for _, s := range r.Seeds {
			w.Write([]string{r.Preset, r.Variant, r.Setting, strconv.FormatUint(s.Seed, 10), r.Metric,
				strconv.FormatFloat(s.Mean, 'g', -1, 64), strconv.FormatFloat(s.CI95, 'g', -1, 64), strconv.Itoa(s.Tasks),
				strconv.Itoa(s.Iters), strconv.FormatFloat(s.TrainSeconds, 'f', 2, 64), s.Unit})
		}
	}
	w.Flush()
	return b.Bytes()
}

// Markdown is the results table: mean ± 95% interval per row, how many
// seeds are in, and the training time.
func (res *Results) Markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Sweep %s\n\n", filepath.Base(res.Dir))
	fmt.Fprintf(&b, "%d of %d units done", res.Done, res.Units)
	if res.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed (see mkbench sweep status)", res.Failed)
	}
	b.WriteString(". Mean ± 95% interval over seeds (with one seed: over the evaluation tasks).\n\n")
	b.WriteString("| preset | variant | setting | result | seeds | iterations | training time |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res.Rows {
		val := "–"
		if len(r.Seeds) > 0 {
			val = formatMetric(r.Metric, r.Mean, r.CI95)
		}
		setting := r.Setting
		if setting == "" {
			setting = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d/%d | %.0f | %s |\n", r.Preset, r.Variant, setting, val, len(r.Seeds), r.Planned, r.Iters,
			(time.Duration(r.TrainSeconds) * time.Second).String())
	}
	if len(res.Figures) > 0 {
		b.WriteString("\n")
		for _, f := range res.Figures {
			if strings.HasSuffix(f, ".png") {
				fmt.Fprintf(&b, "![%s](%s)\n", filepath.Base(f), filepath.ToSlash(f))
			}
		}
	}
	return b.Bytes()
}

func formatMetric(metric string, mean, ci float64) string {
	if metric == "accuracy" {
		return fmt.Sprintf("%.2f%% ± %.2f", 100*mean, 100*ci)
	}
	return fmt.Sprintf("%s %.4f ± %.4f", metric, mean, ci)
}
