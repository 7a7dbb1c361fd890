package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/mkbench/mkbench/engine/ops"
)

// Kernel selects how the base-learner's kernel is built.
type Kernel string

const (
	// KernelRBF is the paper's RBF baseline: bandwidth = mean pairwise distance
	// of the task's support features.
	KernelRBF Kernel = "rbf"
	// KernelRFF uses random Fourier features with ω ~ N(0, I): a fixed
	// spectral distribution, no inference network and no KL term.
	KernelRFF Kernel = "rff"
	// KernelVRF uses variational random features: ω ~ q(ω|S[,C]).
	KernelVRF Kernel = "vrf"
)

// Context selects the task-context network run over the tasks of a meta-batch.
type Context string

const (
	// ContextNone infers ω from the task's own support set only.
	ContextNone Context = "none"
	// ContextLSTM runs a forward LSTM over the tasks of a meta-batch.
	ContextLSTM Context = "lstm"
	// ContextBiLSTM runs a forward and a backward LSTM; the paper's choice.
	ContextBiLSTM Context = "bilstm"
)

// ConvSpec describes a convolutional feature extractor ψ (see
// ops.ConvSpec).
type ConvSpec = ops.ConvSpec

// ResNetSpec describes a ResNet-18 feature extractor ψ with batch norm
// (see ops.ResNetSpec).
type ResNetSpec = ops.ResNetSpec

// Backbones ψ can be, besides the MLP of EmbedHidden: "conv" (Conv, also
// chosen by an empty Backbone with Conv set) and "resnet18" (ResNet).
const (
	BackboneConv     = "conv"
	BackboneResNet18 = "resnet18"
)

// BN statistics a ResNet evaluates with (Config.BNEval).
const (
	// BNEvalEpisode normalizes each evaluation episode with its own
	// support images' statistics, as the Meta-Dataset reference does.
	BNEvalEpisode = "episode"
	// BNEvalRunning normalizes with the running statistics of training.
	BNEvalRunning = "running"
)

// Variants are the named ablation settings of the paper, in its table order.
var Variants = []string{"rbf", "rff", "vrf", "vrf+ctx", "vrf+cnf", "metakernel"}

