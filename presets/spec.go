package presets

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/ops"
)

// Spec names one run: a preset, one of its variants and overrides of the
// preset's settings. It is the only way from a preset to a run's
// configuration: the headless commands, the workbench, the experiments and
// the sweeps all build their configs with Spec.Config, so the same Spec
// gives the same Config, and so the same numbers, wherever it runs.
type Spec struct {
	Preset  string
	Variant string // "" is the preset's default variant
	// Overrides replace preset settings by key (see OverrideKeys); the
	// seed is one of them. nil keeps the preset's settings.
	Overrides Overrides
}

// Overrides maps setting keys to values: ints, floats, strings or int
// lists as the key takes (a key's Kind). Keys are the snake_case names of
// the settings, as in config.json; "-" may stand for "_" (CLI flags).
type Overrides map[string]any

// With returns a copy of o with key set to v; o itself is unchanged, so one
// base set of overrides can be extended per run.
func (o Overrides) With(key string, v any) Overrides {
	out := make(Overrides, len(o)+1)
	for k, x := range o {
		out[k] = x
	}
	out[key] = v
	return out
}

// Config returns the preset s names and its complete run configuration: a
// deep copy of the preset's config, then the variant (flow variants keep
// the preset's number of coupling layers, 4 when it has none), then the
// overrides, validated. Errors name the preset, variant or key at fault.
func (s Spec) Config() (Preset, engine.Config, error) {
	p, err := Get(s.Preset)
	if err != nil {
		return Preset{}, engine.Config{}, err
	}
	cfg := p.Config // Get returned a deep copy
	layers := cfg.FlowLayers
	if layers <= 0 {
		layers = 4
	}
	v := s.Variant
	if v == "" {
		v = p.Variant
	}
	if err := cfg.ApplyVariant(v, layers); err != nil {
		return Preset{}, engine.Config{}, err
	}
	keys := make([]string, 0, len(s.Overrides))
	for k := range s.Overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one error order, whatever the map's
	for _, k := range keys {
		if err := applyOverride(&cfg, &p.Config, k, s.Overrides[k]); err != nil {
			return Preset{}, engine.Config{}, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Preset{}, engine.Config{}, err
	}
	return p, cfg, nil
}

// Kind is the type of value an override key takes.
type Kind int

// The kinds of override values.
const (
	KindInt      Kind = iota // a whole number
	KindFloat                // a number
	KindString               // a word
	KindIntList              // a list of whole numbers
	KindWordList             // a list of words (source names)
)

// override is one setting a run accepts by key.
type override struct {
	key  string
	kind Kind
	help string
	// uses reports whether a preset's config (its default variant) uses
	// the setting; overriding one it does not use is an error, not a
	// silent no-op. A variant that ignores a setting its preset uses (rbf
	// and bases) is not an error, so one override serves every variant.
	uses func(c *engine.Config) bool
	set  func(c *engine.Config, v any)
}

func always(*engine.Config) bool          { return true }
func classifies(c *engine.Config) bool    { return c.Classify() }
func hasFlows(c *engine.Config) bool      { return c.FlowLayers > 0 }
func hasMLPEmbed(c *engine.Config) bool   { return c.Conv == nil }
func usesConv(c *engine.Config) bool      { return c.Conv != nil }
func usesImages(c *engine.Config) bool    { return c.Conv != nil || c.ResNet != nil }
func varying(c *engine.Config) bool       { return c.Varying }
func fixedShape(c *engine.Config) bool    { return !c.Varying }
func fixedClasses(c *engine.Config) bool  { return c.Classify() && !c.Varying }
func imageEpisodes(c *engine.Config) bool { return usesImages(c) && fixedClasses(c) }

// setBackbone swaps an image preset's ψ, keeping its input: conv4 (four
// blocks, SAME pooling), conv5 (five, floor pooling, as the paper's 84×84
// presets) or resnet18 (the Meta-Dataset backbone, 256-d features). An
// unknown name is left for Validate to name.
func setBackbone(c *engine.Config, v any) {
	ch, h, w := 0, 0, 0
	var filters int
	keep := 1.0
	switch {
	case c.Conv != nil:
		ch, h, w, filters, keep = c.Conv.Channels, c.Conv.Height, c.Conv.Width, c.Conv.Filters, c.Conv.Keep
	case c.ResNet != nil:
		ch, h, w, filters = c.ResNet.Channels, c.ResNet.Height, c.ResNet.Width, 64
	}
	switch v.(string) {
	case "conv4", "conv5":
		blocks := 4
		if v.(string) == "conv5" {
			blocks = 5
		}
		c.Backbone, c.ResNet = "", nil
		c.Conv = &engine.ConvSpec{Channels: ch, Height: h, Width: w, Blocks: blocks, Filters: filters, Keep: keep, FloorPool: blocks == 5}
	case engine.BackboneResNet18:
		r := ops.ResNet18(ch, h, w)
		c.Backbone, c.ResNet, c.Conv = engine.BackboneResNet18, &r, nil
	default:
		c.Backbone = v.(string)
	}
}

func intField(f func(c *engine.Config) *int) func(*engine.Config, any) {
	return func(c *engine.Config, v any) { *f(c) = v.(int) }
}

func floatField(f func(c *engine.Config) *float64) func(*engine.Config, any) {
	return func(c *engine.Config, v any) { *f(c) = v.(float64) }
}

// overrides is every setting a run accepts by key, in the order
// OverrideKeys lists them.
var overrides = []override{
	{"iters", KindInt, "training iterations" + atMost("", engine.MaxIters), always, intField(func(c *engine.Config) *int { return &c.Iters })},
	{"seed", KindInt, "random seed", always, func(c *engine.Config, v any) { c.Seed = uint64(v.(int)) }},
	{"eval_tasks", KindInt, "tasks in the final evaluation" + atMost("", engine.MaxTasks), always, intField(func(c *engine.Config) *int { return &c.EvalTasks })},
	{"eval_query", KindInt, "query points per evaluation task (per class when classifying)" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.EvalQuery })},
	{"eval_samples", KindInt, "ω draws averaged per evaluation prediction" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.EvalSamples })},
	{"val_every", KindInt, "iterations between validations" + atMost("", engine.MaxIters), classifies, intField(func(c *engine.Config) *int { return &c.ValEvery })},
	{"val_tasks", KindInt, "episodes per validation" + atMost("", engine.MaxTasks), classifies, intField(func(c *engine.Config) *int { return &c.ValTasks })},
	{"bases", KindInt, "D, random Fourier bases per task" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.Bases })},
	{"lr", KindFloat, "learning rate (the first, under a schedule)", always, floatField(func(c *engine.Config) *float64 { return &c.LR })},
	{"lr_schedule", KindString, "constant, cosine (lr to lr_min over the iterations) or step (× lr_gamma every lr_step iterations)", always, func(c *engine.Config, v any) { c.LRSchedule = v.(string) }},
	{"lr_min", KindFloat, "cosine schedule: the last learning rate", always, floatField(func(c *engine.Config) *float64 { return &c.LRMin })},
	{"lr_step", KindInt, "step schedule: iterations between decays" + atMost("", engine.MaxIters), always, intField(func(c *engine.Config) *int { return &c.LRStep })},
	{"lr_gamma", KindFloat, "step schedule: the factor of each decay", always, floatField(func(c *engine.Config) *float64 { return &c.LRGamma })},
	{"flow_lr_scale", KindFloat, "learning-rate factor of the coupling flows", hasFlows, floatField(func(c *engine.Config) *float64 { return &c.FlowLRScale })},
	{"psi_weight_decay", KindFloat, "decoupled weight decay of ψ's weights (AdamW's; 0 = none)", always, floatField(func(c *engine.Config) *float64 { return &c.PsiWeightDecay })},
	{"momentum", KindFloat, "SGD momentum", always, floatField(func(c *engine.Config) *float64 { return &c.Momentum })},
	{"optimizer", KindString, "adam or sgd", always, func(c *engine.Config, v any) { c.Optimizer = v.(string) }},
	{"clip_norm", KindFloat, "global gradient-norm clip (0 = off)", always, floatField(func(c *engine.Config) *float64 { return &c.ClipNorm })},
	{"kl_weight", KindFloat, "weight of the KL term", always, floatField(func(c *engine.Config) *float64 { return &c.KLWeight })},
	{"gamma_init", KindFloat, "initial scale γ of the classification logits (γ·K̃ᵀα + β; the authors' 1)", classifies, floatField(func(c *engine.Config) *float64 { return &c.GammaInit })},
	{"lambda_init", KindFloat, "initial KRR regularizer λ", always, floatField(func(c *engine.Config) *float64 { return &c.LambdaInit })},
	{"meta_batch", KindInt, "tasks per iteration" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.MetaBatch })},
	{"way", KindInt, "classes per task (variable episodes: the most)" + atMost("", engine.MaxSize), classifies, intField(func(c *engine.Config) *int { return &c.Way })},
	{"shot", KindInt, "support points per task (per class when classifying)" + atMost("", engine.MaxSize), fixedShape, intField(func(c *engine.Config) *int { return &c.Shot })},
	{"train_way", KindInt, "classes per training episode, above way (validation and test keep way)" + atMost("", engine.MaxSize), fixedClasses, intField(func(c *engine.Config) *int { return &c.TrainWay })},
	{"train_split", KindString, "split of the training episodes: train, or trainval (the training and validation classes, as Prototypical Networks train; needs val_every=0, the last parameters tested)", fixedClasses, func(c *engine.Config, v any) { c.TrainSplit = v.(string) }},
	{"train_shot", KindInt, "support images per class of a training episode (validation and test keep shot)" + atMost("", engine.MaxSize), fixedClasses, intField(func(c *engine.Config) *int { return &c.TrainShot })},
	{"max_support", KindInt, "variable episodes: the largest support set" + atMost("", engine.MaxSize), varying, intField(func(c *engine.Config) *int { return &c.Shot })},
	{"augment_shift", KindInt, "training images shifted by up to this many pixels in each direction, each its own shift (0 = none, the paper's); validation and test images never", usesImages, intField(func(c *engine.Config) *int { return &c.AugmentShift })},
	{"augment_rotate", KindFloat, "training images turned about their centre by up to this many degrees either way, each its own angle (0 = none, the paper's); validation and test images never", usesImages, floatField(func(c *engine.Config) *float64 { return &c.AugmentRotate })},
	{"augment_scale", KindFloat, "training images scaled about their centre within 1 ± this, each its own factor (0 = none, the paper's); validation and test images never", usesImages, floatField(func(c *engine.Config) *float64 { return &c.AugmentScale })},
	{"eval_support_shift", KindInt, "the test (and mkbench eval) joins each support image with its copies shifted by up to this many pixels in each direction, (2r+1)² images of each (0 = none, the paper's); queries, training images and the validations during training never", imageEpisodes, intField(func(c *engine.Config) *int { return &c.EvalSupportShift })},
	{"query", KindInt, "query points per training task (per class when classifying; variable episodes: the most per class)" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.Query })},
	{"flow_layers", KindInt, "conditional coupling layers" + atMost("", engine.MaxLayers), hasFlows, intField(func(c *engine.Config) *int { return &c.FlowLayers })},
	{"flow_hidden", KindInt, "width of each coupling network" + atMost("", engine.MaxSize), hasFlows, intField(func(c *engine.Config) *int { return &c.FlowHidden })},
	{"infer_hidden", KindInt, "width of the inference network and the LSTM" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.InferHidden })},
	{"infer_layers", KindInt, "layers of the inference network" + atMost("", engine.MaxLayers), always, intField(func(c *engine.Config) *int { return &c.InferLayers })},
	{"prior_hidden", KindInt, "width of the prior network" + atMost("", engine.MaxSize), always, intField(func(c *engine.Config) *int { return &c.PriorHidden })},
	{"backbone", KindString, "ψ of an image preset: conv4, conv5 or resnet18", usesImages, setBackbone},
	{"image_size", KindInt, "height and width images are resized to (the input of ψ)", usesImages, func(c *engine.Config, v any) {
		if c.ResNet != nil {
			c.ResNet.Height, c.ResNet.Width = v.(int), v.(int)
			return
		}
		c.Conv.Height, c.Conv.Width = v.(int), v.(int)
	}},
	{"channels", KindInt, "image channels: 1 (grey) or 3 (RGB)", usesImages, func(c *engine.Config, v any) {
		if c.ResNet != nil {
			c.ResNet.Channels = v.(int)
			return
		}
		c.Conv.Channels = v.(int)
	}},
	{"sources", KindWordList, "Meta-Dataset: the sources to train on (e.g. ilsvrc_2012 or aircraft,cu_birds; refused by other families when the run starts)", always, func(c *engine.Config, v any) { c.Sources = slices.Clone(v.([]string)) }},
	{"test_sources", KindWordList, "Meta-Dataset: the sources to test on (default: every source present)", always, func(c *engine.Config, v any) { c.TestSources = slices.Clone(v.([]string)) }},
	{"conv_filters", KindInt, "filters of each convolutional block of ψ", usesConv, func(c *engine.Config, v any) { c.Conv.Filters = v.(int) }},
	{"conv_keep", KindFloat, "dropout keep probability of ψ's convolutional blocks in training (1 = no dropout)", usesConv, func(c *engine.Config, v any) { c.Conv.Keep = v.(float64) }},
	{"embed_hidden", KindIntList, "widths of the MLP feature extractor ψ" + atMost("each", engine.MaxSize), hasMLPEmbed, func(c *engine.Config, v any) { c.EmbedHidden = slices.Clone(v.([]int)) }},
	{"log_every", KindInt, "iterations per metrics row" + atMost("", engine.MaxIters), always, intField(func(c *engine.Config) *int { return &c.LogEvery })},
	{"snapshot_every", KindInt, "iterations between display snapshots" + atMost("", engine.MaxIters), always, intField(func(c *engine.Config) *int { return &c.SnapshotEvery })},
	{"checkpoint_sec", KindInt, "seconds between checkpoints (0 = only at the end)" + atMost("", engine.MaxIters), always, intField(func(c *engine.Config) *int { return &c.CheckpointSec })},
}

