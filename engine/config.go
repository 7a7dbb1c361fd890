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
	// episode; validation and test episodes have Shot (docs/results.md measures
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
