package engine

import (
	"errors"
	"fmt"
	"math"
)

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