// atMost is a setting's ceiling (engine.Config.Validate's, whose comments
// say why each is where it is) as its help says it: "; at most 65536".
func atMost(what string, n int) string {
	if what != "" {
		what += " "
	}
	return fmt.Sprintf("; %sat most %d", what, n)
}

// OverrideKey describes one key Spec.Overrides accepts.
type OverrideKey struct {
	Key  string
	Kind Kind
	Help string
}

// OverrideKeys lists the keys Spec.Overrides accepts.
func OverrideKeys() []OverrideKey {
	out := make([]OverrideKey, len(overrides))
	for i, o := range overrides {
		out[i] = OverrideKey{o.key, o.kind, o.help}
	}
	return out
}

// ErrUnknownKey is wrapped by the error for an override key no run takes.
var ErrUnknownKey = errors.New("unknown setting")

// ErrUnusedKey is wrapped by the error for an override of a setting the
// preset's variant does not use (way on a regression preset, flow_layers
// on a variant without flows).
var ErrUnusedKey = errors.New("setting not used by this preset")

func applyOverride(c, preset *engine.Config, key string, v any) error {
	k := strings.ReplaceAll(key, "-", "_")
	i := slices.IndexFunc(overrides, func(o override) bool { return o.key == k })
	if i < 0 {
		return fmt.Errorf("%w %q (settings: %s)", ErrUnknownKey, key, strings.Join(overrideNames(), ", "))
	}
	o := overrides[i]
	// The preset's own config decides (a variant that ignores a setting
	// does not refuse it), or the config as the settings before this one
	// left it (conv_filters after backbone=conv4 on a ResNet preset: keys
	// apply in sorted order, and backbone sorts first).
	if !o.uses(preset) && !o.uses(c) {
		return fmt.Errorf("%w: %q", ErrUnusedKey, key)
	}
	x, err := convert(o.kind, v)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	o.set(c, x)
	return nil
}

