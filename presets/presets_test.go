package presets

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
)

func TestPresetsAreValidForEveryVariant(t *testing.T) {
	for _, p := range All() {
		switch p.Source {
		case "sine":
			if _, err := NewSources(p.Source, p.Config, ""); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		case "omniglot":
			// TestOmniglotPresetsLoad loads these from the real data.
		default:
			// No pixels of these sets are here: the error names the fix.
			if _, err := NewSources(p.Source, p.Config, t.TempDir()); err == nil || !strings.Contains(err.Error(), "--data") {
				t.Errorf("%s without data: %v", p.Name, err)
			}
		}
		for _, v := range engine.Variants {
			c := p.Config
			if err := c.ApplyVariant(v, 4); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("%s/%s: %v", p.Name, v, err)
			}
		}
	}
}

func TestSinePresetsMatchThePaper(t *testing.T) {
	for k, name := range map[int]string{3: "sine-3shot", 5: "sine-5shot", 10: "sine-10shot"} {
		p, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Config
		if c.Shot != k || c.Bases != 128 || c.FeatureDim() != 40 || c.MetaBatch != 25 || c.Query != 10 ||
			c.KLWeight != 1e-4 || c.LR != 1e-3 || c.Iters != 20000 || c.EvalTasks != 1000 || c.EvalQuery != 100 ||
			c.Variant() != "metakernel" || c.FlowLayers != 4 || c.FlowHidden != 128 {
			t.Errorf("%s: %+v", name, c)
		}
	}
}

func TestGetReturnsIndependentCopies(t *testing.T) {
	a, _ := Get("sine-5shot")
	a.Config.EmbedHidden[0] = 999
	b, _ := Get("sine-5shot")
	if b.Config.EmbedHidden[0] == 999 {
		t.Fatal("changing a preset's copy changed the preset")
	}
	if _, err := Get("sine-6shot"); err == nil || !strings.Contains(err.Error(), "mkbench presets") {
		t.Fatalf("unknown preset: %v", err)
	}
}

// Every Omniglot preset's sources load from the real data.
func TestOmniglotPresetsLoad(t *testing.T) {
	data := testutil.Data(t, "omniglot")
	for _, p := range All() {
		if p.Source == "omniglot" {
			if _, err := NewSources(p.Source, p.Config, data); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		}
	}
}