// Config is a complete, validated description of a model and its training.
// Zero values are not meaningful defaults: presets fill every field and
// Validate rejects what cannot run.
type Config struct {
	// Model switches; a named variant sets these three (ApplyVariant).
	Kernel     Kernel  `json:"kernel"`
	Context    Context `json:"context"`
	FlowLayers int     `json:"flow_layers"`

	EmbedHidden []int `json:"embed_hidden"` // ψ: MLP widths; the last is the feature dim d
	// Conv, when set, makes ψ the convolutional network of the paper's
	// classification tables (Conv-4 on Omniglot) instead of the MLP; d is
	// then its output width.
	Conv *ConvSpec `json:"conv,omitempty"`
	// Backbone names ψ: "" or "conv" for the MLP or Conv, "resnet18" for
	// ResNet (the paper's Meta-Dataset backbone); d is then ResNet.Out.
	Backbone string      `json:"backbone,omitempty"`
	ResNet   *ResNetSpec `json:"resnet,omitempty"`
	// BNEval is the batch-norm statistics a ResNet evaluates with: "" or
	// "episode" (BNEvalEpisode), or "running" (BNEvalRunning). Training
	// always normalizes each task with its support images' statistics and
	// folds them into the running ones.
	BNEval string `json:"bn_eval,omitempty"`
	// Sources and TestSources name the data set's sources a run trains
	// and is tested on, where a family has several (Meta-Dataset): empty
	// is the family's default. Recorded so a resumed or re-evaluated run
	// reads the same ones.
	Sources     []string `json:"sources,omitempty"`
	TestSources []string `json:"test_sources,omitempty"`
	InferHidden int      `json:"infer_hidden"` // width of the inference MLP and the LSTM
	// InferLayers is the number of fully connected ELU layers of the
	// inference network: 2 in the paper's regression table, 3 in its
	// classification tables; 0 means 2.
	InferLayers int `json:"infer_layers,omitempty"`
	PriorHidden int `json:"prior_hidden"` // width of the prior network
	FlowHidden  int `json:"flow_hidden"`  // width of each coupling network
	Bases       int `json:"bases"`        // D: random Fourier bases per task

	KLWeight   float64 `json:"kl_weight"`
	LambdaInit float64 `json:"lambda_init"`
	// GammaInit is where γ, the scale of the classification logits
	// γ·K̃ᵀα + β, starts (0 means 1, the authors' value). The kernel
	// scores K̃ᵀα lie near [0, 1], so γ alone sets the softmax's
	// temperature, and Adam moves it by about lr a step: from 1 the
	// first shipped Omniglot models' γ climbed at nearly that rate for
	// their whole runs (3.6–4.1 after 4,000–5,500 iterations at lr 1e-3).
	GammaInit float64 `json:"gamma_init,omitempty"`

	Optimizer string  `json:"optimizer"` // "adam" or "sgd" (with momentum)
	LR        float64 `json:"lr"`
	// LRSchedule is how the learning rate moves over the iterations (see
	// LRAt): "" or "constant"; "cosine", from LR at the first iteration
	// to LRMin at the last (Iters); "step", multiplied by LRGamma every
	// LRStep iterations.
	LRSchedule string  `json:"lr_schedule,omitempty"`
	LRMin      float64 `json:"lr_min,omitempty"`
	LRStep     int     `json:"lr_step,omitempty"`
	LRGamma    float64 `json:"lr_gamma,omitempty"`
	// FlowLRScale multiplies the learning rate of the coupling flows'
	// parameters (0 means 1). Adam moves each of a coupling net's ~5k
	// output weights by ≈lr per step whatever the gradient's size, and
	// with noisy single-draw gradients the flow random-walks away from
	// the identity faster than the data term pulls it back.
	FlowLRScale float64 `json:"flow_lr_scale"`
	// PsiWeightDecay is a decoupled weight decay (AdamW's) of the
	// feature extractor ψ's weights: each step multiplies them by
	// 1 − lr·PsiWeightDecay before the optimizer's update. 0 = none.
	// Biases and the heads are not decayed: it regularises ψ alone.
	PsiWeightDecay float64 `json:"psi_weight_decay,omitempty"`
	Momentum       float64 `json:"momentum"`  // SGD only
	ClipNorm       float64 `json:"clip_norm"` // global gradient-norm clip; 0 = off

	MetaBatch int `json:"meta_batch"` // tasks per iteration
	// Way > 0 makes tasks Way-way classification: one-hot targets, logits
	// γ·K̃ᵀα + β with trainable scalars, softmax cross-entropy, accuracy as
	// the metric, and Shot, Query and EvalQuery counted per class. 0 is
	// regression.
	Way   int `json:"way,omitempty"`
	Shot  int `json:"shot"`  // support points per task (per class when classifying)
	Query int `json:"query"` // query points per task in training (per class when classifying)
	// Varying makes episodes vary in way, shots per class and query size,
	// drawn by the task source (a task.Varying: Meta-Dataset's sampler),
	// one episode per step. Way, Shot and Query are then the bounds of a
	// drawn episode: the largest way, the largest support set (not per
	// class) and the largest query per class, which the source enforces
	// and memory estimates size for.
	Varying bool `json:"varying,omitempty"`
	// TrainWay, when above Way, is the classes of a training episode
	// (Prototypical Networks train at a higher way than they test);
	// validation and test episodes have Way. The parameters do not
	// depend on the way.
	TrainWay int `json:"train_way,omitempty"`
	// TrainShot, when set, is the support images per class of a training
	// episode; validation and test episodes have Shot (the README measures
	// 1-shot Omniglot models trained on 5-shot episodes). The parameters
	// do not depend on the shot.
	TrainShot int `json:"train_shot,omitempty"`
	// AugmentShift, when set, shifts every image of a training episode by
	// up to this many pixels in each direction, each image by its own
	// uniform (dx, dy), the pixels it uncovers zero: the classes stay,
	// the strokes move. The shifts are drawn after the episode from its
	// iteration's task stream, so the episodes' classes and images are
	// the unshifted run's. Validation and test images are never shifted.
	// 0: none (the paper's).
	AugmentShift int `json:"augment_shift,omitempty"`
	// AugmentRotate and AugmentScale, when set, turn every image of a
	// training episode about its centre by its own angle, uniform within
	// ±AugmentRotate degrees, and scale it by its own factor, uniform
	// within 1 ± AugmentScale, read back bilinearly (Koch et al.'s affine
	// distortions of Omniglot, less the shear). Drawn after the shifts from
	// the same stream, so the episodes' classes and images are the
	// unwarped run's. Validation and test images are never warped. 0: none.
	AugmentRotate float64 `json:"augment_rotate,omitempty"`
	AugmentScale  float64 `json:"augment_scale,omitempty"`
	// TrainSplit is the split training episodes are drawn from: "train"
	// (also when empty) or "trainval", the training and validation
	// classes together, as Vinyals et al. and Prototypical Networks train
	// on the 1,200 characters of their Omniglot split (the MetaKernel
	// paper on 1,100). A validation would then score classes the model
	// has trained on and pick nothing, so trainval takes val_every 0 and
	// the last parameters are tested.
	TrainSplit string `json:"train_split,omitempty"`
	// EvalSupportShift, when set, tests (the run's final test, mkbench
	// eval) with every support image joined by its copies shifted by up to
	// this many pixels in each direction: (2r+1)² images of each, the
	// original among them, the uncovered pixels zero; a k-shot episode is
	// scored as a k·(2r+1)²-shot one. Query images are never shifted, nor
	// training episodes, and the validations during training stay
	// unshifted, so the checkpoint a run picks is the one it picks
	// without. Test-time augmentation of the support set, for image
	// classification with fixed episodes; 0: none (the paper's).
	EvalSupportShift int `json:"eval_support_shift,omitempty"`

	Iters int    `json:"iters"`
	Seed  uint64 `json:"seed"`

	LogEvery      int `json:"log_every"`      // iterations between metrics rows
	SnapshotEvery int `json:"snapshot_every"` // iterations between display snapshots
	CheckpointSec int `json:"checkpoint_sec"` // seconds between periodic checkpoints; 0 = only at the end

	EvalTasks   int `json:"eval_tasks"`   // fresh tasks in the final evaluation
	EvalQuery   int `json:"eval_query"`   // query points per evaluation task
	EvalSamples int `json:"eval_samples"` // ω draws averaged per evaluation prediction

	// Validation during training (classification presets): every ValEvery
	// iterations, ValTasks tasks of the run's validation source; the
	// parameters with the best validation metric are kept in their own
	// checkpoint and used by the final evaluation. 0 = off.
	ValEvery int `json:"val_every,omitempty"`
	ValTasks int `json:"val_tasks,omitempty"`
}

