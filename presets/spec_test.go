package presets

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
)

// Spec.Config is a deep copy: changing one config never reaches the preset
// or another config.
func TestSpecConfigIsDeepCopy(t *testing.T) {
	_, a, err := Spec{Preset: "omniglot-5w1s"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	a.Conv.Filters = 1
	_, b, err := Spec{Preset: "omniglot-5w1s"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if b.Conv.Filters != 64 {
		t.Fatalf("a config's Conv is shared: %d filters", b.Conv.Filters)
	}
	_, s1, _ := Spec{Preset: "sine-5shot"}.Config()
	s1.EmbedHidden[0] = 7
	_, s2, _ := Spec{Preset: "sine-5shot"}.Config()
	if s2.EmbedHidden[0] != 40 {
		t.Fatalf("a config's EmbedHidden is shared: %v", s2.EmbedHidden)
	}
	ov := Overrides{"embed_hidden": []int{8, 8}}
	_, s3, _ := Spec{Preset: "sine-5shot", Overrides: ov}.Config()
	s3.EmbedHidden[0] = 9
	if ov["embed_hidden"].([]int)[0] != 8 {
		t.Fatal("the config shares the override's list")
	}
}

// The variant sets the model switches; flow variants keep the preset's
// number of coupling layers; overrides apply on top, whatever their order.
func TestSpecVariantsAndOverrides(t *testing.T) {
	for _, v := range []string{"rbf", "rff", "vrf", "vrf+ctx", "vrf+cnf", "metakernel"} {
		_, c, err := Spec{Preset: "sine-5shot", Variant: v}.Config()
		if err != nil {
			t.Fatal(err)
		}
		if c.Variant() != v {
			t.Errorf("variant %s gives %s", v, c.Variant())
		}
		if want := map[bool]int{true: 4, false: 0}[strings.HasSuffix(v, "cnf") || v == "metakernel"]; c.FlowLayers != want {
			t.Errorf("%s: %d flow layers, want %d", v, c.FlowLayers, want)
		}
	}
	p, c, err := Spec{Preset: "sine-5shot", Overrides: Overrides{
		"iters": 300, "seed": int64(7), "lr": 3e-4, "eval-tasks": 50, "embed_hidden": []any{16, 8}, "optimizer": "sgd",
	}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "sine-5shot" || c.Variant() != "metakernel" || c.Iters != 300 || c.Seed != 7 || c.LR != 3e-4 || c.EvalTasks != 50 ||
		!reflect.DeepEqual(c.EmbedHidden, []int{16, 8}) || c.Optimizer != "sgd" {
		t.Fatalf("overrides not applied: %+v", c)
	}
	_, d, _ := Spec{Preset: "sine-5shot"}.Config()
	if d.Iters != p.Config.Iters || d.Seed != p.Config.Seed {
		t.Fatal("no overrides must give the preset's settings")
	}
	_, o, err := Spec{Preset: "omniglot-5w1s", Overrides: Overrides{"conv_keep": 0.8, "conv_filters": 32, "train_shot": 5, "psi_weight_decay": 0.01, "gamma_init": 10}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if o.Conv.Keep != 0.8 || o.Conv.Filters != 32 || o.TrainShot != 5 || o.TrainingShot() != 5 || o.Shot != 1 || o.PsiWeightDecay != 0.01 || o.InitialGamma() != 10 {
		t.Errorf("omniglot overrides not applied: conv %+v, train_shot %d, shot %d", *o.Conv, o.TrainShot, o.Shot)
	}
	if g, _ := Get("omniglot-5w1s"); g.Config.Conv.Keep != 0.9 || g.Config.Conv.Filters != 64 {
		t.Errorf("overrides changed the preset's conv: %+v", *g.Config.Conv)
	}
	// With returns a copy.
	base := Overrides{"iters": 1}
	if ext := base.With("seed", 2); len(base) != 1 || len(ext) != 2 {
		t.Fatalf("With changed its receiver: %v %v", base, ext)
	}
}

// Each kind of bad spec gives one error naming what is wrong.
func TestSpecErrorsNameTheProblem(t *testing.T) {
	cases := []struct {
		spec Spec
		want string
		is   error
	}{
		{Spec{Preset: "sine-6shot"}, `unknown preset "sine-6shot"`, nil},
		{Spec{Preset: "sine-5shot", Variant: "metakernal"}, `unknown variant "metakernal"`, nil},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"bassses": 3}}, `"bassses"`, ErrUnknownKey},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"way": 5}}, `"way"`, ErrUnusedKey},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"val_tasks": 5}}, `"val_tasks"`, ErrUnusedKey},
		{Spec{Preset: "omniglot-5w1s", Overrides: Overrides{"embed_hidden": []int{8}}}, `"embed_hidden"`, ErrUnusedKey},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"iters": 2.5}}, "iters: want a whole number", nil},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"lr": "fast"}}, "lr: want a number", nil},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"embed_hidden": []any{8, "x"}}}, "embed_hidden: want a whole number", nil},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"iters": 0}}, "iters", nil},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"optimizer": "rmsprop"}}, "optimizer", nil},
		{Spec{Preset: "sine-5shot", Overrides: Overrides{"augment_shift": 2}}, `"augment_shift"`, ErrUnusedKey},
		{Spec{Preset: "omniglot-5w1s", Overrides: Overrides{"augment_shift": -1}}, "augment_shift must be ≥ 0 pixels", nil},
		{Spec{Preset: "omniglot-5w1s", Overrides: Overrides{"augment_shift": 28}}, "augment_shift 28 would shift a 28×28 image out of its frame: give at most 27", nil},
	}
	for _, tc := range cases {
		_, _, err := tc.spec.Config()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: want an error containing %q, got %v", tc.spec, tc.want, err)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%+v: want %v, got %v", tc.spec, tc.is, err)
		}
	}
}

