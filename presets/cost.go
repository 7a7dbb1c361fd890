package presets

import "github.com/mkbench/mkbench/engine"

// measuredMs are training milliseconds per iteration measured on the
// reference machine (2 cores, both used), by family and variant: sine from
// BenchmarkSineStep at the sine-5shot sizes, Omniglot from
// BenchmarkOmniglotStep at omniglot-5w1s (80 images an episode). The
// docs/results.md's speed section has the runs behind them.
var measuredMs = map[string]map[string]float64{
	"sine":     {"rbf": 0.89, "rff": 1.30, "vrf": 2.44, "vrf+ctx": 3.05, "vrf+cnf": 12.6, "metakernel": 14.1},
	"omniglot": {"rbf": 112, "rff": 118, "vrf": 130, "vrf+ctx": 147, "vrf+cnf": 211, "metakernel": 245},
}

// measuredImages is the images per episode of the Omniglot measurement.
const measuredImages = 5 * (1 + 15)

// MsPerIter estimates a run's training milliseconds per iteration on the
// reference machine with both cores, from the measured figures: sine as
// measured, Omniglot scaled by the images an episode holds (way × (shot +
// query)) from the 5-way 1-shot measurement. ok is false for families not
// measured (CIFAR-FS, miniImageNet, DomainNet, embeddings) and variants
// not in the table.
func MsPerIter(family string, cfg engine.Config) (ms float64, ok bool) {
	ms, ok = measuredMs[family][cfg.Variant()]
	if !ok {
		return 0, false
	}
	if family == "omniglot" && cfg.Way > 0 {
		ms *= float64(cfg.TrainingWay()*(cfg.TrainingShot()+cfg.Query)) / measuredImages
	}
	return ms, true
}
