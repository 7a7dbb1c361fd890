package presets

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mkbench/mkbench/engine"
)

// CheckedConfig is sp.Config, refusing a config that cannot fit in this
// machine's memory (CheckMemory): what every command and the workbench
// call before they allocate a model.
func CheckedConfig(sp Spec) (Preset, engine.Config, error) {
	p, cfg, err := sp.Config()
	if err != nil {
		return p, cfg, err
	}
	return p, cfg, CheckMemory(p.Name, p.Source, cfg, engine.Config.MemoryEstimate, nil)
}

// memSize is one size of a config that memory grows with.
type memSize struct {
	key string
	min int
	// field returns the setting in c, nil when c has none (way of a
	// regression task, the image size of an MLP).
	field func(c *engine.Config) *int
}

var memSizes = []memSize{
	{"bases", 1, func(c *engine.Config) *int { return &c.Bases }},
	{"way", 2, func(c *engine.Config) *int {
		if !c.Classify() {
			return nil
		}
		return &c.Way
	}},
	{"shot", 1, func(c *engine.Config) *int { return &c.Shot }},
	{"query", 1, func(c *engine.Config) *int { return &c.Query }},
	{"meta_batch", 1, func(c *engine.Config) *int { return &c.MetaBatch }},
	{"eval_query", 1, func(c *engine.Config) *int { return &c.EvalQuery }},
	{"eval_support_shift", 0, func(c *engine.Config) *int { return &c.EvalSupportShift }},
	{"eval_tasks", 1, func(c *engine.Config) *int { return &c.EvalTasks }},
	{"val_tasks", 1, func(c *engine.Config) *int { return &c.ValTasks }},
	{"image height", 1, func(c *engine.Config) *int {
		if c.Conv == nil {
			return nil
		}
		return &c.Conv.Height
	}},
	{"image width", 1, func(c *engine.Config) *int {
		if c.Conv == nil {
			return nil
		}
		return &c.Conv.Width
	}},
}

// CheckMemory refuses cfg when est says it needs more memory than the
// machine has available (engine.MachineMemory), in one line with both
// figures and, for each size that alone can bring it down far enough, the
// largest value that fits, most oversized first. labels renames the sizes
// a command shows (eval's --way); nil shows them as settings. Where the
// machine's memory cannot be read nothing is refused.
func CheckMemory(name, family string, cfg engine.Config, est func(engine.Config, int, int) uint64, labels map[string]string) error {
	avail := engine.MachineMemory()
	need := func(c engine.Config) uint64 {
		in, out := Dims(family, c)
		return est(c, in, out) + DataBytes(family, c)
	}
	total := need(cfg)
	if avail == 0 || total <= avail {
		return nil
	}
	type fit struct {
		text  string
		ratio float64
	}
	var fits []fit
	for _, s := range memSizes {
		label := s.key
		if labels != nil {
			if label = labels[s.key]; label == "" {
				continue
			}
		}
		c := cloneConfig(cfg)
		p := s.field(&c)
		if p == nil || *p <= s.min {
			continue
		}
		cur := *p
		// The largest value in [min, cur) that fits, by bisection.
		lo, hi := s.min-1, cur // need(lo+1…) unknown; need(hi) > avail
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			*p = mid
			if need(c) <= avail {
				lo = mid
			} else {
				hi = mid
			}
		}
		if lo >= s.min {
			fits = append(fits, fit{fmt.Sprintf("%s %d", label, lo), float64(cur) / float64(lo)})
		}
	}
	sort.SliceStable(fits, func(i, j int) bool { return fits[i].ratio > fits[j].ratio })
	msg := fmt.Sprintf("%s needs about %s of memory, more than the %s this machine has available", name, formatBytes(total), formatBytes(avail))
	if len(fits) == 0 {
		return errors.New(msg + "; no one size brought down is enough: reduce several (bases, meta_batch, shot, query, eval_query)")
	}
	parts := make([]string, len(fits))
	for i, f := range fits {
		parts[i] = f.text
	}
	return fmt.Errorf("%s; the largest that fit, one size at a time: %s", msg, strings.Join(parts, ", "))
}

// cloneConfig copies c deeply: its Conv and EmbedHidden are its own.
func cloneConfig(c engine.Config) engine.Config {
	if c.Conv != nil {
		conv := *c.Conv
		c.Conv = &conv
	}
	c.EmbedHidden = slices.Clone(c.EmbedHidden)
	return c
}

// formatBytes writes n in GiB or MiB.
func formatBytes(n uint64) string {
	switch {
	case n >= 1<<50:
		return fmt.Sprintf("%.3g PiB", float64(n)/(1<<50))
	case n >= 1<<40:
		return fmt.Sprintf("%.3g TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