// Learning-rate schedules (Config.LRSchedule).
const (
	LRConstant = "constant"
	LRCosine   = "cosine"
	LRStepwise = "step"
)

// LRAt is the learning rate of training iteration iter (0-based). Being a
// function of the iteration alone, a resumed run continues the schedule
// exactly; a run whose iterations are extended on resume stretches a
// cosine from there on.
func (c Config) LRAt(iter int) float64 {
	switch c.LRSchedule {
	case LRCosine:
		t := 1.0
		if c.Iters > 1 {
			t = math.Min(1, float64(iter)/float64(c.Iters-1))
		}
		return c.LRMin + 0.5*(c.LR-c.LRMin)*(1+math.Cos(math.Pi*t))
	case LRStepwise:
		return c.LR * math.Pow(c.LRGamma, float64(iter/c.LRStep))
	}
	return c.LR
}

// TrainingWay is the classes of a training episode: TrainWay when set,
// else Way.
func (c Config) TrainingWay() int {
	if c.TrainWay > 0 {
		return c.TrainWay
	}
	return c.Way
}

// TrainingShot is the support images per class of a training episode:
// TrainShot when set, else Shot.
func (c Config) TrainingShot() int {
	if c.TrainShot > 0 {
		return c.TrainShot
	}
	return c.Shot
}

// Training splits (Config.TrainSplit).
const (
	SplitTrain    = "train"
	SplitTrainVal = "trainval"
)

// TrainingSplit is the split training episodes are drawn from:
// TrainSplit when set, else "train".
func (c Config) TrainingSplit() string {
	if c.TrainSplit != "" {
		return c.TrainSplit
	}
	return SplitTrain
}

// ClearTrainingShape clears the settings that shape only training
// episodes (TrainWay, TrainShot): evaluation draws none, and a model is
// rebuilt at the way and shot it is tested on.
func (c *Config) ClearTrainingShape() { c.TrainWay, c.TrainShot = 0, 0 }

