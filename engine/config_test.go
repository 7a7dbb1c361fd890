package engine

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// A 1-way task has one class, so every prediction would be right: invalid.
func TestConfigWayOneIsInvalid(t *testing.T) {
	c := sineConfig("rbf")
	c.Way = 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "way must be at least 2") {
		t.Fatalf("way 1: %v", err)
	}
	c.Way = 2
	if err := c.Validate(); err != nil {
		t.Fatalf("way 2: %v", err)
	}
}

// augment_shift needs images to shift, and no more than fits their frame.
func TestConfigAugmentShift(t *testing.T) {
	c := sineConfig("metakernel")
	c.AugmentShift = 2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "augment_shift shifts images") {
		t.Errorf("on an MLP ψ: %v", err)
	}
	c = omniglotLikeConfig()
	for k, want := range map[int]string{-1: "augment_shift must be ≥ 0", 28: "give at most 27", 27: "", 2: "", 0: ""} {
		c.AugmentShift = k
		if err := c.Validate(); (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("augment_shift %d: %v, want %q", k, err, want)
		}
	}
}

// eval_support_shift needs fixed episodes of image classes, and no more
// than fits their frame.
func TestConfigEvalSupportShift(t *testing.T) {
	c := sineConfig("metakernel")
	c.EvalSupportShift = 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "eval_support_shift copies the support images") {
		t.Errorf("on an MLP ψ: %v", err)
	}
	c = omniglotLikeConfig()
	for r, want := range map[int]string{-1: "eval_support_shift must be ≥ 0", 28: "give at most 27", 27: "", 1: "", 0: ""} {
		c.EvalSupportShift = r
		if err := c.Validate(); (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("eval_support_shift %d: %v, want %q", r, err, want)
		}
	}
	for r, n := range map[int]int{0: 1, 1: 9, 2: 25} {
		c.EvalSupportShift = r
		if got := c.EvalShifts(); got != n {
			t.Errorf("eval_support_shift %d: %d images a support image, want %d", r, got, n)
		}
	}
	c.EvalSupportShift, c.Varying = 1, true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs episodes of a fixed way and shot") {
		t.Errorf("on varying episodes: %v", err)
	}
}

// augment_rotate and augment_scale need images to warp, and bounds that
// keep an image an image.
func TestConfigAugmentWarp(t *testing.T) {
	c := sineConfig("metakernel")
	c.AugmentRotate = 10
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "augment_rotate turns images") {
		t.Errorf("rotate on an MLP ψ: %v", err)
	}
	c.AugmentRotate, c.AugmentScale = 0, 0.1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "augment_scale scales images") {
		t.Errorf("scale on an MLP ψ: %v", err)
	}
	c = omniglotLikeConfig()
	for _, tc := range []struct {
		deg, scale float64
		want       string
	}{
		{10, 0.15, ""}, {180, 0, ""}, {0, 0.99, ""}, {0, 0, ""},
		{-1, 0, "augment_rotate must be 0 … 180"}, {181, 0, "augment_rotate must be 0 … 180"},
		{math.NaN(), 0, "augment_rotate must be 0 … 180"},
		{0, 1, "augment_scale must be at least 0 and under 1"}, {0, -0.1, "augment_scale must be"},
		{0, math.Inf(1), "augment_scale must be"},
	} {
		c.AugmentRotate, c.AugmentScale = tc.deg, tc.scale
		if err := c.Validate(); (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("augment_rotate %v, augment_scale %v: %v, want %q", tc.deg, tc.scale, err, tc.want)
		}
	}
}

// train_split takes train or trainval, trainval only on fixed
// classification episodes and without validation (which would score
// classes trained on); the default is the training split.
func TestConfigTrainSplit(t *testing.T) {
	c := omniglotLikeConfig()
	if got := c.TrainingSplit(); got != SplitTrain {
		t.Errorf("default training split %q", got)
	}
	for _, tc := range []struct {
		split    string
		valEvery int
		want     string
	}{
		{"", 500, ""}, {"train", 500, ""}, {"trainval", 0, ""},
		{"trainval", 500, "set val_every=0"},
		{"val", 0, `train_split "val" is not one of train, trainval`},
		{"test", 0, "is not one of train, trainval"},
	} {
		c.TrainSplit, c.ValEvery, c.ValTasks = tc.split, tc.valEvery, 500
		if err := c.Validate(); (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("train_split %q, val_every %d: %v, want %q", tc.split, tc.valEvery, err, tc.want)
		}
	}
	c.TrainSplit, c.ValEvery = SplitTrainVal, 0
	if got := c.TrainingSplit(); got != SplitTrainVal {
		t.Errorf("training split %q", got)
	}
	r := sineConfig("metakernel")
	r.TrainSplit = SplitTrainVal
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "this run has none: leave it out") {
		t.Errorf("trainval on a regression run: %v", err)
	}
}