// Every key OverrideKeys lists is accepted by some preset.
func TestOverrideKeysAreAccepted(t *testing.T) {
	for _, k := range OverrideKeys() {
		var v any
		switch k.Kind {
		case KindInt:
			v = 2
		case KindFloat:
			v = 0.5
		case KindString:
			v = "adam"
		case KindIntList:
			v = []int{8}
		}
		ok := false
		for _, p := range []string{"sine-5shot", "omniglot-5w1s", "metadataset"} {
			_, _, err := Spec{Preset: p, Overrides: Overrides{k.Key: v}}.Config()
			if !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrUnusedKey) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("key %q is listed but no preset accepts it", k.Key)
		}
	}
}

// Run and experiment directories are named by preset, variant, seed and
// time, and made on the spot: a name taken (by another process in the
// same second) gives the next, -2, -3, …
func TestNewRunDirMakesFreshDirectories(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	at := time.Date(2026, 3, 1, 12, 30, 5, 0, time.UTC)
	d, err := NewRunDir(root, "sine-5shot", "vrf+ctx", 7, at)
	if want := filepath.Join(root, "sine-5shot-vrf_ctx-s7-20260301-123005"); err != nil || d != want {
		t.Fatalf("got %s %v, want %s", d, err, want)
	}
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		t.Fatalf("%s was not made: %v", d, err)
	}
	for _, want := range []string{d + "-2", d + "-3"} {
		if got, err := NewRunDir(root, "sine-5shot", "vrf+ctx", 7, at); err != nil || got != want {
			t.Fatalf("a taken name gives %s %v, want %s", got, err, want)
		}
	}
	e, err := NewExperimentDir(root, "ablation", "sine-5shot", at)
	if want := filepath.Join(root, "exp-ablation-sine-5shot-20260301-123005"); err != nil || e != want {
		t.Fatalf("experiment dir %s %v, want %s", e, err, want)
	}
	blocked := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocked, nil, 0o644)
	if _, err := NewRunDir(filepath.Join(blocked, "runs"), "sine-5shot", "rbf", 1, at); err == nil {
		t.Fatal("want an error when the root cannot be made")
	}
	t.Setenv("MKBENCH_RUNS", "/tmp/x")
	if RunsRoot() != "/tmp/x" {
		t.Fatal("MKBENCH_RUNS ignored")
	}
	t.Setenv("MKBENCH_RUNS", "")
	if RunsRoot() != "runs" {
		t.Fatal("default root")
	}
}

// ConfigDiff names exactly the fields that differ, nested ones dotted.
func TestConfigDiff(t *testing.T) {
	a, _ := Get("omniglot-5w1s")
	b := a.Config
	b.Conv = &engine.ConvSpec{}
	*b.Conv = *a.Config.Conv
	b.LR, b.Conv.Filters, b.TrainWay = 5e-4, 32, 20
	got := strings.Join(ConfigDiff(a.Config, b), " ")
	if got != "conv.filters=32 lr=0.0005 train_way=20" {
		t.Errorf("diff %q", got)
	}
	if d := ConfigDiff(a.Config, a.Config); len(d) != 0 {
		t.Errorf("a config differs from itself: %v", d)
	}
	// Fields left out at their zero values read as those zeros, of each
	// field's type; a field of an object one config lacks reads empty.
	c := a.Config
	c.AugmentShift, c.LRSchedule, c.TrainSplit = 3, engine.LRCosine, engine.SplitTrainVal
	got = strings.Join(ConfigDiff(c, a.Config), " ")
	if got != `augment_shift=0 lr_schedule="" train_split=""` {
		t.Errorf("diff back to the zeros %q", got)
	}
	s, _ := Get("sine-5shot")
	if got := ConfigDiff(a.Config, s.Config); !slices.Contains(got, "conv.filters=") || !slices.Contains(got, "val_every=0") {
		t.Errorf("diff to a config without a ψ of convolutions: %v", got)
	}
}
