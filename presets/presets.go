package presets

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
)

// Preset is a named configuration.
type Preset struct {
	Name        string
	Description string
	Source      string // task family, see NewSources
	Variant     string // default variant
	Config      engine.Config
}

// Summary is the one-line description with the key settings.
func (p Preset) Summary() string {
	c := p.Config
	return fmt.Sprintf("%s (D=%d, d=%d, batch %d, %d iters, %s lr %g)", p.Description, c.Bases, c.FeatureDim(), c.MetaBatch, c.Iters, c.Optimizer, c.LR)
}

// sine returns the paper's sine-regression setup for k shots: ψ = MLP
// 1→40→40 ReLU, d = 40, D = 128, meta-batch 25, 10 query points, KL weight
// 1e-4. The paper trains with Adam at 1e-4; 1e-3 reaches the same quality
// in the short runs a workbench is for, and lr is a preset field. The flows
// train at a tenth of it (see engine.Config.FlowLRScale).
func sine(k int) Preset {
	c := engine.Config{
		FlowLayers: 4, FlowHidden: 128,
		EmbedHidden: []int{40, 40}, InferHidden: 40, PriorHidden: 40, Bases: 128,
		KLWeight: 1e-4, LambdaInit: 0.1,
		Optimizer: "adam", LR: 1e-3, Momentum: 0.9, FlowLRScale: 0.1,
		MetaBatch: 25, Shot: k, Query: 10,
		Iters: 20000, Seed: 1,
		LogEvery: 10, SnapshotEvery: 100, CheckpointSec: 30,
		EvalTasks: 1000, EvalQuery: 100, EvalSamples: 5,
	}
	p := Preset{
		Name:        fmt.Sprintf("sine-%dshot", k),
		Description: fmt.Sprintf("sine regression, %d-shot (y = A·sin(wx+b), x ∈ [-5,5])", k),
		Source:      "sine", Variant: "metakernel", Config: c,
	}
	if err := p.Config.ApplyVariant(p.Variant, 4); err != nil {
		panic(err)
	}
	return p
}

// omniglot returns the paper's Omniglot setup for way-way shot-shot
// tasks: Conv-4 ψ (64 filters, dropout keep 0.9, d = 256), D = 780,
// inference and prior networks of width 256 (three ELU layers in the
// inference network, per the appendix tables), KL weight 0.01, meta-batch
// 6, 15 queries per class, Adam 1e-3, 100,000 iterations; validation on
// 500 episodes every 500 iterations, and the paper's test protocol: 3,000
// episodes with 15 queries per class.
func omniglot(way, shot int) Preset {
	c := engine.Config{
		Conv:       &engine.ConvSpec{Channels: 1, Height: 28, Width: 28, Blocks: 4, Filters: 64, Keep: 0.9},
		FlowLayers: 4, FlowHidden: 128,
		InferHidden: 256, InferLayers: 3, PriorHidden: 256, Bases: 780,
		KLWeight: 0.01, LambdaInit: 0.1,
		Optimizer: "adam", LR: 1e-3, Momentum: 0.9, FlowLRScale: 0.1,
		MetaBatch: 6, Way: way, Shot: shot, Query: datasets.DefaultOmniglotQuery,
		Iters: 100000, Seed: 1,
		LogEvery: 10, SnapshotEvery: 100, CheckpointSec: 60,
		EvalTasks: 3000, EvalQuery: datasets.DefaultOmniglotQuery, EvalSamples: 1,
		ValEvery: 500, ValTasks: 500,
	}
	p := Preset{
		Name:        fmt.Sprintf("omniglot-%dw%ds", way, shot),
		Description: fmt.Sprintf("Omniglot %d-way %d-shot classification (Vinyals split, Conv-4)", way, shot),
		Source:      "omniglot", Variant: "metakernel", Config: c,
	}
	if err := p.Config.ApplyVariant(p.Variant, 4); err != nil {
		panic(err)
	}
	return p
}

// image returns a colour-image classification preset on the paper's
// settings for the family: ψ a convolutional net from the appendix tables
// (dropout keep 0.5), d = 256, D = 780, the Omniglot heads, meta-batch 8,
// the table's iterations.
func image(name, family, desc string, conv engine.ConvSpec, way, shot, iters int) Preset {
	p := omniglot(way, shot)
	c := &p.Config
	c.Conv = &conv
	c.MetaBatch, c.Iters = 8, iters
	p.Name, p.Source = name, family
	p.Description = fmt.Sprintf("%s %d-way %d-shot classification", desc, way, shot)
	return p
}

