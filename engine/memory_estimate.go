package engine

import (
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/mkbench/mkbench/engine/ops"
)

// The memory estimate: what a run of a Config holds at its peak, computed
// from the config alone, before anything is allocated, so that a size
// that cannot fit (bases=100000000) is refused with a clear message
// instead of ending in the runtime's out-of-memory crash.
//
// A model holds its parameters (with gradients, the optimizer's moments
// and a checkpoint's copy) and one gorgonia graph per shape it runs, each
// graph owning every intermediate value (and, in training, its gradient)
// for good: the training step's two task stages (T = MetaBatch tasks of
// NS support and NQ query rows), the evaluation graph (MetaBatch tasks
// with EvalQuery query rows per class; validation shares it) and the
// display graph (one task). Per task a graph holds ψ's activations for
// NS+NQ rows (the convolutional net's maps at every block), the bases ω
// (T×D×d: the noise, ω₀, each flow layer's output and its scale and
// shift, the final ω), the random features of NS+NQ rows (D wide, with
// their sines), the kernels (NS² and NQ·NS), the KRR solve and the prior's
// per-query activations. An evaluation also keeps each task's metric to
// its end (EvalTasks of them per test source, ValTasks for a
// validation); Validate bounds the counts, so the products here are taken
// in float64 on sizes that cannot overflow before it.
//
// The factors below were calibrated against the peak RSS of real runs
// (/usr/bin/time -v; see the lead's report): the estimate is within 2× of
// them for the sine and Omniglot presets, erring high.
const (
	memBase        = 80 << 20 // the Go runtime, gorgonia, the binary
	memPerOmega    = 3.0      // float64 copies of T×D×d without flows
	memPerFlowPart = 2.25     // more copies of T×D×d per coupling layer
	memPerFeature  = 2.25     // float64 copies of (NS+NQ)×D random features
	memPerConvAct  = 1.5      // float64 copies of each block's pooled maps per image
	memPerParam    = 6.0      // parameter, gradient, two moments, checkpoint, best
	memGradFactor  = 2.0      // a training graph holds every value's gradient too
)

// MemoryEstimate is the peak memory in bytes a training run of c
// (evaluation and validation included) is expected to need, for a task
// family with inputs of width inDim and targets of width outDim (see
// presets.Dims). It saturates at math.MaxUint64 rather than overflow.
func (c Config) MemoryEstimate(inDim, outDim int) uint64 {
	f := func(v int) float64 { return float64(v) }
	b := float64(memBase) + c.paramBytes(inDim, outDim)
	ns, nq := f(c.SupportPoints()), f(c.QueryPoints())
	if c.Classify() && !c.Varying {
		ns, nq = f(c.TrainingShot())*f(c.TrainingWay()), f(c.Query)*f(c.TrainingWay())
	}
	train := c.graphBytes(c.MetaBatch, ns, nq, inDim, outDim, true)
	display := c.graphBytes(1, f(c.SupportPoints()), 100, inDim, outDim, false)
	return saturate(b + train + c.evalBytes(inDim, outDim) + display + c.resultBytes())
}

// EvalMemoryEstimate is the peak memory in bytes evaluating a model of c
// needs (mkbench eval): its parameters, the evaluation graph and the
// evaluation's per-task results.
func (c Config) EvalMemoryEstimate(inDim, outDim int) uint64 {
	b := float64(memBase) + c.paramBytes(inDim, outDim)
	return saturate(b + c.evalBytes(inDim, outDim) + c.resultBytes())
}

// evalBytes is what the evaluation graph holds: MetaBatch tasks whose
// support images each come with their shifted copies (EvalShifts), with
// EvalQuery query rows per class; validation shares it. The products are
// taken in float64, where no size can overflow.
func (c Config) evalBytes(inDim, outDim int) float64 {
	f := func(v int) float64 { return float64(v) }
	return c.graphBytes(c.MetaBatch, f(c.SupportPoints())*f(c.EvalShifts()), f(c.EvalQuery)*f(max(c.Way, 1)), inDim, outDim, false)
}

