package engine

import (
	"fmt"
	"math"

	"github.com/mkbench/mkbench/engine/ops"
)

// residentOff turns resident parameters off (tests and benchmarks compare
// with part 1's path, where weights go up and gradients come down every
// pass).
var residentOff bool

// resident is a model's backbone parameters kept on its device while it
// trains (ops.ResidentStore, laid out by ops.ConvResident or
// ops.ResNetResident): the masters, the optimizer's moments (Adam's
// two, SGD's velocity) and the step's gradient live there, the
// optimizer's step updates them there, and the host's copy (Params,
// Optimizer.M and V of those tensors) is brought up to date only where
// something reads it (SyncHost): checkpoints, evaluations and displays.
// The evaluation and display graphs' backbones read the device's float32
// weights too (attachReaders), which go up only when the host's values
// they are given differ from the ones those weights were made from
// (ops.ResidentStore's rule: compared bit for bit, so a value changed on
// the host by anyone is never evaluated stale).
//
// Which side holds the truth: after a sync, or after the host's values
// change (a checkpoint restored), the host; the next training step then
// uploads them (and the optimizer's moments) before it runs, so the
// device's copy never goes stale. Down and up again are exact (double
// masters, or float32 ones through float64), so a sync changes no bit of
// the run.
type resident struct {
	store    *ops.ResidentStore
	conv     *ops.ConvResident   // a Conv-4/5 backbone's, or
	resnet   *ops.ResNetResident // ResNet-18's convolution weights
	idx      []int               // Params.List index of each resident tensor, in the store's order
	onDevice bool                // the device's values are ahead of the host's
	opt      *Optimizer
	steps    []ops.AdamStep
	sgd      []ops.SGDStep
}