// embeddings is the deep-embedding setting: pre-computed 640-d WRN-28-10
// features, so ψ is one trainable 640→640 ReLU layer instead of a CNN.
func embeddings(way, shot int) Preset {
	p := omniglot(way, shot)
	c := &p.Config
	c.Conv, c.EmbedHidden = nil, []int{640}
	c.MetaBatch, c.Iters = 8, 150000
	p.Name, p.Source = fmt.Sprintf("wrn-%dw%ds", way, shot), "embeddings"
	p.Description = fmt.Sprintf("pre-trained WRN-28-10 embeddings (640-d), %d-way %d-shot", way, shot)
	return p
}

var (
	cifarConv = engine.ConvSpec{Channels: 3, Height: 32, Width: 32, Blocks: 4, Filters: 64, Keep: 0.5}
	miniConv  = engine.ConvSpec{Channels: 3, Height: 84, Width: 84, Blocks: 5, Filters: 64, Keep: 0.5, FloorPool: true}
)

var all = []Preset{sine(3), sine(5), sine(10), omniglot(5, 1), omniglot(5, 5), omniglot(20, 1), omniglot(20, 5),
	image("cifarfs-5w1s", "cifarfs", "CIFAR-FS", cifarConv, 5, 1, 200000),
	image("cifarfs-5w5s", "cifarfs", "CIFAR-FS", cifarConv, 5, 5, 200000),
	image("mini-5w1s", "miniimagenet", "miniImageNet", miniConv, 5, 1, 150000),
	image("mini-5w5s", "miniimagenet", "miniImageNet", miniConv, 5, 5, 150000),
	image("domainnet-5w1s", "domainnet", "DomainNet few-shot domain generalization (target quickdraw)", miniConv, 5, 1, 150000),
	image("domainnet-5w5s", "domainnet", "DomainNet few-shot domain generalization (target quickdraw)", miniConv, 5, 5, 150000),
	embeddings(5, 1), embeddings(5, 5),
	metaDataset(5, 1), metaDataset(5, 5), metaDatasetVarying(false), metaDatasetVarying(true),
	metaDatasetEmbed(5, 1), metaDatasetEmbed(5, 5), metaDatasetEmbed(0, 0),
	image("folder-5w1s", "folder", "your own images (--data DIR: DIR/<class>/*.png|jpg)", miniConv, 5, 1, 20000),
	image("folder-5w5s", "folder", "your own images (--data DIR: DIR/<class>/*.png|jpg)", miniConv, 5, 5, 20000),
}

// domainNetCap bounds the images read per DomainNet category (decoded in
// full the set is 12.4 GB).
const domainNetCap = 200