// resultBytes is what an evaluation keeps for its whole length: each
// task's metric (EvalResult.PerTask), for every test source a run names
// (one where it names none or one), and the validation's.
func (c Config) resultBytes() float64 {
	sources := float64(max(len(c.TestSources), 1))
	return 8 * (float64(c.EvalTasks)*sources + float64(c.ValTasks))
}

func saturate(x float64) uint64 {
	if !(x < math.MaxUint64) {
		return math.MaxUint64
	}
	return uint64(x)
}

// paramCount is the number of trainable values of c, as params.go creates
// them, counted without allocating.
func (c Config) paramCount(inDim, outDim int) float64 {
	f := func(v int) float64 { return float64(v) }
	n := 0.0
	d := f(c.FeatureDim())
	if c.UsesResNet() {
		n += f(c.ResNet.NumParams())
	} else if s := c.Conv; s != nil {
		for l := 0; l < s.Blocks; l++ {
			n += f(s.Filters)*f(s.FanIn(l)) + f(s.Filters)
		}
	} else {
		prev := f(inDim)
		for _, w := range c.EmbedHidden {
			n += prev*f(w) + f(w)
			prev = f(w)
		}
	}
	H := f(c.InferHidden)
	in := d + f(outDim)
	for i := 0; i < c.inferLayers(); i++ {
		n += in*H + H
		in = H
	}
	dirs := 0.0
	switch c.Context {
	case ContextLSTM:
		dirs = 1
	case ContextBiLSTM:
		dirs = 2
	}
	n += dirs * (2*H*4*H + 4*H)
	ctx := (1 + dirs) * H
	P := f(c.PriorHidden)
	n += 2*(ctx*d+d) + d*P + P + P*P + P + 2*(P*d+d)
	if c.FlowLayers > 0 {
		n += f(c.FlowLayers) * (3*d*f(c.FlowHidden) + 2*ctx*f(c.FlowHidden) + 2*f(c.FlowHidden) + 2*d)
	}
	return n + 3
}

func (c Config) paramBytes(inDim, outDim int) float64 {
	return 8 * memPerParam * c.paramCount(inDim, outDim)
}

// graphBytes is what one graph of T tasks with ns support and nq query
// rows holds; a training graph holds gradients too.
func (c Config) graphBytes(T int, ns, nq float64, inDim, outDim int, train bool) float64 {
	f := func(v int) float64 { return float64(v) }
	rows := ns + nq
	d, D := f(c.FeatureDim()), f(c.Bases)
	per := rows * f(inDim) // the input rows
	var resnet float64
	if c.UsesResNet() {
		resnet = resnetBytes(c.ResNet, f(T)*rows, train)
		per += rows * d // its output
	} else if s := c.Conv; s != nil {
		h, w := s.Height, s.Width
		for l := 0; l < s.Blocks; l++ {
			// The blocks keep their pooled maps (the Winograd kernels
			// convolve and pool a tile at a time).
			h, w = pooled(s, h), pooled(s, w)
			per += memPerConvAct * rows * f(s.Filters) * f(h) * f(w)
		}
	} else {
		for _, w := range c.EmbedHidden {
			per += 2 * rows * f(w)
		}
	}
	per += 2 * rows * f(c.InferHidden) * f(c.inferLayers()) // the inference network
	if c.Kernel != KernelRBF {
		per += memPerOmega*D*d + memPerFlowPart*f(c.FlowLayers)*D*d
		per += memPerFeature * rows * D
	}
	per += 2 * (ns*ns + nq*ns)             // the kernels
	per += ns*f(outDim) + 2*nq*f(outDim)   // α, the predictions
	per += nq * (4*d + 2*f(c.PriorHidden)) // the prior's attention and MLP
	b := 8 * f(T) * per
	if train {
		b *= memGradFactor
	}
	return b + resnet
}

