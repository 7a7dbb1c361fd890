package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// The experiments of issue 5, by the name the command line uses.
const (
	Ablation    = "ablation"    // the paper's ablation table: one run per variant, same seed and task stream
	Versatility = "versatility" // one trained model evaluated on other ways and shots
	Efficiency  = "efficiency"  // metric against the number of bases D, RFF vs MetaKernel
	Shots       = "shots"       // the regression comparison: one run per variant and shot count
)

// Names lists the experiments in the order help texts show them.
var Names = []string{Ablation, Versatility, Efficiency, Shots}

// Defaults of the experiments' lists, as the paper draws them.
var (
	// AblationVariants are the rows of the paper's ablation table; vrf+cnf
	// is not in it and is asked for with --variants (or "all").
	AblationVariants = []string{"rbf", "rff", "vrf", "vrf+ctx", "metakernel"}
	// EfficiencyVariants are the two kernels of the paper's efficiency figure.
	EfficiencyVariants = []string{"rff", "metakernel"}
	// EfficiencyBases are the numbers of bases D of the efficiency figure.
	EfficiencyBases = []int{16, 32, 64, 128, 256, 512, 1024, 2048}
	// ShotsVariants are the three MetaKernel variants of the paper's
	// regression figure; MAML joins them when the runner has its baseline
	// (DefaultBaselines).
	ShotsVariants = []string{"vrf", "vrf+ctx", "metakernel"}
	// RegressionShots are the shot counts of the paper's regression figure.
	RegressionShots = []int{3, 5, 10}
	// ClassificationShots are the shot counts of the classification tables.
	ClassificationShots = []int{1, 5}
	// VersatilityWays and VersatilityShots are the grid of the paper's
	// versatility figure (Omniglot).
	VersatilityWays  = []int{5, 10, 20, 50, 100}
	VersatilityShots = []int{1, 5, 10}
	// RegressionVersatilityShots are the shot counts a sine model trained at
	// one k is evaluated at.
	RegressionVersatilityShots = []int{3, 5, 10, 20}
)

// Options describe an experiment: what the user asked for, with the
// defaults filled in by Normalize. experiment.json holds them, so an
// interrupted experiment can be resumed and checked against a rerun of the
// same command. Zero values mean "the preset's" (Iters, EvalTasks) or
// "none" (Minutes, FromRun).
type Options struct {
	Experiment string   `json:"experiment"`
	Preset     string   `json:"preset"`
	Variants   []string `json:"variants"`
	Seeds      []uint64 `json:"seeds"`
	Iters      int      `json:"iters,omitempty"`
	// Bases are the efficiency experiment's values of D; in the other
	// experiments at most one value, which replaces the preset's D.
	Bases []int `json:"bases,omitempty"`
	// Ways are the versatility grid's ways (classification only).
	Ways []int `json:"ways,omitempty"`
	// Shots are the versatility grid's evaluation shots, or the shots
	// experiment's training shots.
	Shots []int `json:"shots,omitempty"`
	// EvalTasks replaces the preset's number of evaluation tasks; in the
	// versatility experiment it sizes each grid cell's evaluation.
	EvalTasks int `json:"eval_tasks,omitempty"`
	// Minutes is a training-time budget per run (engine.RunOptions.Budget).
	Minutes float64 `json:"minutes,omitempty"`
	// FromRun makes the versatility experiment evaluate an existing run
	// directory instead of training.
	FromRun string `json:"from_run,omitempty"`
	// Data is the Omniglot folder: a path on this machine, not part of
	// what the experiment is, so it is neither saved nor compared.
	Data string `json:"-"`
}

// ParseInts parses a comma-separated list of positive integers, naming
// the flag in its error.
func ParseInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive integer (write a comma-separated list like 1,5,10)", flag, f)
		}
		out = append(out, n)
	}
	return out, checkUnique(flag, out)
}

// ParseSeeds parses a comma-separated list of seeds (integers ≥ 0).
func ParseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q is not a seed (write integers ≥ 0 like 1,2,3)", f)
		}
		out = append(out, n)
	}
	return out, checkUnique("seeds", out)
}

// ParseVariants parses a comma-separated list of variants; "all" is every
// engine variant. Names are checked by Normalize, which knows the
// baselines too.
func ParseVariants(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(engine.Variants), nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "" {
			return nil, fmt.Errorf("--variants: empty name in %q (write a comma-separated list like vrf,metakernel)", s)
		}
		out = append(out, f)
	}
	return out, checkUnique("variants", out)
}

func checkUnique[T comparable](flag string, xs []T) error {
	for i, x := range xs {
		if slices.Contains(xs[:i], x) {
			return fmt.Errorf("--%s: %v is listed twice", flag, x)
		}
	}
	return nil
}