// Classify reports whether tasks are classification tasks.
func (c Config) Classify() bool { return c.Way > 0 }

// InitialGamma is γ's starting value: GammaInit when set, else 1.
func (c Config) InitialGamma() float64 {
	if c.GammaInit != 0 {
		return c.GammaInit
	}
	return 1
}

// SupportPoints is the number of support rows of a task
// (with Varying, the largest support set).
func (c Config) SupportPoints() int {
	if c.Varying {
		return c.Shot
	}
	return c.Shot * max(c.Way, 1)
}

// QueryPoints is the number of query rows of a training task.
func (c Config) QueryPoints() int { return c.Query * max(c.Way, 1) }

// inferLayers is the number of layers of the inference network.
func (c Config) inferLayers() int {
	if c.InferLayers > 0 {
		return c.InferLayers
	}
	return 2
}

// Variant returns the name of the paper variant c corresponds to, or a
// description of the switches when it matches none.
func (c Config) Variant() string {
	switch {
	case c.Kernel == KernelRBF:
		return "rbf"
	case c.Kernel == KernelRFF:
		return "rff"
	case c.Context == ContextNone && c.FlowLayers == 0:
		return "vrf"
	case c.Context != ContextNone && c.FlowLayers == 0:
		return "vrf+ctx"
	case c.Context == ContextNone && c.FlowLayers > 0:
		return "vrf+cnf"
	}
	return "metakernel"
}

// ApplyVariant sets the kernel, context and flow switches for a named
// variant. flowLayers is used by the flow variants (the paper uses 4).
func (c *Config) ApplyVariant(name string, flowLayers int) error {
	switch strings.ToLower(name) {
	case "rbf":
		c.Kernel, c.Context, c.FlowLayers = KernelRBF, ContextNone, 0
	case "rff":
		c.Kernel, c.Context, c.FlowLayers = KernelRFF, ContextNone, 0
	case "vrf":
		c.Kernel, c.Context, c.FlowLayers = KernelVRF, ContextNone, 0
	case "vrf+ctx":
		c.Kernel, c.Context, c.FlowLayers = KernelVRF, ContextBiLSTM, 0
	case "vrf+cnf":
		c.Kernel, c.Context, c.FlowLayers = KernelVRF, ContextNone, flowLayers
	case "metakernel":
		c.Kernel, c.Context, c.FlowLayers = KernelVRF, ContextBiLSTM, flowLayers
	default:
		return fmt.Errorf("engine: unknown variant %q (choose one of %s)", name, strings.Join(Variants, ", "))
	}
	return nil
}

// UsesResNet reports whether ψ is the ResNet.
func (c Config) UsesResNet() bool { return c.Backbone == BackboneResNet18 }

// FeatureDim is d, the embedding width and hence the dimension of each ω.
func (c Config) FeatureDim() int {
	if c.UsesResNet() {
		if c.ResNet == nil {
			return 0
		}
		return c.ResNet.OutDim()
	}
	if c.Conv != nil {
		return c.Conv.OutDim()
	}
	if len(c.EmbedHidden) == 0 {
		return 0
	}
	return c.EmbedHidden[len(c.EmbedHidden)-1]
}

// Ceilings of a config's counts. A config comes from files (config.json,
// a checkpoint, a model's header, a sweep file) and flags as much as from
// presets, so Validate bounds every count before anything is sized by it.
// Each ceiling is far above any run that could finish and low enough that
// the products the engine forms of them (a task's support rows × its
// shifted copies, the memory estimate's sizes) cannot overflow an int.
// Whether a run fits the machine is the memory estimate's to say
// (MemoryEstimate), before training starts; these keep its arithmetic,
// and what is allocated before it, sound.
const (
	// MaxSize bounds each width and size of a task: embed_hidden,
	// infer_hidden, prior_hidden and flow_hidden, bases (D), way,
	// train_way, shot (max_support), train_shot, query, eval_query,
	// eval_samples and meta_batch: 65,536. A weight matrix between two
	// layers that wide holds 2³² values (32 GiB in float64), and no data
	// set mkbench reads has that many classes.
	MaxSize = 1 << 16
	// MaxTasks bounds eval_tasks and val_tasks: 1,048,576. An evaluation's
	// 95% interval narrows as 1/√tasks: a million tasks narrow the paper's
	// 600-task intervals 40-fold, below any difference its tables report;
	// their per-task results take 8 MiB.
	MaxTasks = 1 << 20
	// MaxIters bounds iters and the settings counted in iterations or
	// seconds (log_every, snapshot_every, val_every, lr_step,
	// checkpoint_sec): 10⁹. At the fastest step measured (0.9 ms on sine)
	// that is ten days of training; in seconds, 31 years.
	MaxIters = 1_000_000_000
	// MaxLayers bounds the layers of a network: embed_hidden's layers,
	// infer_layers, flow_layers and a ResNet's stages: 64, as a Conv ψ's
	// blocks (ops.ConvSpec).
	MaxLayers = 64
)