// resnetBytes is what a graph's ResNet op holds for a batch of images: the
// kernel's float32 maps (the input, every convolution's output, the stem's
// activation and pooled map, each block's two activations, three gradient
// buffers of the largest block map; a convolution's gradient overwrites
// its output), its float32 copy of the weights and, in training, the
// parameter gradients three times in float64 (the op's, its gradient
// nodes' outputs, the graph's accumulators). Outside the graph factor:
// nothing here is doubled for gradients.
func resnetBytes(s *ResNetSpec, images float64, train bool) float64 {
	f := func(v int) float64 { return float64(v) }
	per, gmax := f(s.InDim()), 0.0
	for l, c := range s.Convs() {
		m := f(c.OutHeight * c.OutWidth * c.Out)
		per += m
		switch {
		case l == 0:
			pooled := f((c.OutHeight+1)/2*((c.OutWidth+1)/2)*c.Out) * 1.25 // with the argmax bytes
			per += m + pooled
			gmax = pooled
		case strings.HasSuffix(c.Name, ".c1"):
			per += 2 * m
			gmax = max(gmax, m)
		}
	}
	per += 3 * gmax
	b := 4*per*images + 4*f(s.NumParams())
	if train {
		b += 3 * 8 * f(s.NumParams())
	}
	return b
}

// MachineMemory is the memory a new run can use, in bytes: the kernel's
// MemAvailable, or the cgroup's limit less its usage where that is lower;
// 0 when neither can be read (not Linux).
func MachineMemory() uint64 {
	avail := meminfo("MemAvailable")
	if limit, ok := readUint("/sys/fs/cgroup/memory.max"); ok {
		used, _ := readUint("/sys/fs/cgroup/memory.current")
		if limit > used && (avail == 0 || limit-used < avail) {
			avail = limit - used
		}
	} else if limit, ok := readUint("/sys/fs/cgroup/memory/memory.limit_in_bytes"); ok {
		used, _ := readUint("/sys/fs/cgroup/memory/memory.usage_in_bytes")
		if limit > used && (avail == 0 || limit-used < avail) {
			avail = limit - used
		}
	}
	return avail
}

// meminfo reads a field of /proc/meminfo in bytes, 0 if absent.
func meminfo(field string) uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err == nil {
			return kb << 10
		}
	}
	return 0
}

// readUint reads a number from a one-line file ("max" is no number).
func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// pooled is the size a map side of n pools to (ops.ConvSpec's rule).
func pooled(s *ConvSpec, n int) int {
	if s.FloorPool {
		return n / 2
	}
	return (n + 1) / 2
}

// The device's share. With a device in use (UseDevice), the backbone's
// passes hold their activations, scratch and float32 weights on it, in
// the slots of the model's device arena (ops' device_arena.go): one slot
// per pass running at once, each grown to the largest pass it served. A
// training run's task ranges run at once (taskStages slots, each of a
// range's images); evaluation, validation and the display run one pass
// at a time in the first. The backbone keeps its parameters resident
// there too (resident.go; of ResNet-18 the convolution weights): the
// masters, two moments and the step's gradient in double, the float32
// weights, and, in training, the summed gradient of each training pass. ops.ConvDeviceBytes and
// ops.ResNetDeviceBytes give a pass's bytes as the cores allocate them;
// memDevMargin covers what the device holds beyond our buffers (CLBlast's
// padded copies of a product's operands, the driver's rounding), and
// memDevBase the context, the compiled programs and CLBlast's kernels.
// The coupling flows run on the device too: each graph's flow kernel keeps
// its own buffers for its T tasks of D bases (ops.FlowDeviceBytes), the
// task stages', the evaluation's and the display's.
const (
	memDevBase   = 64 << 20
	memDevMargin = 1.25
)

// DeviceMemoryEstimate is the device memory in bytes a training run of c
// (evaluation and validation included) needs with an OpenCL device in
// use; 0 for a model with nothing on the device (no image backbone, no
// flow). It saturates at math.MaxUint64.
func (c Config) DeviceMemoryEstimate(inDim, outDim int) uint64 {
	return c.deviceBytes(true)
}

