package presets

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzSpecConfig builds configs from a preset, a variant and overrides
// decoded from an arbitrary JSON object (as a sweep file or config.json
// would supply them: numbers as float64, lists as []any). Spec.Config must
// never panic; an error names the preset, the variant or a key, wrapping
// ErrUnknownKey or ErrUnusedKey where that is the fault; a config it
// returns validates, and the same Spec gives the same config again without
// changing the preset.
func FuzzSpecConfig(f *testing.F) {
	f.Add(uint8(0), "", []byte(`{}`))
	f.Add(uint8(1), "metakernel", []byte(`{"iters": 20, "seed": 7, "embed_hidden": [8, 8], "bases": 16, "lr": 0.01}`))
	f.Add(uint8(3), "vrf+cnf", []byte(`{"way": 20, "shot": 5, "conv_filters": 8, "val-every": 100, "val_tasks": 10}`))
	f.Add(uint8(4), "rbf", []byte(`{"way": 1e300, "flow_layers": 2, "optimizer": "sgd", "momentum": 0.5}`))
	f.Add(uint8(2), "rff", []byte(`{"embed_hidden": [1, -1, 1.5], "kl_weight": -1, "nope": 1}`))
	f.Add(uint8(5), "vrf+ctx", []byte(`{"seed": 18446744073709551615, "iters": -3, "lr": "fast", "bases": [1]}`))
	f.Add(uint8(9), "metakernel", []byte(`{"clip_norm": 1e308, "lambda_init": 5e-324, "checkpoint_sec": 0, "eval_query": 2}`))
	names := make([]string, 0, len(all))
	for _, p := range All() {
		names = append(names, p.Name)
	}
	f.Fuzz(func(t *testing.T, pi uint8, variant string, raw []byte) {
		var ov map[string]any
		if json.Unmarshal(raw, &ov) != nil {
			return
		}
		name := "no-such-preset"
		if int(pi) < len(names) {
			name = names[pi]
		}
		before, _ := Get(name)
		s := Spec{Preset: name, Variant: variant, Overrides: ov}
		p, cfg, err := s.Config()
		if after, _ := Get(name); !reflect.DeepEqual(before, after) {
			t.Fatalf("Spec.Config changed preset %s", name)
		}
		if err != nil {
			msg := err.Error()
			// Names appear as they are or quoted (%q).
			names := func(s string) bool {
				return strings.Contains(msg, s) || strings.Contains(msg, strconv.Quote(s))
			}
			keys := false
			for k := range ov {
				keys = keys || names(k)
			}
			if !names(name) && !names(variant) && !keys && !strings.HasPrefix(msg, "engine: invalid config: ") {
				t.Fatalf("error %q names neither the preset, the variant nor a key", msg)
			}
			for k := range ov {
				known := slices.ContainsFunc(OverrideKeys(), func(o OverrideKey) bool { return o.Key == strings.ReplaceAll(k, "-", "_") })
				if !known && errors.Is(err, ErrUnusedKey) && strings.Contains(msg, `"`+k+`"`) {
					t.Fatalf("unknown key %q reported as unused: %v", k, err)
				}
			}
			return
		}
		if p.Name != name {
			t.Fatalf("asked for %s, got %s", name, p.Name)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Spec.Config returned an invalid config: %v", err)
		}
		for k := range ov {
			if !slices.ContainsFunc(OverrideKeys(), func(o OverrideKey) bool { return o.Key == strings.ReplaceAll(k, "-", "_") }) {
				t.Fatalf("unknown key %q accepted", k)
			}
		}
		_, again, err := s.Config()
		if err != nil || !reflect.DeepEqual(again, cfg) {
			t.Fatalf("the same Spec gives another config (%v)", err)
		}
	})
}