// convert checks v against kind and returns it as the setter's type.
func convert(kind Kind, v any) (any, error) {
	switch kind {
	case KindInt:
		switch x := v.(type) {
		case int:
			return x, nil
		case int64:
			return int(x), nil
		case uint64:
			if x > math.MaxInt {
				return nil, fmt.Errorf("%d is too large", x)
			}
			return int(x), nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return int(x), nil
			}
		}
		return nil, fmt.Errorf("want a whole number, got %v", v)
	case KindFloat:
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("want a finite number, got %v", x)
			}
			return x, nil
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		}
		return nil, fmt.Errorf("want a number, got %v", v)
	case KindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("want a word, got %v", v)
	case KindIntList:
		switch x := v.(type) {
		case []int:
			return x, nil
		case []any:
			out := make([]int, len(x))
			for i, e := range x {
				n, err := convert(KindInt, e)
				if err != nil {
					return nil, err
				}
				out[i] = n.(int)
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a list of whole numbers, got %v", v)
	case KindWordList:
		switch x := v.(type) {
		case []string:
			return x, nil
		case []any:
			out := make([]string, len(x))
			for i, e := range x {
				w, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("want a list of words, got %v", v)
				}
				out[i] = w
			}
			return out, nil
		case string:
			return strings.Split(x, ","), nil
		}
		return nil, fmt.Errorf("want a list of words, got %v", v)
	}
	panic("presets: unknown override kind")
}