// EvalDeviceMemoryEstimate is DeviceMemoryEstimate for evaluating a model
// of c (mkbench eval): the evaluation's pass alone.
func (c Config) EvalDeviceMemoryEstimate(inDim, outDim int) uint64 {
	return c.deviceBytes(false)
}

func (c Config) deviceBytes(train bool) uint64 {
	b, ok := c.deviceBuffers(train)
	if !ok {
		return 0
	}
	return saturate(memDevBase + memDevMargin*b)
}

// deviceBuffers is what the backbone's and the flows' buffers hold on the
// device at a run's peak (no margin, no base); false when c runs nothing
// there.
func (c Config) deviceBuffers(train bool) (float64, bool) {
	f := func(v int) float64 { return float64(v) }
	var flows float64
	flowing := c.Kernel == KernelVRF && c.FlowLayers > 0
	if flowing {
		spec := flowSpec(c)
		flow := func(T int) float64 { return ops.FlowDeviceBytes(spec, T, c.Bases) }
		flows = flow(c.MetaBatch) // the evaluation's
		if train {
			flows += flow(1) // the display's
			stages := min(taskStages, max(c.MetaBatch, 1))
			for r := range stages {
				flows += flow((r+1)*c.MetaBatch/stages - r*c.MetaBatch/stages)
			}
		}
	}
	var pass func(images int) float64
	switch {
	case c.UsesResNet():
		s := *c.ResNet
		if s.Validate() != nil {
			return math.Inf(1), true
		}
		pass = func(n int) float64 { return ops.ResNetDeviceBytes(s, n) }
	case c.Conv != nil:
		s := *c.Conv
		if s.Validate() != nil {
			return math.Inf(1), true
		}
		pass = func(n int) float64 { return ops.ConvDeviceBytes(s, n) }
	default:
		return flows, flowing
	}
	bytes := func(images float64) float64 {
		if !(images < 1<<40) { // past any device, and past int on the way
			return math.Inf(1)
		}
		return pass(max(int(images), 1))
	}
	eval := f(c.MetaBatch) * (f(c.SupportPoints())*f(c.EvalShifts()) + f(c.EvalQuery)*f(max(c.Way, 1)))
	largest := max(eval, f(c.SupportPoints())+100) // the display's one task
	// The backbone's resident parameters (resident.go): the masters in
	// double and the float32 weights (a conv backbone's with the rotated
	// filters: counted as twice the values), and in training the moments
	// and the gradient in double.
	var resident float64
	switch {
	case c.UsesResNet():
		for _, cv := range c.ResNet.Convs() {
			resident += f(cv.Out) * f(cv.FanIn())
		}
	case c.Conv != nil:
		for l := 0; l < c.Conv.Blocks; l++ {
			resident += f(c.Conv.Filters)*f(c.Conv.FanIn(l)) + f(c.Conv.Filters)
		}
	}
	held := 8*resident + 4*2*resident
	if !train {
		return flows + bytes(largest) + held, true
	}
	held += 3 * 8 * resident
	ns, nq := f(c.SupportPoints()), f(c.QueryPoints())
	if c.Classify() && !c.Varying {
		ns, nq = f(c.TrainingShot())*f(c.TrainingWay()), f(c.Query)*f(c.TrainingWay())
	}
	stages := min(taskStages, max(c.MetaBatch, 1))
	rng := math.Ceil(f(c.MetaBatch)/f(stages)) * (ns + nq)
	b := bytes(max(largest, rng)) + f(stages-1)*bytes(rng)
	// And each task and seeded-summary pass's gradient sums in float32.
	b += held + 2*f(stages)*4*resident
	return flows + b, true
}

// DeviceMemory is the device the models built now run their backbones on
// (DeviceLabel) and its global memory in bytes; ok is false on the CPU.
func DeviceMemory() (label string, bytes uint64, ok bool) {
	dev := currentDevice()
	if dev == nil {
		return CPU, 0, false
	}
	return deviceLabel(dev), dev.Info.GlobalMem, true
}