// newResident is the resident store of m, or nil when its backbone stays
// on the host's values: no device, no image backbone, or residentOff. A
// conv backbone's weights and biases are resident; of ResNet-18, the
// convolution weights (batch norm's γ and β and the linear layer are read
// on the host every pass).
func newResident(m *Model) (*resident, error) {
	dev, c := m.pool.Device(), m.Cfg
	if dev == nil || residentOff {
		return nil, nil
	}
	r := &resident{}
	var err error
	switch {
	case c.UsesResNet():
		if r.resnet, err = ops.NewResNetResident(dev, *c.ResNet); err == nil {
			r.store = r.resnet.ResidentStore
			ps := c.ResNet.Params()
			for l := range len(c.ResNet.Convs()) {
				r.idx = append(r.idx, paramIndex(m.Params, resnetParam(ps[3*l].Name)))
			}
		}
	case c.Conv != nil:
		if r.conv, err = ops.NewConvResident(dev, *c.Conv); err == nil {
			r.store = r.conv.ResidentStore
			for l := range c.Conv.Blocks {
				r.idx = append(r.idx, paramIndex(m.Params, fmt.Sprintf("conv%d.w", l)), paramIndex(m.Params, fmt.Sprintf("conv%d.b", l)))
			}
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("engine: the backbone's parameters on %s: %w", dev.Info.Name, err)
	}
	return r, nil
}

// has says whether parameter i is resident.
func (r *resident) has(i int) bool {
	for _, k := range r.idx {
		if k == i {
			return true
		}
	}
	return false
}

// attachReaders makes the backbone's ops of gr, a graph that takes no
// gradient (an evaluation's, a display's), read their weights from r.
func (r *resident) attachReaders(gr *graph) error {
	return r.attachGraph(gr, true)
}

// attach makes the backbone's ops of graphs keep their parameters in r.
func (r *resident) attach(graphs ...[]*graph) error {
	for _, gs := range graphs {
		for _, gr := range gs {
			if err := r.attachGraph(gr, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *resident) attachGraph(gr *graph, reader bool) error {
	for _, n := range gr.convs {
		if r.conv == nil {
			break
		}
		attach := n.SetResident
		if reader {
			attach = n.ReadResident
		}
		err := attach(r.conv)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	for _, n := range gr.resnets {
		if r.resnet == nil {
			break
		}
		attach := n.SetResident
		if reader {
			attach = n.ReadResident
		}
		err := attach(r.resnet)
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
	return nil
}

// detach undoes attach or attachReaders for graphs being dropped.
func (r *resident) detach(graphs ...[]*graph) {
	for _, gs := range graphs {
		for _, gr := range gs {
			for _, n := range gr.convs {
				if r.conv != nil {
					n.ReleaseResident(r.conv)
				}
			}
			for _, n := range gr.resnets {
				if r.resnet != nil {
					n.ReleaseResident(r.resnet)
				}
			}
		}
	}
}

// tensors gives the resident tensors of ps (in r's order) and of opt's M
// and V (nil for SGD, which has no V).
func (r *resident) tensors(ps *Params, opt *Optimizer) (p, m, v [][]float64) {
	for _, i := range r.idx {
		p, m = append(p, ps.List[i].Data), append(m, opt.M[i])
		if opt.Kind == "adam" {
			v = append(v, opt.V[i])
		}
	}
	return
}

// toDevice makes the device hold the truth before a training step with
// opt: the host's values go up when they are the newer, or when opt is
// another optimizer than the one whose moments the device holds (whose
// values first come down into it).
func (r *resident) toDevice(m *Model, opt *Optimizer) error {
	if r.onDevice && r.opt == opt {
		return nil
	}
	if err := m.SyncHost(); err != nil {
		return err
	}
	if opt.Kind != "adam" && opt.Kind != "sgd" || len(opt.M) != len(m.Params.List) || opt.Kind == "adam" && len(opt.V) != len(m.Params.List) {
		return fmt.Errorf("engine: the optimizer's state does not fit the model's resident parameters")
	}
	if err := r.store.Upload(r.tensors(m.Params, opt)); err != nil {
		return fmt.Errorf("engine: uploading the backbone's parameters: %w", err)
	}
	r.onDevice, r.opt = true, opt
	return nil
}

// SyncHost brings the host's copy of a model's parameters (and of its
// optimizer's moments) up to date with the device's, where they are kept
// while it trains on a device; it does nothing otherwise. Everything in
// the engine that reads the parameters calls it (checkpoints, evaluation,
// displays); a caller reading Params or the optimizer's M and V directly
// after training steps calls it first.
func (m *Model) SyncHost() error {
	r := m.res
	if r == nil || !r.onDevice {
		return nil
	}
	p, mm, v := r.tensors(m.Params, r.opt)
	if err := r.store.Download(p, mm, v); err != nil {
		return fmt.Errorf("engine: downloading the backbone's parameters: %w", err)
	}
	r.onDevice = false
	return nil
}

// hostChanged is called before the host's parameters are replaced (a
// checkpoint restored): the device's values come down into the optimizer
// that held them, and the next training step uploads the new ones.
func (m *Model) hostChanged() error {
	if m.res == nil {
		return nil
	}
	if err := m.SyncHost(); err != nil {
		return err
	}
	m.res.opt = nil
	return nil
}

// deviceNormSq sums the resident gradients' squares on the device; a
// value that is not finite is the step's ErrNonFinite.
func (r *resident) deviceNormSq() (float64, error) {
	sq, err := r.store.GradNormSq()
	if err != nil {
		return 0, fmt.Errorf("engine: the backbone's gradient norm: %w", err)
	}
	return sq, nil
}

// nonFinite is the error of a step whose device gradient is not finite.
func (r *resident) nonFinite(sq float64) error {
	if math.IsNaN(sq) || math.IsInf(sq, 0) {
		return &NonFiniteError{What: "the gradient of the convolution backbone (on the device)", Value: sq}
	}
	return nil
}

// update runs o's update (Adam or SGD) of the resident tensors on the
// device, with the host's scalars computed as Step computes them for the
// others.
func (r *resident) update(o *Optimizer, scale, step float64) error {
	r.steps, r.sgd = r.steps[:0], r.sgd[:0]
	for _, i := range r.idx {
		lr := 1.0
		if i < len(o.Scale) {
			lr = o.Scale[i]
		}
		decay, factor := false, 0.0
		if i < len(o.Decay) && o.Decay[i] > 0 {
			decay, factor = true, 1-lr*o.LR*o.Decay[i]
		}
		if o.Kind == "adam" {
			r.steps = append(r.steps, ops.AdamStep{Scale: scale, Step: lr * step, B1: o.Beta1, B2: o.Beta2, Eps: o.Eps, Decay: decay, Factor: factor})
		} else {
			r.sgd = append(r.sgd, ops.SGDStep{Scale: scale, LR: lr * o.LR, Momentum: o.Momentum, Decay: decay, Factor: factor})
		}
	}
	var err error
	if o.Kind == "adam" {
		err = r.store.Adam(r.steps)
	} else {
		err = r.store.SGD(r.sgd)
	}
	if err != nil {
		return fmt.Errorf("engine: the backbone's %s step: %w", o.Kind, err)
	}
	return nil
}