// Normalize checks o against the experiment and its preset and fills the
// defaults. baselines names the methods besides the engine's variants that
// can run (see BaselineFunc); their names are accepted as variants.
func (o Options) Normalize(baselines []string) (Options, presets.Preset, error) {
	if !slices.Contains(Names, o.Experiment) {
		return o, presets.Preset{}, fmt.Errorf("unknown experiment %q (choose one of %s)", o.Experiment, strings.Join(Names, ", "))
	}
	if o.Preset == "" {
		return o, presets.Preset{}, fmt.Errorf("experiment %s: --preset is required (see mkbench presets)", o.Experiment)
	}
	p, err := presets.Get(o.Preset)
	if err != nil {
		return o, p, err
	}
	classify := p.Config.Classify()
	bad := func(format string, a ...any) (Options, presets.Preset, error) {
		return o, p, fmt.Errorf("experiment %s: "+format, append([]any{o.Experiment}, a...)...)
	}
	if _, err := engine.MinutesBudget(o.Minutes); err != nil {
		return bad("--minutes: %v", err)
	}
	if o.Iters < 0 || o.EvalTasks < 0 {
		return bad("--iters and --eval-tasks must be positive")
	}
	for _, v := range o.Variants {
		if !slices.Contains(engine.Variants, v) && !slices.Contains(baselines, v) {
			if v == MAML {
				return bad("variant maml: the MAML baseline is not available here (it is not among the runner's baselines)")
			}
			return bad("unknown variant %q (choose from %s)", v, strings.Join(append(slices.Clone(engine.Variants), baselines...), ", "))
		}
		if v == MAML && classify {
			// The MAML baseline is the paper's regression comparison only.
			return bad("maml runs on regression presets only (%s is classification)", p.Name)
		}
	}
	if err := checkUnique("variants", o.Variants); err != nil {
		return bad("%v", err)
	}
	if err := checkUnique("seeds", o.Seeds); err != nil {
		return bad("%v", err)
	}
	if o.FromRun != "" && o.Experiment == Versatility {
		if len(o.Variants) > 0 || len(o.Seeds) > 0 || o.Iters > 0 || o.Minutes > 0 || len(o.Bases) > 0 {
			return bad("--run evaluates that run's model: --variants, --seeds, --iters, --minutes and --bases do not apply")
		}
	} else if len(o.Seeds) == 0 {
		o.Seeds = []uint64{p.Config.Seed}
	}
	if o.Experiment != Efficiency && len(o.Bases) > 1 {
		return bad("--bases takes one value here (it replaces the preset's D); lists of D are the efficiency experiment's")
	}
	if o.Experiment != Versatility && len(o.Ways) > 0 {
		return bad("--ways belongs to the versatility experiment")
	}
	if o.Experiment != Versatility && o.Experiment != Shots && len(o.Shots) > 0 {
		return bad("--shots belongs to the versatility and shots experiments")
	}
	if o.FromRun != "" && o.Experiment != Versatility {
		return bad("--run belongs to the versatility experiment (it evaluates a trained run)")
	}
	noBaseline := func() error {
		for _, v := range o.Variants {
			if !slices.Contains(engine.Variants, v) {
				return fmt.Errorf("experiment %s: variant %s is not an engine variant and cannot take part here (only in ablation and shots)", o.Experiment, v)
			}
		}
		return nil
	}
	switch o.Experiment {
	case Ablation:
		if len(o.Variants) == 0 {
			o.Variants = slices.Clone(AblationVariants)
		}
	case Efficiency:
		if len(o.Variants) == 0 {
			o.Variants = slices.Clone(EfficiencyVariants)
		}
		if len(o.Bases) == 0 {
			o.Bases = slices.Clone(EfficiencyBases)
		}
		if err := noBaseline(); err != nil {
			return o, p, err
		}
	case Shots:
		if len(o.Variants) == 0 {
			o.Variants = slices.Clone(ShotsVariants)
			if slices.Contains(baselines, MAML) && !classify {
				o.Variants = append(o.Variants, MAML)
			}
		}
		if len(o.Shots) == 0 {
			o.Shots = slices.Clone(RegressionShots)
			if classify {
				o.Shots = slices.Clone(ClassificationShots)
			}
		}
	case Versatility:
		if o.FromRun == "" && len(o.Variants) == 0 {
			o.Variants = []string{p.Variant}
		}
		if err := noBaseline(); err != nil {
			return o, p, err
		}
		if !classify && len(o.Ways) > 0 {
			return bad("--ways needs a classification preset (%s is regression; vary --shots)", p.Name)
		}
		if len(o.Ways) == 0 && classify {
			o.Ways = slices.Clone(VersatilityWays)
		}
		if len(o.Shots) == 0 {
			o.Shots = slices.Clone(VersatilityShots)
			if !classify {
				o.Shots = slices.Clone(RegressionVersatilityShots)
			}
		}
	}
	return o, p, nil
}

// identity is o as experiment.json holds it, for comparing a rerun with
// the saved experiment.
func (o Options) identity() []byte {
	b, _ := json.Marshal(o)
	return b
}

// diff names the options that differ between a and b ("" when none), an
// option left to its default showing as "default".
func diff(a, b Options) string {
	var ma, mb map[string]any
	json.Unmarshal(a.identity(), &ma)
	json.Unmarshal(b.identity(), &mb)
	keys := make([]string, 0, len(ma)+len(mb))
	for k := range ma {
		keys = append(keys, k)
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	show := func(v any) string {
		if v == nil {
			return "default"
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	var out []string
	for _, k := range keys {
		if x, y := show(ma[k]), show(mb[k]); x != y {
			out = append(out, fmt.Sprintf("%s: saved %s, now %s", k, x, y))
		}
	}
	return strings.Join(out, "; ")
}

// errNoOptions is wrapped by LoadManifest's error for a folder that is not
// an experiment directory.
var errNoOptions = errors.New("not an experiment directory")
