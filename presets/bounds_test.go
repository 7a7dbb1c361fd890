package presets

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
)

// A size past its ceiling, from --set or a sweep file (eval_tasks 10¹¹,
// whose per-task results alone are 800 GB), is refused by the config
// every command builds before training, in one line naming the setting
// as it is typed; the help of each bounded setting says its ceiling.
func TestSizesRefusedBeforeTraining(t *testing.T) {
	for _, c := range []struct {
		preset, key string
		v           any
	}{
		{"omniglot-5w1s", "eval_tasks", 1e11},
		{"omniglot-5w1s", "val_tasks", int64(1e11)},
		{"omniglot-5w1s", "eval_query", 1 << 40},
		{"omniglot-5w1s", "way", 1 << 40},
		{"omniglot-5w1s", "shot", 1 << 40},
		{"omniglot-5w1s", "meta_batch", 1e15},
		{"sine-5shot", "bases", 1 << 50},
		{"sine-5shot", "iters", 1e12},
		{"sine-5shot", "embed_hidden", []int{40, 1 << 40}},
		{"metadataset", "max_support", 1 << 40},
	} {
		_, _, err := CheckedConfig(Spec{Preset: c.preset, Overrides: Overrides{c.key: c.v}})
		want := c.key + " must be at most"
		if c.key == "max_support" {
			want = "shot must be at most" // max_support is the shot of varying episodes
		}
		if c.key == "embed_hidden" {
			want = "embed_hidden[1] must be at most"
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %s=%v: got %v, want one line saying %q", c.preset, c.key, c.v, err, want)
		}
	}
	help := map[string]string{}
	for _, k := range OverrideKeys() {
		help[k.Key] = k.Help
	}
	for key, n := range map[string]int{"eval_tasks": engine.MaxTasks, "bases": engine.MaxSize, "iters": engine.MaxIters, "flow_layers": engine.MaxLayers} {
		if !strings.Contains(help[key], "at most ") || !strings.Contains(help[key], strconv.Itoa(n)) {
			t.Errorf("%s's help %q does not say its ceiling %d", key, help[key], n)
		}
	}
}
