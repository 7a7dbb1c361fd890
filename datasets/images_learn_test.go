package datasets

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
)

// learnConfig is a tiny classifier in the shape of the image presets
// (Conv ψ or an MLP for features, vrf kernel, 3-way 2-shot), small enough
// that a few hundred iterations take seconds on two cores.
var learnIters = 200

func learnConfig(conv *engine.ConvSpec, embed []int, iters int) engine.Config {
	c := engine.Config{
		Conv: conv, EmbedHidden: embed,
		InferHidden: 16, InferLayers: 3, PriorHidden: 16, FlowHidden: 8, Bases: 32,
		KLWeight: 0.01, LambdaInit: 0.1,
		Optimizer: "adam", LR: 3e-3, Momentum: 0.9,
		MetaBatch: 4, Way: 3, Shot: 2, Query: 3,
		Iters: iters, Seed: 1,
		LogEvery: 10, SnapshotEvery: 1000,
		EvalTasks: 60, EvalQuery: 3, EvalSamples: 1,
		ValEvery: iters / 2, ValTasks: 12,
	}
	if err := c.ApplyVariant("vrf", 0); err != nil {
		panic(err)
	}
	return c
}

// runLearns trains cfg on train (validating on val) into a run directory,
// tests on test — classes never seen in training — and wants accuracy
// well above chance (1/3).
func runLearns(t *testing.T, cfg engine.Config, train, val, test task.Source) {
	t.Helper()
	m, err := engine.NewModel(cfg, train)
	if err != nil {
		t.Fatal(err)
	}
	before, err := m.EvaluateOn(test, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	res, err := engine.Run(context.Background(), cfg, train, engine.RunOptions{Dir: dir, Val: val, Test: test}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{engine.FileSummary, engine.FileVal, engine.FileBest} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("run directory lacks %s: %v", f, err)
		}
	}
	t.Logf("%s: test accuracy %.3f untrained, %.3f ± %.3f after %d iterations (%.1f ms/iter)", train.Name(), before.Mean, res.Eval.Mean, res.Eval.CI95, res.Iters, res.MsPerIter)
	if res.Eval.Metric != "accuracy" || res.Eval.Mean < 0.6 || res.Eval.Mean < before.Mean+0.15 {
		t.Fatalf("test accuracy %v after training, %v before; want ≥ 0.6 (chance is 1/3) and 15 points better", res.Eval, before)
	}
}

// episodesOf builds the sources of splits for 3-way 2-shot tasks.
func episodesOf(t *testing.T, cfg engine.Config, splits ...ClassSource) []task.Source {
	t.Helper()
	var out []task.Source
	for i, s := range splits {
		q := cfg.Query
		if i > 0 {
			q = cfg.EvalQuery
		}
		e, err := NewClassEpisodes(s, cfg.Way, cfg.Shot, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestMiniImageNetFixtureLearns(t *testing.T) {
	f := newFakeMiniWith(t, [3]int{8, 3, 4}, 8, hardPhoto)
	s := f.load(t, ImageOptions{NoCache: true, Side: 8})
	train, _ := s.Split("train")
	val, _ := s.Split("val")
	test, _ := s.Split("test")
	cfg := learnConfig(&engine.ConvSpec{Channels: 3, Height: 8, Width: 8, Blocks: 2, Filters: 8, Keep: 1}, nil, learnIters)
	src := episodesOf(t, cfg, train, val, test)
	runLearns(t, cfg, src[0], src[1], src[2])
}

func TestCIFARFSFixtureLearns(t *testing.T) {
	f := newFakeCIFARWith(14, 6, 2, hardPhoto)
	dir, splits := t.TempDir(), t.TempDir()
	writeFiles(t, filepath.Join(dir, "cifar-100-python"), f.pythonFiles())
	f.writeSplits(t, splits, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{8, 9, 10}, []int{11, 12, 13})
	s, err := LoadCIFARFS(dir, ImageOptions{SplitDir: splits})
	if err != nil {
		t.Fatal(err)
	}
	train, _ := s.Split("train")
	val, _ := s.Split("val")
	test, _ := s.Split("test")
	cfg := learnConfig(&engine.ConvSpec{Channels: 3, Height: 32, Width: 32, Blocks: 3, Filters: 8, Keep: 1}, nil, learnIters)
	src := episodesOf(t, cfg, train, val, test)
	runLearns(t, cfg, src[0], src[1], src[2])
}

// Few-shot domain generalization on a fixture: trained on tasks across
// clipart and painting, tested with queries from the held-out real domain
// (darker) on the categories the lists share. (The fixture's categories
// differ by colour, which the grey quickdraw fixture does not keep.)
func TestDomainNetFixtureLearns(t *testing.T) {
	f := newFakeDomainNetWith(t, []string{"clipart", "painting", "real"}, 6, 6, 5, hardPhoto)
	d, err := LoadDomainNet(f.dir, DomainNetOptions{ImageOptions: ImageOptions{NoCache: true, Side: 8}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := learnConfig(&engine.ConvSpec{Channels: 3, Height: 8, Width: 8, Blocks: 2, Filters: 8, Keep: 1}, nil, learnIters)
	train := DomainSplit{Name: "train", Support: []string{"clipart_train", "painting_train"}, Query: []string{"clipart_train", "painting_train"}}
	val := DomainSplit{Name: "val", Support: []string{"clipart_test", "painting_test"}, Query: []string{"clipart_test", "painting_test"}}
	test := DomainSplit{Name: "test", Support: []string{"clipart_test", "painting_test"}, Query: []string{"real_test"}}
	var src []task.Source
	for i, sp := range []DomainSplit{train, val, test} {
		q := cfg.Query
		if i > 0 {
			q = cfg.EvalQuery
		}
		e, err := d.Episodes(sp, cfg.Way, cfg.Shot, q)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, e)
	}
	runLearns(t, cfg, src[0], src[1], src[2])
}

func TestEmbeddingsFixtureLearns(t *testing.T) {
	dir := t.TempDir()
	var sets []ClassSource
	for i, sp := range []struct {
		name          string
		first, number int
	}{{"train", 0, 12}, {"val", 12, 4}, {"test", 16, 5}} {
		f := newFakeEmbeddingsNoisy(sp.first, sp.number, 10, 32, 8, 2)
		p := filepath.Join(dir, sp.name+".npz")
		writeFile(t, p, f.npz())
		found, err := EmbeddingSplitFile(dir, sp.name)
		if err != nil || found != p {
			t.Fatalf("split %d: %s, %v", i, found, err)
		}
		e, err := LoadEmbeddings(p, sp.name, EmbeddingOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, e)
	}
	cfg := learnConfig(nil, []int{32}, 2*learnIters)
	src := episodesOf(t, cfg, sets...)
	runLearns(t, cfg, src[0], src[1], src[2])
}