// RunsRoot is where new runs go unless told otherwise: $MKBENCH_RUNS, else
// ./runs. The headless commands and the workbench share it, so their runs
// sit together.
func RunsRoot() string {
	if r := os.Getenv("MKBENCH_RUNS"); r != "" {
		return r
	}
	return "runs"
}

// NewRunDir creates a fresh run directory under root and returns it:
// PRESET-VARIANT-sSEED-YYYYMMDD-HHMMSS, with "+" in the variant written as
// "_" so the name needs no quoting. The directory is made here, atomically
// (os.Mkdir), so that two processes naming runs in the same second — a
// workbench and a `mkbench run`, say — never get the same one: the later
// gets "-2", "-3", …
func NewRunDir(root, preset, variant string, seed uint64, t time.Time) (string, error) {
	return freshDir(filepath.Join(root, fmt.Sprintf("%s-%s-s%d-%s", preset, VariantSlug(variant), seed, t.Format("20060102-150405"))))
}

// NewExperimentDir creates a fresh experiment directory under root, as
// NewRunDir does: exp-NAME-PRESET-YYYYMMDD-HHMMSS. The command line and the
// workbench both name experiments with it.
func NewExperimentDir(root, name, preset string, t time.Time) (string, error) {
	return freshDir(filepath.Join(root, fmt.Sprintf("exp-%s-%s-%s", name, preset, t.Format("20060102-150405"))))
}

// NewSweepDir creates a fresh sweep directory under root, as NewRunDir
// does: sweep-NAME-YYYYMMDD-HHMMSS, NAME being the sweep file's.
func NewSweepDir(root, name string, t time.Time) (string, error) {
	return freshDir(filepath.Join(root, fmt.Sprintf("sweep-%s-%s", name, t.Format("20060102-150405"))))
}

// VariantSlug is a variant as it appears in directory names: "+" written
// as "_", so the name needs no quoting in a shell.
func VariantSlug(variant string) string { return strings.ReplaceAll(variant, "+", "_") }

// freshDir creates and returns base, or base-2, base-3, … for the first
// name no one has taken.
func freshDir(base string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", filepath.Dir(base), err)
	}
	dir := base
	for n := 2; n < 10000; n++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("cannot create %s: %w", dir, err)
		}
		dir = fmt.Sprintf("%s-%d", base, n)
	}
	return "", fmt.Errorf("no free directory name like %s", base)
}
