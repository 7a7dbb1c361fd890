package runs

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// Curves are a run's learning curves, as its logs hold them.
type Curves struct {
	Metrics []engine.MetricsRow
	Val     []engine.ValRow
	// Seconds[i] is the training time at Metrics[i]. metrics.jsonl keeps
	// no clock (equal seeds give equal bytes), so it is interpolated
	// between the validations' and the summary's times, linearly in the
	// iteration; nil when the run recorded no time at all.
	Seconds []float64
}

// ReadCurves reads run directory dir's curves.
func ReadCurves(dir string) (Curves, error) {
	var c Curves
	var err error
	if c.Metrics, err = runfile.Read[engine.MetricsRow](filepath.Join(dir, engine.FileMetrics)); err != nil {
		return c, err
	}
	if c.Val, err = runfile.Read[engine.ValRow](filepath.Join(dir, engine.FileVal)); err != nil {
		return c, err
	}
	// The clock's known points: the start, each validation, the end.
	xs, ys := []float64{0}, []float64{0}
	for _, v := range c.Val {
		xs, ys = append(xs, float64(v.Iter)), append(ys, v.TrainSeconds)
	}
	if sum, err := engine.ReadSummary(dir); err == nil && sum != nil && sum.TrainSeconds > 0 {
		xs, ys = append(xs, float64(sum.Iters)), append(ys, sum.TrainSeconds)
	}
	if len(xs) < 2 {
		return c, nil
	}
	c.Seconds = make([]float64, len(c.Metrics))
	for i, m := range c.Metrics {
		c.Seconds[i] = interpolate(xs, ys, float64(m.Iter))
	}
	return c, nil
}

// interpolate is the piecewise-linear function through (xs, ys), xs
// increasing, at x; past the last point it goes on at the last slope.
func interpolate(xs, ys []float64, x float64) float64 {
	j := sort.SearchFloat64s(xs, x)
	switch {
	case j < len(xs) && xs[j] == x:
		return ys[j]
	case j == 0:
		return ys[0]
	case j == len(xs):
		j = len(xs) - 1
	}
	x0, x1, y0, y1 := xs[j-1], xs[j], ys[j-1], ys[j]
	if x1 == x0 {
		return y1
	}
	return y0 + (y1-y0)*(x-x0)/(x1-x0)
}

// Diff is the settings that differ between configs, for a side-by-side
// table: keys (sorted, dotted for nested fields as presets.ConfigDiff
// names them) and vals[i][k], config i's value of keys[k] (as
// presets.ConfigDiff writes it: the field's zero where config i leaves it
// out, "" where it lacks the object holding it).
func Diff(cfgs []engine.Config) (keys []string, vals [][]string) {
	if len(cfgs) < 2 {
		return nil, nil
	}
	first := map[string]string{} // cfgs[0]'s values of the keys that differ somewhere
	diffs := make([]map[string]string, len(cfgs))
	for i, c := range cfgs[1:] {
		diffs[i+1] = kv(presets.ConfigDiff(cfgs[0], c))
		for k, v := range kv(presets.ConfigDiff(c, cfgs[0])) {
			first[k] = v
		}
		for k := range diffs[i+1] {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	vals = make([][]string, len(cfgs))
	for i := range cfgs {
		vals[i] = make([]string, len(keys))
		for k, key := range keys {
			v, ok := diffs[i][key]
			if !ok {
				v = first[key]
			}
			vals[i][k] = v
		}
	}
	return keys, vals
}

// kv splits presets.ConfigDiff's key=value lines.
func kv(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}