// Validate reports the first setting that cannot run, naming it by the
// key a user types (meta_batch, bases); every count is bounded by the
// ceilings above.
func (c Config) Validate() error {
	var errs []error
	// in refuses a count outside lo … hi, named by key.
	in := func(key string, v, lo, hi int) {
		switch {
		case v < lo && lo == 1:
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", key, v))
		case v < lo:
			errs = append(errs, fmt.Errorf("%s must be ≥ %d, got %d", key, lo, v))
		case v > hi:
			errs = append(errs, fmt.Errorf("%s must be at most %d, got %d", key, hi, v))
		}
	}
	pos := func(key string, v, hi int) { in(key, v, 1, hi) }
	switch c.Kernel {
	case KernelRBF, KernelRFF, KernelVRF:
	default:
		errs = append(errs, fmt.Errorf("kernel %q is not one of rbf, rff, vrf", c.Kernel))
	}
	switch c.Context {
	case ContextNone, ContextLSTM, ContextBiLSTM:
	default:
		errs = append(errs, fmt.Errorf("context %q is not one of none, lstm, bilstm", c.Context))
	}
	if c.Kernel != KernelVRF && (c.Context != ContextNone || c.FlowLayers != 0) {
		errs = append(errs, fmt.Errorf("context and flows need the variational kernel (vrf), not %q", c.Kernel))
	}
	switch c.Backbone {
	case "", BackboneConv:
		if c.ResNet != nil {
			errs = append(errs, fmt.Errorf("resnet is set but backbone is %q: set backbone %q to use it", c.Backbone, BackboneResNet18))
		}
		if c.Backbone == BackboneConv && c.Conv == nil {
			errs = append(errs, errors.New("backbone conv needs a conv spec"))
		}
	case BackboneResNet18:
		switch {
		case c.ResNet == nil:
			errs = append(errs, errors.New("backbone resnet18 needs a resnet spec"))
		case c.Conv != nil:
			errs = append(errs, errors.New("backbone resnet18 and a conv spec exclude each other"))
		default:
			if err := c.ResNet.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		errs = append(errs, fmt.Errorf("backbone %q is not one of conv, resnet18", c.Backbone))
	}
	switch c.BNEval {
	case "", BNEvalEpisode, BNEvalRunning:
	default:
		errs = append(errs, fmt.Errorf("bn_eval %q is not one of episode, running", c.BNEval))
	}
	if c.Conv != nil {
		if err := c.Conv.Validate(); err != nil {
			errs = append(errs, err)
		}
	} else if !c.UsesResNet() && len(c.EmbedHidden) == 0 {
		errs = append(errs, errors.New("embed_hidden needs at least one layer"))
	}
	if c.Way == 1 {
		errs = append(errs, errors.New("way must be at least 2: a 1-way task has one class, so every prediction is right"))
	}
	if c.Varying && (c.Way == 0 || c.MetaBatch != 1) {
		errs = append(errs, fmt.Errorf("varying episodes are classification episodes drawn one per step: need way ≥ 2 and meta_batch 1, got way %d, meta_batch %d", c.Way, c.MetaBatch))
	}
	if c.TrainWay != 0 && (c.TrainWay < c.Way || c.Way == 0 || c.Varying) {
		errs = append(errs, fmt.Errorf("train_way must be at least way (%d) on fixed classification episodes, got %d", c.Way, c.TrainWay))
	}
	if c.TrainShot != 0 && (c.TrainShot < 1 || c.Way == 0 || c.Varying) {
		errs = append(errs, fmt.Errorf("train_shot must be ≥ 1 on fixed classification episodes (0 trains at shot), got %d", c.TrainShot))
	}
	if c.ValEvery > 0 && c.ValTasks <= 0 {
		errs = append(errs, errors.New("val_every needs val_tasks > 0"))
	}
	switch c.TrainSplit {
	case "", SplitTrain:
	case SplitTrainVal:
		if c.Way == 0 || c.Varying {
			errs = append(errs, errors.New("train_split chooses the classes of fixed classification episodes; this run has none: leave it out"))
		} else if c.ValEvery > 0 {
			errs = append(errs, errors.New("train_split trainval trains on the validation classes, so a validation would score classes the model has seen and select nothing: set val_every=0 (the last parameters are tested)"))
		}
	default:
		errs = append(errs, fmt.Errorf("train_split %q is not one of train, trainval", c.TrainSplit))
	}
	if len(c.EmbedHidden) > MaxLayers {
		errs = append(errs, fmt.Errorf("embed_hidden has %d layers, at most %d", len(c.EmbedHidden), MaxLayers))
	} else {
		for i, w := range c.EmbedHidden {
			pos(fmt.Sprintf("embed_hidden[%d]", i), w, MaxSize)
		}
	}
	if c.ResNet != nil && len(c.ResNet.Widths) > MaxLayers {
		errs = append(errs, fmt.Errorf("resnet has %d stages, at most %d", len(c.ResNet.Widths), MaxLayers))
	}
	in("flow_layers", c.FlowLayers, 0, MaxLayers)
	in("infer_layers", c.InferLayers, 0, MaxLayers)
	pos("infer_hidden", c.InferHidden, MaxSize)
	pos("prior_hidden", c.PriorHidden, MaxSize)
	pos("flow_hidden", c.FlowHidden, MaxSize)
	pos("bases", c.Bases, MaxSize)
	pos("meta_batch", c.MetaBatch, MaxSize)
	in("way", c.Way, 0, MaxSize)
	in("train_way", c.TrainWay, math.MinInt, MaxSize) // their lower bounds are checked above
	pos("shot", c.Shot, MaxSize)
	in("train_shot", c.TrainShot, math.MinInt, MaxSize)
	pos("query", c.Query, MaxSize)
	pos("iters", c.Iters, MaxIters)
	pos("log_every", c.LogEvery, MaxIters)
	pos("snapshot_every", c.SnapshotEvery, MaxIters)
	in("val_every", c.ValEvery, 0, MaxIters)
	in("lr_step", c.LRStep, 0, MaxIters)
	in("checkpoint_sec", c.CheckpointSec, 0, MaxIters)
	pos("eval_tasks", c.EvalTasks, MaxTasks)
	in("val_tasks", c.ValTasks, 0, MaxTasks)
	pos("eval_query", c.EvalQuery, MaxSize)
	pos("eval_samples", c.EvalSamples, MaxSize)
	if c.FlowLayers > 0 && c.FeatureDim() < 2 {
		errs = append(errs, errors.New("flows need a feature dimension of at least 2"))
	}
	if !(c.LR > 0) {
		errs = append(errs, fmt.Errorf("lr (the learning rate) must be positive, got %g", c.LR))
	}
	if !(c.LambdaInit > 0) {
		errs = append(errs, fmt.Errorf("lambda_init must be positive, got %g", c.LambdaInit))
	}
	if c.GammaInit != 0 && !(c.GammaInit > 0 && c.GammaInit <= 1e4) {
		errs = append(errs, fmt.Errorf("gamma_init must be in (0, 10000] (0 means 1), got %g", c.GammaInit))
	} else if c.GammaInit != 0 && !c.Classify() {
		errs = append(errs, errors.New("gamma_init scales classification logits; a regression task has none: leave it out"))
	}
	switch c.LRSchedule {
	case "", LRConstant:
	case LRCosine:
		if !(c.LRMin >= 0 && c.LRMin < c.LR) {
			errs = append(errs, fmt.Errorf("lr_min must be in [0, lr) for the cosine schedule, got %g (lr %g)", c.LRMin, c.LR))
		}
	case LRStepwise:
		if c.LRStep <= 0 || !(c.LRGamma > 0 && c.LRGamma <= 1) {
			errs = append(errs, fmt.Errorf("the step schedule needs lr_step > 0 and lr_gamma in (0, 1], got %d and %g", c.LRStep, c.LRGamma))
		}
	default:
		errs = append(errs, fmt.Errorf("lr_schedule %q is not one of constant, cosine, step", c.LRSchedule))
	}
	if err := c.validateAugment(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateEvalShift(); err != nil {
		errs = append(errs, err)
	}
	if !(c.PsiWeightDecay >= 0 && c.PsiWeightDecay*c.LR < 1) {
		errs = append(errs, fmt.Errorf("psi_weight_decay must be ≥ 0 and below 1/lr (a step must not flip ψ's weights), got %g", c.PsiWeightDecay))
	}
	if c.FlowLRScale < 0 || math.IsNaN(c.FlowLRScale) {
		errs = append(errs, fmt.Errorf("flow_lr_scale must be ≥ 0, got %g", c.FlowLRScale))
	}
	if c.KLWeight < 0 || c.ClipNorm < 0 || c.Momentum < 0 || c.Momentum >= 1 {
		errs = append(errs, errors.New("kl_weight and clip_norm must be ≥ 0 and momentum in [0,1)"))
	}
	switch c.Optimizer {
	case "adam", "sgd":
	default:
		errs = append(errs, fmt.Errorf("optimizer %q is not adam or sgd", c.Optimizer))
	}
	if len(errs) > 0 {
		return fmt.Errorf("engine: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// ImageInput is the image an image model takes — channels, height, width
// of its Conv or ResNet ψ — and false for a model of other inputs.
func (c Config) ImageInput() (ch, h, w int, ok bool) {
	switch {
	case c.Conv != nil:
		return c.Conv.Channels, c.Conv.Height, c.Conv.Width, true
	case c.ResNet != nil:
		return c.ResNet.Channels, c.ResNet.Height, c.ResNet.Width, true
	}
	return 0, 0, 0, false
}

// validateAugment checks that AugmentShift, AugmentRotate and
// AugmentScale can move, turn and scale this run's images.
func (c Config) validateAugment() error {
	if !(c.AugmentRotate >= 0 && c.AugmentRotate <= 180) {
		return fmt.Errorf("augment_rotate must be 0 … 180 degrees, got %g", c.AugmentRotate)
	}
	if !(c.AugmentScale >= 0 && c.AugmentScale < 1) {
		return fmt.Errorf("augment_scale must be at least 0 and under 1 (images scaled within 1 ± it), got %g", c.AugmentScale)
	}
	k := c.AugmentShift
	if k < 0 {
		return fmt.Errorf("augment_shift must be ≥ 0 pixels, got %d", k)
	}
	if k == 0 && c.AugmentRotate == 0 && c.AugmentScale == 0 {
		return nil
	}
	_, h, w, ok := c.ImageInput()
	if !ok {
		what := "augment_shift shifts"
		if k == 0 && c.AugmentRotate != 0 {
			what = "augment_rotate turns"
		} else if k == 0 {
			what = "augment_scale scales"
		}
		return fmt.Errorf("%s images, and this run's ψ reads feature vectors, not images: leave it out", what)
	}
	return shiftInFrame("augment_shift", k, h, w)
}

// shiftInFrame reports a shift of k pixels (setting key) that would move
// an h×w image out of its frame.
func shiftInFrame(key string, k, h, w int) error {
	if k >= min(h, w) {
		return fmt.Errorf("%s %d would shift a %d×%d image out of its frame: give at most %d", key, k, h, w, min(h, w)-1)
	}
	return nil
}

// validateEvalShift checks that EvalSupportShift can copy this run's
// support images.
func (c Config) validateEvalShift() error {
	r := c.EvalSupportShift
	if r == 0 {
		return nil
	}
	if r < 0 {
		return fmt.Errorf("eval_support_shift must be ≥ 0 pixels, got %d", r)
	}
	_, h, w, ok := c.ImageInput()
	switch {
	case !ok || !c.Classify():
		return errors.New("eval_support_shift copies the support images of image classification episodes, and this run's ψ reads feature vectors: leave it out")
	case c.Varying:
		return errors.New("eval_support_shift needs episodes of a fixed way and shot, and this run's vary: leave it out")
	}
	return shiftInFrame("eval_support_shift", r, h, w)
}

// EvalShifts is the number of images each support image becomes in an
// evaluation: (2·EvalSupportShift+1)², 1 without.
func (c Config) EvalShifts() int {
	n := 2*max(c.EvalSupportShift, 0) + 1
	return n * n
}
