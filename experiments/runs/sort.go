package runs

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/internal/runstate"
)

// SortKeys are the columns runs sort by, in the table's order.
var SortKeys = []string{"run", "preset", "variant", "seed", "iter", "state", "metric", "time", "age"}

// Sort orders rs by key (SortKeys), ties by directory; desc reverses.
// Groups are kept together, in Groups' order: sorting orders the runs
// within each.
func Sort(rs []Run, key string, desc bool) error {
	less, ok := compare[key]
	if !ok {
		return fmt.Errorf("runs: cannot sort by %q; the keys are %s", key, strings.Join(SortKeys, ", "))
	}
	order := map[string]int{}
	for i, g := range Groups(rs) {
		order[g] = i
	}
	slices.SortStableFunc(rs, func(a, b Run) int {
		if c := cmp.Compare(order[a.Group], order[b.Group]); c != 0 {
			return c
		}
		c := less(a, b)
		if desc {
			c = -c
		}
		if c == 0 {
			c = cmp.Compare(a.Rel, b.Rel)
		}
		return c
	})
	return nil
}

// metricOf is a run's metric for sorting; a run without one sorts below
// every run with one.
func metricOf(r Run) float64 {
	if r.Eval == nil {
		return math.Inf(-1)
	}
	return r.Eval.Mean
}

var compare = map[string]func(a, b Run) int{
	"run":     func(a, b Run) int { return cmp.Compare(a.Rel, b.Rel) },
	"preset":  func(a, b Run) int { return cmp.Compare(a.Preset, b.Preset) },
	"variant": func(a, b Run) int { return cmp.Compare(a.Variant, b.Variant) },
	"seed":    func(a, b Run) int { return cmp.Compare(a.Seed, b.Seed) },
	"iter":    func(a, b Run) int { return cmp.Compare(a.Iter, b.Iter) },
	"state":   func(a, b Run) int { return cmp.Compare(a.State, b.State) },
	"metric":  func(a, b Run) int { return cmp.Compare(metricOf(a), metricOf(b)) },
	"time":    func(a, b Run) int { return cmp.Compare(a.TrainSeconds, b.TrainSeconds) },
	// Age: the newest first when ascending, as "age" grows downwards.
	"age": func(a, b Run) int { return b.Modified.Compare(a.Modified) },
}

// Filter keeps the runs whose directory, group, preset, variant or state
// contain text (case-insensitively); every word of text must match.
func Filter(rs []Run, text string) []Run {
	words := strings.Fields(strings.ToLower(text))
	if len(words) == 0 {
		return rs
	}
	var out []Run
	for _, r := range rs {
		// A state's older words find it too ("interrupted": stopped).
		hay := strings.ToLower(strings.Join(append([]string{r.Rel, r.Group, r.Kind, r.Preset, r.Variant, fmt.Sprint(r.Seed), r.Device},
			runstate.State(r.State).Words()...), " "))
		all := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				all = false
				break
			}
		}
		if all {
			out = append(out, r)
		}
	}
	return out
}