func TestOmniglotPresetsMatchThePaper(t *testing.T) {
	for _, tc := range []struct {
		name      string
		way, shot int
	}{{"omniglot-5w1s", 5, 1}, {"omniglot-5w5s", 5, 5}, {"omniglot-20w1s", 20, 1}, {"omniglot-20w5s", 20, 5}} {
		p, err := Get(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Config
		if c.Way != tc.way || c.Shot != tc.shot || c.Query != 15 || c.MetaBatch != 6 || c.Iters != 100000 ||
			c.Bases != 780 || c.FeatureDim() != 256 || c.KLWeight != 0.01 || c.LR != 1e-3 || c.Conv.Keep != 0.9 ||
			c.EvalTasks != 3000 || c.EvalQuery != 15 || c.ValTasks != 500 || c.Variant() != "metakernel" {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

func TestOmniglotSourcesUseTheSplits(t *testing.T) {
	p, _ := Get("omniglot-20w5s")
	s := omniglotSources(t, p.Config)
	for _, tc := range []struct {
		src     task.Source
		classes int
	}{{s.Train, 4112}, {s.Val, 688}, {s.Test, 1692}} {
		ep := tc.src.(*datasets.Episodes)
		if ep.Set().NumClasses() != tc.classes || ep.Way() != 20 || ep.Shot() != 5 || ep.Query() != 15 {
			t.Errorf("%s: %d classes, %d-way %d-shot %d queries", ep.Set().Name(), ep.Set().NumClasses(), ep.Way(), ep.Shot(), ep.Query())
		}
	}
	// The hint tells --data (the folder of the zips) from MKBENCH_DATA (the
	// folder above it): a user who set MKBENCH_DATA to the zips' folder got
	// "point … (or set MKBENCH_DATA)" and no way to see the difference.
	if _, err := NewSources(p.Source, p.Config, t.TempDir()); err == nil || !strings.Contains(err.Error(), "--data at the folder holding images_background.zip") || !strings.Contains(err.Error(), "MKBENCH_DATA to the folder above it, which holds omniglot/") {
		t.Fatalf("missing data: %v", err)
	}
}

// augment_shift shifts the training episodes' images and no others: the
// validation and test episodes are the unshifted run's to the byte, the
// training episodes have its labels and, image by image, moved strokes
// with the ink that stays in the frame.
func TestAugmentShiftMovesOnlyTrainingImages(t *testing.T) {
	p, _ := Get("omniglot-5w1s")
	plain := omniglotSources(t, p.Config)
	c := p.Config
	c.AugmentShift = 2
	aug := omniglotSources(t, c)
	draw := func(src task.Source) task.Batch { return drawTwo(src, c) }
	checkSameEvalImages(t, plain, aug, c, "augment_shift")
	a, b := draw(plain.Train), draw(aug.Train)
	if !slices.Equal(a.YS, b.YS) || !slices.Equal(a.YQ, b.YQ) {
		t.Error("augment_shift changed the training labels")
	}
	changed := 0
	for r := 0; r < len(a.XQ); r += 784 {
		x, y := a.XQ[r:r+784], b.XQ[r:r+784]
		if !slices.Equal(x, y) {
			changed++
		}
		var inkX, inkY float64
		for i := range x {
			inkX += x[i]
			inkY += y[i]
		}
		if inkY > inkX+1e-9 {
			t.Fatalf("query image %d gained ink when shifted: %v → %v", r/784, inkX, inkY)
		}
	}
	if changed < len(a.XQ)/784/2 {
		t.Errorf("only %d of %d training query images moved", changed, len(a.XQ)/784)
	}
}

// augment_rotate and augment_scale warp the training episodes' images
// after their shifts and no others: validation and test are the plain
// run's to the byte, the training labels stay, every training image is
// its shifted one turned and scaled (bilinear mixes of [0, 1] ink stay in
// [0, 1]), and with both 0 the sources are the shift-only run's.
func TestAugmentWarpTurnsOnlyTrainingImages(t *testing.T) {
	p, _ := Get("omniglot-5w1s")
	plain := omniglotSources(t, p.Config)
	shiftOnly := p.Config
	shiftOnly.AugmentShift = 2
	sh := omniglotSources(t, shiftOnly)
	c := shiftOnly
	c.AugmentRotate, c.AugmentScale = 10, 0.15
	aug := omniglotSources(t, c)
	draw := func(src task.Source) task.Batch { return drawTwo(src, c) }
	checkSameEvalImages(t, plain, aug, c, "augment_rotate or augment_scale")
	a, b := draw(sh.Train), draw(aug.Train)
	if !slices.Equal(a.YS, b.YS) || !slices.Equal(a.YQ, b.YQ) {
		t.Error("warping changed the training labels")
	}
	changed := 0
	for r := 0; r < len(a.XQ); r += 784 {
		if !slices.Equal(a.XQ[r:r+784], b.XQ[r:r+784]) {
			changed++
		}
		for _, v := range b.XQ[r : r+784] {
			if !(v >= 0 && v <= 1+1e-12) {
				t.Fatalf("query image %d has a pixel %v outside [0, 1]", r/784, v)
			}
		}
	}
	if n := len(a.XQ) / 784; changed < n*9/10 {
		t.Errorf("only %d of %d training query images warped", changed, n)
	}
	c.AugmentRotate, c.AugmentScale = 0, 0
	same := omniglotSources(t, c)
	if a2 := draw(same.Train); !slices.Equal(a.XS, a2.XS) || !slices.Equal(a.XQ, a2.XQ) {
		t.Error("augment_rotate and augment_scale of 0 changed the shift-only run's images")
	}
}

// drawTwo draws two training-shaped episodes of c from src, seeded.
// train_split=trainval draws training episodes from the 4,800 classes of
// the training and validation characters (the published trainval.txt),
// the validation and test episodes unchanged to the byte; families
// without such a split refuse it, naming the key.
func TestTrainSplitTrainVal(t *testing.T) {
	p, _ := Get("omniglot-5w1s")
	plain := omniglotSources(t, p.Config)
	c := p.Config
	c.TrainSplit, c.ValEvery = engine.SplitTrainVal, 0
	tv := omniglotSources(t, c)
	classes := func(src task.Source) int { return src.(*datasets.Episodes).Set().NumClasses() }
	if a, b := classes(plain.Train), classes(tv.Train); a != 4112 || b != 4800 {
		t.Errorf("training classes %d (train) and %d (trainval), want 4112 and 4800", a, b)
	}
	if a, b := classes(tv.Val), classes(tv.Test); a != 688 || b != 1692 {
		t.Errorf("trainval run validates on %d classes, tests on %d", a, b)
	}
	checkSameEvalImages(t, plain, tv, c, "train_split")
	if a, b := drawTwo(plain.Train, c), drawTwo(tv.Train, c); slices.Equal(a.XS, b.XS) {
		t.Error("trainval drew the training split's episodes")
	}
	for _, name := range []string{"sine-5shot", "domainnet-5w1s"} {
		q, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		qc := q.Config
		qc.TrainSplit, qc.ValEvery = engine.SplitTrainVal, 0
		if _, err := NewSources(q.Source, qc, t.TempDir()); err == nil || !strings.Contains(err.Error(), "train_split trainval applies to the omniglot") {
			t.Errorf("%s with train_split=trainval: %v", name, err)
		}
	}
}

// omniglotSources is NewSources for an Omniglot preset's config c on the
// real data.
func omniglotSources(t *testing.T, c engine.Config) Sources {
	t.Helper()
	s, err := NewSources("omniglot", c, testutil.Data(t, "omniglot"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func drawTwo(src task.Source, c engine.Config) task.Batch {
	var b task.Batch
	b.Resize(2, c.Way*c.Shot, c.Way*c.Query, src.InDim(), src.OutDim())
	src.Sample(rand.New(rand.NewPCG(11, 12)), &b)
	return b
}

// checkSameEvalImages checks that the augmented sources' validation and
// test episodes are the plain ones to the byte.
func checkSameEvalImages(t *testing.T, plain, aug Sources, c engine.Config, what string) {
	t.Helper()
	for _, pair := range [][2]task.Source{{plain.Val, aug.Val}, {plain.Test, aug.Test}} {
		a, b := drawTwo(pair[0], c), drawTwo(pair[1], c)
		if !slices.Equal(a.XS, b.XS) || !slices.Equal(a.XQ, b.XQ) {
			t.Errorf("%s changed validation or test images", what)
		}
	}
}

func TestImagePresetsMatchThePaper(t *testing.T) {
	for _, tc := range []struct {
		name          string
		side, batch   int
		blocks, iters int
		keep          float64
	}{{"cifarfs-5w1s", 32, 8, 4, 200000, 0.5}, {"mini-5w5s", 84, 8, 5, 150000, 0.5}, {"domainnet-5w1s", 84, 8, 5, 150000, 0.5}} {
		p, err := Get(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Config
		if c.Conv.Height != tc.side || c.Conv.Channels != 3 || c.Conv.Blocks != tc.blocks || c.Conv.Keep != tc.keep ||
			c.MetaBatch != tc.batch || c.Iters != tc.iters || c.FeatureDim() != 256 || c.Bases != 780 {
			t.Errorf("%s: %+v, conv %+v, d=%d", tc.name, c, *c.Conv, c.FeatureDim())
		}
	}
	p, _ := Get("wrn-5w1s")
	if p.Config.Conv != nil || p.Config.FeatureDim() != 640 {
		t.Errorf("wrn-5w1s: %+v", p.Config)
	}
}