// All returns every preset, sorted by name.
func All() []Preset {
	out := append([]Preset(nil), all...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the preset called name (a fresh copy the caller may change).
func Get(name string) (Preset, error) {
	for _, p := range all {
		if p.Name == name {
			p.Config = cloneConfig(p.Config)
			return p, nil
		}
	}
	names := make([]string, 0, len(all))
	for _, p := range All() {
		names = append(names, p.Name)
	}
	return Preset{}, fmt.Errorf("unknown preset %q (available: %s; list them with: mkbench presets)", name, strings.Join(names, ", "))
}

// NewSource returns the task family called name, for families that need
// no data or settings (sine); see NewSources for the others.
func NewSource(name string) (task.Source, error) {
	switch name {
	case "sine":
		return datasets.Sine{}, nil
	case "omniglot":
		return nil, errors.New("the omniglot family reads data: use presets.NewSources")
	}
	return nil, fmt.Errorf("unknown task family %q", name)
}

// Sources are the task sources of a run.
type Sources struct {
	Train task.Source
	Val   task.Source // nil: no validation
	Test  task.Source // nil: evaluate on Train's family
	// TestBy, when set, is one test source per data source (Meta-Dataset),
	// for engine.RunOptions.TestBySource; Test is then the first.
	TestBy []engine.NamedSource
}

// NewSources returns the sources of the task family name for a run with
// cfg. Omniglot reads dataDir ("" = datasets.DefaultOmniglotDir()) and
// draws training tasks from the Vinyals train split, validation tasks
// from val and test tasks from test, cfg.Way-way cfg.Shot-shot. With
// cfg.AugmentShift the training source's images are shifted, and with
// cfg.AugmentRotate or cfg.AugmentScale then turned and scaled (only its:
// validation and test see the images as they are).
func NewSources(name string, cfg engine.Config, dataDir string) (Sources, error) {
	s, err := newSources(name, cfg, dataDir)
	if err != nil || cfg.AugmentShift == 0 && cfg.AugmentRotate == 0 && cfg.AugmentScale == 0 {
		return s, err
	}
	ch, h, w, ok := cfg.ImageInput()
	if !ok {
		return Sources{}, fmt.Errorf("augment_shift, augment_rotate and augment_scale change images, and %s runs read feature vectors: leave them out", name)
	}
	if s.Train, err = datasets.Shifted(s.Train, h, w, ch, cfg.AugmentShift); err != nil {
		return Sources{}, fmt.Errorf("augment_shift: %w", err)
	}
	if s.Train, err = datasets.Warped(s.Train, h, w, ch, cfg.AugmentRotate, cfg.AugmentScale); err != nil {
		return Sources{}, fmt.Errorf("augment_rotate, augment_scale: %w", err)
	}
	return s, nil
}

func newSources(name string, cfg engine.Config, dataDir string) (Sources, error) {
	if (len(cfg.Sources) > 0 || len(cfg.TestSources) > 0) && name != "metadataset" && name != "mdembed" {
		return Sources{}, fmt.Errorf("the sources and test_sources settings apply to the Meta-Dataset presets, not to %s", name)
	}
	if cfg.TrainingSplit() != engine.SplitTrain && name != "omniglot" && name != "cifarfs" && name != "miniimagenet" {
		return Sources{}, fmt.Errorf("train_split %s applies to the omniglot, cifarfs and miniimagenet presets, whose validation classes can join the training ones; %s runs train on their training split: leave it out", cfg.TrainSplit, name)
	}
	switch name {
	case "sine":
		return Sources{Train: datasets.Sine{}}, nil
	case "omniglot":
		if dataDir == "" {
			dataDir = datasets.DefaultOmniglotDir()
		}
		data, err := datasets.LoadOmniglot(dataDir, datasets.OmniglotOptions{})
		if err != nil {
			if errors.Is(err, datasets.ErrNoOmniglot) {
				return Sources{}, fmt.Errorf("%w; point --data at the folder holding images_background.zip and images_evaluation.zip (or set MKBENCH_DATA to the folder above it, which holds omniglot/)", err)
			}
			return Sources{}, err
		}
		return splitSources(cfg, func(split string, way, shot, query int) (task.Source, error) {
			set, err := data.Split(split)
			if err != nil {
				return nil, err
			}
			ep, err := datasets.NewEpisodes(set, way, shot, query)
			if err != nil {
				return nil, fmt.Errorf("%s split: %w", split, err)
			}
			return ep, nil
		})
	case "cifarfs", "miniimagenet":
		load, def := datasets.LoadCIFARFS, datasets.DefaultCIFARFSDir
		if name == "miniimagenet" {
			load, def = datasets.LoadMiniImageNet, datasets.DefaultMiniImageNetDir
		}
		if dataDir == "" {
			dataDir = def()
		}
		set, err := load(dataDir, datasets.ImageOptions{})
		if err != nil {
			return Sources{}, dataHint(err)
		}
		return classSources(cfg, func(split string) (datasets.ClassSource, error) { return set.Split(split) })
	case "embeddings":
		if dataDir == "" {
			dataDir = datasets.DefaultEmbeddingsDir()
		}
		return classSources(cfg, func(split string) (datasets.ClassSource, error) {
			path, err := datasets.EmbeddingSplitFile(dataDir, split)
			if err != nil {
				return nil, dataHint(err)
			}
			return datasets.LoadEmbeddings(path, split, datasets.EmbeddingOptions{})
		})
	case "metadataset", "mdembed":
		return metaDatasetSources(cfg, dataDir, name == "mdembed")
	case "folder":
		if dataDir == "" {
			return Sources{}, errors.New("the folder presets read your own images: give --data DIR, DIR holding one folder of images per class (or train/, val/ and test/ folders of them)")
		}
		ch, h, w, ok := cfg.ImageInput()
		if !ok || h != w {
			return Sources{}, errors.New("the folder family needs a square image input (set image_size)")
		}
		// What the episodes need of each split, checked on the folder's
		// listing before an image is decoded (a folder without validation
		// classes trains without validation, so val needs nothing).
		var need []datasets.FolderNeed
		for _, sp := range splitShapes(cfg, &Sources{}) {
			if sp.name != "val" {
				need = append(need, datasets.FolderNeed{Split: sp.name, Way: sp.way, Examples: sp.shot + sp.query})
			}
		}
		set, err := datasets.LoadFolder(dataDir, datasets.FolderOptions{ImageOptions: datasets.ImageOptions{Side: h}, SplitSeed: 1, Need: need})
		if errors.Is(err, datasets.ErrNoFolder) {
			return Sources{}, fmt.Errorf("%w; point --data at a folder holding one folder of images per class", err)
		}
		if err != nil {
			return Sources{}, err
		}
		mode := datasets.PixelMode{Channels: ch}
		var s Sources
		for _, sp := range splitShapes(cfg, &s) {
			cs, err := set.Split(sp.name)
			if err != nil && sp.name == "val" {
				continue // a folder without validation classes trains without validation
			}
			if err != nil {
				return Sources{}, fmt.Errorf("%s has no %s classes: give it more classes, or train/ and test/ folders", dataDir, sp.name)
			}
			conv, err := datasets.Convert(cs, mode, "")
			if err != nil {
				return Sources{}, err
			}
			ep, err := datasets.NewClassEpisodes(conv, sp.way, sp.shot, sp.query)
			if err != nil && sp.name == "val" {
				continue
			}
			if err != nil {
				return Sources{}, fmt.Errorf("%s: %w (give the folder more classes or images, or lower way, shot or query)", dataDir, err)
			}
			*sp.dst = ep
		}
		return s, nil
	case "domainnet":
		if dataDir == "" {
			dataDir = datasets.DefaultDomainNetDir()
		}
		d, err := datasets.LoadDomainNet(dataDir, datasets.DomainNetOptions{MaxPerClass: domainNetCap})
		if err != nil {
			return Sources{}, dataHint(err)
		}
		train, val, test, err := datasets.DomainNetProtocol(datasets.DefaultDomainNetTarget, false)
		if err != nil {
			return Sources{}, err
		}
		splits := map[string]datasets.DomainSplit{"train": train, "val": val, "test": test}
		return splitSources(cfg, func(split string, way, shot, query int) (task.Source, error) {
			return d.Episodes(splits[split], way, shot, query)
		})
	}
	return Sources{}, fmt.Errorf("unknown task family %q", name)
}

// splitShape is the episodes one split of a run draws, and where its
// source goes in Sources.
type splitShape struct {
	name             string
	way, shot, query int
	dst              *task.Source
}

// splitShapes are a run's three splits: training episodes of
// cfg.TrainingSplit()'s classes (the training split, or the training and
// validation splits together), cfg.TrainingWay() of them an episode,
// cfg.TrainingShot() shots and cfg.Query queries, validation and test
// episodes of cfg.Way, cfg.Shot and cfg.EvalQuery, their sources going
// into s.
func splitShapes(cfg engine.Config, s *Sources) []splitShape {
	return []splitShape{
		{cfg.TrainingSplit(), cfg.TrainingWay(), cfg.TrainingShot(), cfg.Query, &s.Train},
		{"val", cfg.Way, cfg.Shot, cfg.EvalQuery, &s.Val},
		{"test", cfg.Way, cfg.Shot, cfg.EvalQuery, &s.Test},
	}
}

// splitSources makes a run's three sources, split's for each of
// splitShapes.
func splitSources(cfg engine.Config, split func(name string, way, shot, query int) (task.Source, error)) (Sources, error) {
	var s Sources
	for _, sp := range splitShapes(cfg, &s) {
		src, err := split(sp.name, sp.way, sp.shot, sp.query)
		if err != nil {
			return Sources{}, err
		}
		*sp.dst = src
	}
	return s, nil
}

// classSources is splitSources for a family whose splits are class sets
// (CIFAR-FS, miniImageNet, embeddings): way-way shot-shot episodes of each.
func classSources(cfg engine.Config, set func(split string) (datasets.ClassSource, error)) (Sources, error) {
	return splitSources(cfg, func(split string, way, shot, query int) (task.Source, error) {
		cs, err := set(split)
		if err != nil {
			return nil, err
		}
		ep, err := datasets.NewClassEpisodes(cs, way, shot, query)
		if err != nil {
			return nil, fmt.Errorf("%s split: %w", split, err)
		}
		return ep, nil
	})
}

// dataHint adds the fix to a missing-data error.
func dataHint(err error) error {
	for _, e := range []error{datasets.ErrNoCIFAR, datasets.ErrNoMiniImageNet, datasets.ErrNoDomainNet, datasets.ErrNoEmbeddings} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w; point --data at your copy (see docs/data.md) or set MKBENCH_DATA to the folder above it, which holds the data sets' folders", err)
		}
	}
	return err
}