// The estimate grows with every size, does not overflow, and sees the
// issue's bases=100000000 as far beyond any machine.
func TestMemoryEstimate(t *testing.T) {
	c := sineConfig("metakernel")
	base := c.MemoryEstimate(1, 1)
	if base < 50<<20 || base > 1<<30 {
		t.Fatalf("sine estimate %d bytes", base)
	}
	for name, grow := range map[string]func(c *Config){
		"bases":      func(c *Config) { c.Bases *= 4 },
		"meta_batch": func(c *Config) { c.MetaBatch *= 4 },
		"shot":       func(c *Config) { c.Shot *= 4 },
		"query":      func(c *Config) { c.Query *= 4 },
		"eval_query": func(c *Config) { c.EvalQuery *= 4 },
	} {
		g := c
		grow(&g)
		if g.MemoryEstimate(1, 1) <= base {
			t.Errorf("%s ×4 does not grow the estimate", name)
		}
	}
	big := c
	big.Bases = 100000000
	if e := big.MemoryEstimate(1, 1); e < 1<<40 {
		t.Errorf("bases=1e8: %d bytes", e)
	}
	big.Bases, big.MetaBatch = math.MaxInt/2, math.MaxInt/2
	if e := big.MemoryEstimate(1, 1); e != math.MaxUint64 {
		t.Errorf("huge sizes: %d, want saturation", e)
	}
	if e := c.EvalMemoryEstimate(1, 1); e >= base {
		t.Errorf("evaluation %d ≥ training %d", e, base)
	}
	// Support copies (eval_support_shift) grow an evaluation's support set
	// (2r+1)² times: a 100-way 10-shot evaluation with r = 3 is 49,000
	// support images a task, which no machine holds.
	o := omniglotLikeConfig()
	o.Way, o.Shot = 100, 10
	plain := o.EvalMemoryEstimate(784, 100)
	o.EvalSupportShift = 3
	if e := o.EvalMemoryEstimate(784, 100); e < 1<<36 || e <= plain || o.MemoryEstimate(784, 100) < e {
		t.Errorf("eval_support_shift 3 at 100-way 10-shot: evaluation %d bytes (%d without), training run %d", e, plain, o.MemoryEstimate(784, 100))
	}
}

// The schedules' learning rates: a cosine from lr to lr_min over the
// iterations, a step decay, and the constant rate; bad settings named.
func TestLRSchedules(t *testing.T) {
	c := Config{LR: 1e-3, Iters: 101}
	for _, it := range []int{0, 50, 100, 200} {
		if c.LRAt(it) != 1e-3 {
			t.Fatalf("constant at %d: %g", it, c.LRAt(it))
		}
	}
	c.LRSchedule, c.LRMin = LRCosine, 1e-5
	for _, tc := range []struct {
		iter int
		want float64
	}{{0, 1e-3}, {50, 1e-5 + 0.5*(1e-3-1e-5)}, {100, 1e-5}, {150, 1e-5}} {
		if got := c.LRAt(tc.iter); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("cosine at %d: %g, want %g", tc.iter, got, tc.want)
		}
	}
	c.LRSchedule, c.LRStep, c.LRGamma = LRStepwise, 30, 0.5
	for _, tc := range []struct {
		iter int
		want float64
	}{{0, 1e-3}, {29, 1e-3}, {30, 5e-4}, {95, 1.25e-4}} {
		if got := c.LRAt(tc.iter); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("step at %d: %g, want %g", tc.iter, got, tc.want)
		}
	}
	for name, mod := range map[string]func(*Config){
		"lr_schedule":  func(c *Config) { c.LRSchedule = "linear" },
		"lr_min":       func(c *Config) { c.LRSchedule, c.LRMin = LRCosine, 2e-3 },
		"lr_step":      func(c *Config) { c.LRSchedule, c.LRStep, c.LRGamma = LRStepwise, 0, 0.5 },
		"gamma (0, 1]": func(c *Config) { c.LRSchedule, c.LRStep, c.LRGamma = LRStepwise, 10, 1.5 },
	} {
		cfg := sineConfig("vrf")
		mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), strings.Fields(name)[0]) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A run under a schedule sets and logs each row's learning rate, the last
// row at lr_min.
func TestRunFollowsSchedule(t *testing.T) {
	cfg := sineConfig("vrf")
	cfg.Iters, cfg.LogEvery = 40, 10
	cfg.LRSchedule, cfg.LRMin = LRCosine, 1e-5
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Dir: dir, SkipEval: true}, nil); err != nil {
		t.Fatal(err)
	}
	var rows []MetricsRow
	for _, line := range strings.Split(strings.TrimSpace(string(testutil.ReadFile(t, filepath.Join(dir, FileMetrics)))), "\n") {
		var r MetricsRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 4 || rows[0].LR != cfg.LRAt(9) || rows[3].LR != cfg.LRMin || !(rows[1].LR > rows[2].LR) {
		t.Fatalf("rows' lr: %+v", rows)
	}
}
