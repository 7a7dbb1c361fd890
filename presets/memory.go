package presets

import (
	"errors"
	"fmt"
	"reflect"
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
		switch {
		case c.Conv != nil:
			return &c.Conv.Height
		case c.ResNet != nil:
			return &c.ResNet.Height
		}
		return nil
	}},
	{"image width", 1, func(c *engine.Config) *int {
		switch {
		case c.Conv != nil:
			return &c.Conv.Width
		case c.ResNet != nil:
			return &c.ResNet.Width
		}
		return nil
	}},
}

// deviceMemory is the device the models built now use and its memory
// (engine.DeviceMemory); tests put a small fake device in its place.
var deviceMemory = engine.DeviceMemory

// CheckMemory refuses cfg when est says it needs more memory than the
// machine has available (engine.MachineMemory), in one line with both
// figures and, for each size that alone can bring it down far enough, the
// largest value that fits, most oversized first. labels renames the sizes
// a command shows (eval's --way); nil shows them as settings. Where the
// machine's memory cannot be read nothing is refused.
//
// With a device in use (engine.UseDevice), cfg is refused in the same way
// when the backbone's share (engine.Config.DeviceMemoryEstimate, or
// EvalDeviceMemoryEstimate when est is the evaluation's) is more than the
// device's memory, naming the device: a run too large for the GPU stops
// here, not at its first pass or in the driver's out-of-memory error.
func CheckMemory(name, family string, cfg engine.Config, est func(engine.Config, int, int) uint64, labels map[string]string) error {
	need := func(c engine.Config) uint64 {
		in, out := Dims(family, c)
		return est(c, in, out) + DataBytes(family, c)
	}
	if avail := engine.MachineMemory(); avail > 0 {
		if total := need(cfg); total > avail {
			return refuseMemory(cfg, need, avail, labels, fmt.Sprintf("%s needs about %s of memory, more than the %s this machine has available",
				name, formatBytes(total), formatBytes(avail)), "bases, meta_batch, shot, query, eval_query")
		}
	}
	label, avail, ok := deviceMemory()
	if !ok || avail == 0 {
		return nil
	}
	devEst := engine.Config.DeviceMemoryEstimate
	if reflect.ValueOf(est).Pointer() == reflect.ValueOf(engine.Config.EvalMemoryEstimate).Pointer() {
		devEst = engine.Config.EvalDeviceMemoryEstimate
	}
	devNeed := func(c engine.Config) uint64 {
		in, out := Dims(family, c)
		return devEst(c, in, out)
	}
	if total := devNeed(cfg); total > avail {
		return refuseMemory(cfg, devNeed, avail, labels, fmt.Sprintf("%s needs about %s of device memory, more than the %s of %s",
			name, formatBytes(total), formatBytes(avail), label), "meta_batch, shot, query, eval_query, image size; or run on the CPU with --device cpu")
	}
	return nil
}

// refuseMemory is the refusal msg of cfg, which needs more than avail by
// need, with, for each size that alone can bring it down far enough, the
// largest value that fits, most oversized first; or, where none can,
// which to reduce (several).
func refuseMemory(cfg engine.Config, need func(engine.Config) uint64, avail uint64, labels map[string]string, msg, several string) error {
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
	if len(fits) == 0 {
		return errors.New(msg + "; no one size brought down is enough: reduce several (" + several + ")")
	}
	parts := make([]string, len(fits))
	for i, f := range fits {
		parts[i] = f.text
	}
	return fmt.Errorf("%s; the largest that fit, one size at a time: %s", msg, strings.Join(parts, ", "))
}

// cloneConfig copies c deeply: its Conv, ResNet and EmbedHidden are its
// own.
func cloneConfig(c engine.Config) engine.Config {
	if c.Conv != nil {
		conv := *c.Conv
		c.Conv = &conv
	}
	if c.ResNet != nil {
		res := *c.ResNet
		c.ResNet = &res
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
