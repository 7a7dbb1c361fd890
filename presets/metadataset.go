package presets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/ops"
	"github.com/mkbench/mkbench/internal/task"
)

// mdTrainAll are the eight sources Meta-Dataset trains on in its "all
// sources" setting (learn/gin/setups/all_datasets.gin).
var mdTrainAll = []string{"ilsvrc_2012", "omniglot", "aircraft", "cu_birds", "dtd", "quickdraw", "fungi", "vgg_flower"}

// metaDataset is Meta-Dataset at a fixed way and shot: the Omniglot heads
// on Conv-5 at 84×84×3 (backbone resnet18 for the paper's ψ), 10 queries
// per class as the reference's sampler caps them, trained on the sources
// named by the sources setting (default: ilsvrc_2012 when present, else
// every source with training classes) and tested on every source present
// (test_sources).
func metaDataset(way, shot int) Preset {
	p := image(fmt.Sprintf("metadataset-%dw%ds", way, shot), "metadataset", "Meta-Dataset (fixed ways and shots; --data: the converted records)", miniConv, way, shot, 100000)
	p.Config.Query, p.Config.EvalQuery, p.Config.EvalTasks = 10, 10, 600
	return p
}

// metaDatasetVarying is the paper's Meta-Dataset setting: episodes of
// variable ways and shots from the reference's sampler (5 to 50 ways, a
// support set of at most 500, at most 10 queries per class), one per
// step; ResNet-18 ψ at 84×84 (256-d features) under the Omniglot heads;
// trained on ILSVRC (all: the eight training sources) and tested on every
// source present, 600 episodes each. The paper gives no iteration count
// for Meta-Dataset; 100,000 is its Omniglot count.
func metaDatasetVarying(all bool) Preset {
	p := image("metadataset", "metadataset", "Meta-Dataset", miniConv, 5, 1, 100000)
	c := &p.Config
	r := ops.ResNet18(3, datasets.MetaDatasetSide, datasets.MetaDatasetSide)
	c.Conv, c.Backbone, c.ResNet = nil, engine.BackboneResNet18, &r
	setVarying(c)
	p.Description = "Meta-Dataset, variable ways and shots (ResNet-18, trained on ILSVRC; --data: the converted records)"
	if all {
		p.Name = "metadataset-all"
		c.Sources = slices.Clone(mdTrainAll)
		p.Description = "Meta-Dataset, variable ways and shots (ResNet-18, trained on the eight training sources; --data: the converted records)"
	}
	return p
}

// setVarying makes c draw Meta-Dataset's variable episodes with the
// reference sampler's bounds (engine.Config.Varying: way, shot and query
// are the largest way, support set and query per class).
func setVarying(c *engine.Config) {
	c.Varying, c.MetaBatch = true, 1
	c.Way, c.Shot, c.Query = datasets.MDMaxWays, datasets.MDMaxSupport, datasets.MDMaxQuery
	c.EvalQuery, c.EvalTasks = datasets.MDMaxQuery, 600
	c.ValEvery, c.ValTasks = 1000, 100
}

// metaDatasetEmbed is metaDataset on pre-computed features, one .npz per
// source and split: the MetaKernel head with a 256-wide layer instead of a
// CNN, so that a CPU can run the whole protocol. way 0 is the variable
// episodes of metaDatasetVarying.
func metaDatasetEmbed(way, shot int) Preset {
	p := embeddings(max(way, 5), max(shot, 1))
	c := &p.Config
	c.EmbedHidden = []int{256}
	c.Query, c.EvalQuery, c.EvalTasks = 10, 10, 600
	p.Name, p.Source = fmt.Sprintf("metadataset-embed-%dw%ds", way, shot), "mdembed"
	p.Description = fmt.Sprintf("Meta-Dataset on pre-computed features (DIR/<source>/<split>.npz), %d-way %d-shot", way, shot)
	if way == 0 {
		setVarying(c)
		p.Name = "metadataset-embed"
		p.Description = "Meta-Dataset on pre-computed features (DIR/<source>/<split>.npz), variable ways and shots"
	}
	return p
}

// mdSplit is a Meta-Dataset source's class set of one split and the spec
// its sampler reads: the source's own, or for features without one the
// plain rules over their classes.
type mdSplit struct {
	classes datasets.ClassSource
	spec    *datasets.MDSpec
}

