package presets

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

// ParseSet parses a value by its key's kind; Overrides is a flag.Value.
func TestParseSet(t *testing.T) {
	for _, tc := range []struct {
		in   string
		key  string
		v    any
		want string // error substring; "" for none
	}{
		{"lr=0.0005", "lr", 0.0005, ""},
		{"clip-norm=1", "clip_norm", 1.0, ""},
		{"bases=256", "bases", 256, ""},
		{"optimizer=sgd", "optimizer", "sgd", ""},
		{"embed_hidden=64, 64", "embed_hidden", []int{64, 64}, ""},
		{"lrr=1", "", nil, `unknown setting "lrr" (settings: iters, seed,`},
		{"lr=fast", "lr", nil, "lr=fast: want a number"},
		{"lr=NaN", "lr", nil, "lr=NaN: want a number"},
		{"bases=1.5", "bases", nil, "bases=1.5: want a whole number"},
		{"embed_hidden=64,", "embed_hidden", nil, "want a comma-separated list"},
		{"optimizer=", "optimizer", nil, "want a word"},
		{"lr", "", nil, "is not key=value"},
	} {
		k, v, err := ParseSet(tc.in)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) || k != tc.key {
				t.Errorf("ParseSet(%q) = %q, %v, %v; want key %q and an error with %q", tc.in, k, v, err, tc.key, tc.want)
			}
			continue
		}
		if err != nil || k != tc.key || !reflect.DeepEqual(v, tc.v) {
			t.Errorf("ParseSet(%q) = %q, %#v, %v; want %q, %#v", tc.in, k, v, err, tc.key, tc.v)
		}
	}
	if _, _, err := ParseSet("lrr=1"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v is not ErrUnknownKey", err)
	}

	ov := Overrides{}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(ov, "set", "")
	if err := fs.Parse([]string{"--set", "lr=0.01", "--set", "meta_batch=4"}); err != nil {
		t.Fatal(err)
	}
	if ov.String() != "lr=0.01 meta_batch=4" {
		t.Errorf("Overrides after --set: %s", ov)
	}
	if err := ov.Set("lr=0.02"); err == nil {
		t.Error("setting lr twice is not an error")
	}
	_, cfg, err := Spec{Preset: "sine-5shot", Overrides: ov}.Config()
	if err != nil || cfg.LR != 0.01 || cfg.MetaBatch != 4 {
		t.Errorf("Config with the overrides: %v, lr %g, meta_batch %d", err, cfg.LR, cfg.MetaBatch)
	}
}