// mdSplits gives a Meta-Dataset source's split ("train", "valid",
// "test"); classes is nil when the source has no classes there.
type mdSplits func(split string) (mdSplit, error)

// metaDatasetSources makes the sources of a Meta-Dataset run (see
// metaDataset): training and validation episodes from the training
// sources, one test source per test source. embed reads pre-computed
// features (DIR/<source>/<split>.npz) instead of the records.
func metaDatasetSources(cfg engine.Config, dataDir string, embed bool) (Sources, error) {
	family, hint := "metadataset", "the folder of converted sources (one folder per source with its dataset_spec.json)"
	if embed {
		family, hint = "mdembed", "the folder of per-source features (DIR/<source>/train.npz, test.npz, …)"
	}
	if dataDir == "" {
		dataDir = datasets.DefaultMetaDatasetDir()
	}
	present, open, err := mdOpener(cfg, dataDir, embed)
	if err != nil {
		return Sources{}, fmt.Errorf("%w; point --data at %s", err, hint)
	}
	opened := map[string]mdSplits{}
	get := func(name string) (mdSplits, error) {
		if !slices.Contains(present, name) {
			return nil, fmt.Errorf("no Meta-Dataset source %q in %s (present: %s)", name, dataDir, strings.Join(present, ", "))
		}
		if o, ok := opened[name]; ok {
			return o, nil
		}
		o, err := open(name)
		opened[name] = o
		return o, err
	}
	minWay := cfg.Way
	if cfg.Varying {
		minWay = min(datasets.MDMinWays, cfg.Way)
	}
	episodes := func(names []string, split string, query int, skipSmall bool) (task.Source, error) {
		var ns []string
		var cs []datasets.ClassSource
		var specs []*datasets.MDSpec
		for _, n := range names {
			o, err := get(n)
			if err != nil {
				return nil, err
			}
			s, err := o(split)
			if err != nil {
				return nil, err
			}
			if s.classes == nil || skipSmall && s.classes.NumClasses() < minWay {
				continue
			}
			ns, cs, specs = append(ns, n), append(cs, s.classes), append(specs, s.spec)
		}
		if len(cs) == 0 {
			return nil, nil
		}
		if cfg.Varying {
			return datasets.NewMDVarying(family, ns, specs, split, cs, datasets.MDSamplerOptions{
				MinWays: minWay, MaxWays: cfg.Way, MaxSupport: cfg.Shot, MaxQuery: query})
		}
		way, shot := cfg.Way, cfg.Shot
		if split == "train" {
			way, shot = cfg.TrainingWay(), cfg.TrainingShot()
		}
		return datasets.NewMultiEpisodes(family, ns, cs, way, shot, query)
	}
	train := cfg.Sources
	if len(train) == 0 {
		if slices.Contains(present, "ilsvrc_2012") {
			train = []string{"ilsvrc_2012"}
		} else {
			for _, n := range present {
				o, err := get(n)
				if err != nil {
					return Sources{}, err
				}
				if s, err := o("train"); err != nil {
					return Sources{}, err
				} else if s.classes != nil {
					train = append(train, n)
				}
			}
		}
	}
	var out Sources
	tr, err := episodes(train, "train", cfg.Query, false)
	if err != nil {
		return Sources{}, err
	}
	if tr == nil {
		return Sources{}, fmt.Errorf("none of the training sources (%s) has training classes", strings.Join(train, ", "))
	}
	out.Train = tr
	// Validation on the training sources' valid classes, where they have
	// enough (a source without them trains unvalidated).
	if va, err := episodes(train, "valid", cfg.EvalQuery, true); err != nil {
		return Sources{}, err
	} else if va != nil {
		out.Val = va
	}
	test := cfg.TestSources
	if len(test) == 0 {
		test = present
	}
	for _, n := range test {
		ep, err := episodes([]string{n}, "test", cfg.EvalQuery, len(cfg.TestSources) == 0)
		if err != nil {
			return Sources{}, err
		}
		if ep != nil { // a source without test classes has no row
			out.TestBy = append(out.TestBy, engine.NamedSource{Name: n, Source: ep})
		}
	}
	if len(out.TestBy) == 0 {
		return Sources{}, fmt.Errorf("none of the test sources (%s) has %d test classes or more", strings.Join(test, ", "), minWay)
	}
	out.Test = out.TestBy[0].Source
	return out, nil
}

// mdOpener lists the sources under dataDir and opens one: its records
// decoded at the model's input size, or its .npz features.
func mdOpener(cfg engine.Config, dataDir string, embed bool) ([]string, func(string) (mdSplits, error), error) {
	if embed {
		return mdEmbedOpener(dataDir)
	}
	ch, side, w, ok := cfg.ImageInput()
	if !ok || side != w || ch != 3 {
		return nil, nil, errors.New("Meta-Dataset images need a square three-channel image input")
	}
	present, err := datasets.MetaDatasetSources(dataDir)
	if err != nil {
		return nil, nil, err
	}
	return present, func(name string) (mdSplits, error) {
		if mdStream(dataDir, name, side) {
			s, err := datasets.OpenMetaDatasetStream(dataDir, name, side)
			if err != nil {
				return nil, err
			}
			return specSplits(s.Spec, func(split string) (datasets.ClassSource, error) { return s.Split(split) }), nil
		}
		s, err := datasets.LoadMetaDatasetSource(dataDir, name, side, datasets.ImageOptions{})
		if err != nil {
			return nil, err
		}
		return specSplits(s.Spec, func(split string) (datasets.ClassSource, error) { return s.Split(split) }), nil
	}, nil
}

// specSplits is the mdSplits of a source read with its spec.
func specSplits(spec *datasets.MDSpec, classes func(split string) (datasets.ClassSource, error)) mdSplits {
	return func(split string) (mdSplit, error) {
		if len(spec.Classes(split)) == 0 {
			return mdSplit{}, nil
		}
		cs, err := classes(split)
		return mdSplit{classes: cs, spec: spec}, err
	}
}

// mdStream reports whether source name is read from its records as
// images are drawn instead of decoded whole: when decoded it would pass
// datasets.MDStreamAbove (ILSVRC), or when MKBENCH_MD_STREAM=1 asks for
// it (a machine short of memory). A spec that cannot be read is left to
// the loader to report.
func mdStream(dataDir, name string, side int) bool {
	if os.Getenv("MKBENCH_MD_STREAM") == "1" {
		return true
	}
	spec, err := datasets.LoadMetaDatasetSpec(filepath.Join(dataDir, name))
	return err == nil && datasets.MDDecodedBytes(spec, side) > datasets.MDStreamAbove
}

// mdEmbedOpener is mdOpener for features: DIR/<source>/<split>.npz. Their
// classes are drawn by the sampler's plain rules (the features carry no
// alphabets or hierarchy).
func mdEmbedOpener(dataDir string) ([]string, func(string) (mdSplits, error), error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", datasets.ErrNoMetaDataset, err)
	}
	var present []string
	for _, e := range entries {
		if _, err := datasets.EmbeddingSplitFile(filepath.Join(dataDir, e.Name()), "test"); err == nil {
			present = append(present, e.Name())
		} else if _, err := datasets.EmbeddingSplitFile(filepath.Join(dataDir, e.Name()), "train"); err == nil {
			present = append(present, e.Name())
		}
	}
	if len(present) == 0 {
		return nil, nil, fmt.Errorf("%w: %s has no source folders with train.npz or test.npz", datasets.ErrNoMetaDataset, dataDir)
	}
	return present, func(name string) (mdSplits, error) {
		return func(split string) (mdSplit, error) {
			dir := filepath.Join(dataDir, name)
			path, err := datasets.EmbeddingSplitFile(dir, split)
			if err != nil && split == "valid" {
				path, err = datasets.EmbeddingSplitFile(dir, "val")
			}
			if err != nil {
				return mdSplit{}, nil // no such split
			}
			cs, err := datasets.LoadEmbeddings(path, split, datasets.EmbeddingOptions{})
			if err != nil {
				return mdSplit{}, err
			}
			images := make([]int, cs.NumClasses())
			for k := range images {
				images[k] = cs.ImagesIn(k)
			}
			spec, err := datasets.PlainMDSpec(name, split, images)
			return mdSplit{classes: cs, spec: spec}, err
		}, nil
	}, nil
}
