package ops

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// FlowOp is the gorgonia op built by CouplingFlow. Besides the op interface it
// exposes the intermediate steps of the last forward run.
type FlowOp struct {
	opBase
	id     uint64
	kern   *FlowKernel
	buf    []float64 // output storage reused by Do
	diffed bool
}

// CouplingFlow applies the conditional coupling flow described by spec:
// omega0 (T, D, Dim) are the D samples of ω per task, cond (T, Cond) the task
// contexts and theta (NumParams) the parameters (layout in FlowSpec). The
// result has shape (T, D, Dim+1): [..., :Dim] is ω_K and [..., Dim] is
// Σ_k log|det ∂ω_k/∂ω_{k-1}| for that sample. It is differentiable w.r.t.
// all three inputs (one backward pass per op). spec.Layers must be ≥ 1 (see
// FlowSpec.Validate).
//
// The op and its gradient nodes keep their caches and output storage
// between runs of a machine, so a run overwrites the values of the previous
// one: copy what must outlive the next run. Values are float64 only. The
// kernel spreads its work over p's workers.
func CouplingFlow(p *Pool, omega0, cond, theta *gorgonia.Node, spec FlowSpec) (*gorgonia.Node, *FlowOp, error) {
	kern, err := NewFlowKernel(p, spec)
	if err != nil {
		return nil, nil, err
	}
	for _, in := range []struct {
		n    *gorgonia.Node
		name string
		dims int
	}{{omega0, "omega0", 3}, {cond, "cond", 2}, {theta, "theta", 1}} {
		if in.n == nil {
			return nil, nil, fmt.Errorf("flow: %s is nil", in.name)
		}
		if in.n.Dtype() != gorgonia.Float64 {
			return nil, nil, fmt.Errorf("flow: %s has dtype %v, want float64", in.name, in.n.Dtype())
		}
		if in.n.Shape().Dims() != in.dims {
			return nil, nil, fmt.Errorf("flow: %s has shape %v, want %d dimensions", in.name, in.n.Shape(), in.dims)
		}
	}
	so, sc, st := omega0.Shape(), cond.Shape(), theta.Shape()
	switch {
	case so[2] != spec.Dim:
		return nil, nil, fmt.Errorf("flow: omega0 has shape %v, want (T, D, %d)", so, spec.Dim)
	case sc[0] != so[0] || sc[1] != spec.Cond:
		return nil, nil, fmt.Errorf("flow: cond has shape %v, want (%d, %d)", sc, so[0], spec.Cond)
	case st[0] != spec.NumParams():
		return nil, nil, fmt.Errorf("flow: theta has shape %v, want (%d)", st, spec.NumParams())
	case so[0] < 1 || so[1] < 1:
		return nil, nil, fmt.Errorf("flow: omega0 has shape %v, want T, D ≥ 1", so)
	}
	op := &FlowOp{id: opSeq.Add(1), kern: kern}
	op.opBase = base(fmt.Sprintf("CouplingFlow#%d{K=%d,d=%d,c=%d,H=%d}", op.id, spec.Layers, spec.Dim, spec.Cond, spec.Hidden), "")
	out, err := gorgonia.ApplyOp(op, omega0, cond, theta)
	if err != nil {
		return nil, nil, fmt.Errorf("flow: %w", err)
	}
	return out, op, nil
}

// Kernel returns the plain kernel the op runs; its caches describe the last
// run of the op.
func (op *FlowOp) Kernel() *FlowKernel { return op.kern }

// Steps returns, after a forward run, copies of ω for task t after steps
// 0..K (K+1 slices of D·Dim, row-major D×Dim); nil before any run.
func (op *FlowOp) Steps(t int) [][]float64 { return op.kern.Steps(t) }

// Arity implements gorgonia.Op.
func (op *FlowOp) Arity() int { return 3 }

// Type implements gorgonia.Op.
func (op *FlowOp) Type() hm.Type { return hm.NewFnType(f64T3, f64T2, f64T1, f64T3) }

// InferShape implements gorgonia.Op.
func (op *FlowOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("flow: got %d inputs, want 3", len(in))
	}
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", in[0])
	}
	return tensor.Shape{s[0], s[1], s[2] + 1}, nil
}

// Do implements gorgonia.Op.
func (op *FlowOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("flow: got %d inputs, want 3", len(in))
	}
	s := in[0].Shape()
	if len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", s)
	}
	shape := tensor.Shape{s[0], s[1], s[2] + 1}
	out, _ := ownedTensor(&op.buf, shape)
	return op.UsePreallocDo(out, in...)
}

// UsePreallocDo implements gorgonia.UsePreallocDoer. A prealloc of the wrong
// shape (the tape machine offers whatever its register last held) is
// refused with an error, on which the machine falls back to Do.
func (op *FlowOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("flow: got %d inputs, want 3", len(in))
	}
	s := in[0].Shape()
	if len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", s)
	}
	out, err := preallocData(prealloc, tensor.Shape{s[0], s[1], s[2] + 1})
	if err != nil {
		return nil, err
	}
	omega0, err := denseData(in[0], "omega0")
	if err != nil {
		return nil, err
	}
	cond, err := denseData(in[1], "cond")
	if err != nil {
		return nil, err
	}
	theta, err := denseData(in[2], "theta")
	if err != nil {
		return nil, err
	}
	if err := op.kern.Forward(s[0], s[1], omega0, cond, theta, out); err != nil {
		return nil, err
	}
	if !op.diffed {
		op.kern.releaseDevice() // no Backward follows: the device buffers go back
	}
	return prealloc, nil
}

// DiffWRT implements gorgonia.SDOp.
func (op *FlowOp) DiffWRT(n int) []bool { return []bool{true, true, true} }

// SymDiff implements gorgonia.SDOp. One backward node does all the per-task
// work and yields the omega0 gradient; two light nodes that depend on it
// assemble the cond and theta gradients from its caches, so the dependency
// also orders them after it.
func (op *FlowOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if len(inputs) != 3 {
		return nil, fmt.Errorf("flow: SymDiff got %d inputs, want 3", len(inputs))
	}
	// The backward nodes share the kernel's gradient buffers, so a second
	// set could interleave with the first.
	if op.diffed {
		return nil, fmt.Errorf("flow: %v is already differentiated; it supports one backward pass", op)
	}
	op.diffed = true
	core, err := gorgonia.ApplyOp(&flowGradOp{opBase: base(fmt.Sprintf("CouplingFlowGrad#%d", op.id), ""), op: op},
		inputs[0], inputs[1], inputs[2], output, grad)
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	gCond, err := gorgonia.ApplyOp(&flowPartOp{opBase: base(fmt.Sprintf("CouplingFlowGradCond#%d", op.id), ""), op: op},
		core, inputs[2])
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	gTheta, err := gorgonia.ApplyOp(&flowPartOp{opBase: base(fmt.Sprintf("CouplingFlowGradTheta#%d", op.id), ""), op: op, theta: true},
		core, inputs[1])
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	return gorgonia.Nodes{core, gCond, gTheta}, nil
}

// flowGradOp maps (omega0, cond, theta, output, grad) to the omega0
// gradient, leaving the material for the other gradients in the kernel.
// Taking output as an input orders it after the forward run.
type flowGradOp struct {
	opBase
	noSecondDerivative
	op  *FlowOp
	buf []float64
}

func (g *flowGradOp) Arity() int { return 5 }
func (g *flowGradOp) Type() hm.Type {
	return hm.NewFnType(f64T3, f64T2, f64T1, f64T3, f64T3, f64T3)
}
func (g *flowGradOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 3 {
		return nil, fmt.Errorf("flow: omega0 shape %v, want (T, D, Dim)", in[0])
	}
	return s.Clone(), nil
}
func (g *flowGradOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 5 {
		return nil, fmt.Errorf("flow: gradient got %d inputs, want 5", len(in))
	}
	shape := in[0].Shape()
	out, _ := ownedTensor(&g.buf, shape)
	return g.UsePreallocDo(out, in...)
}
func (g *flowGradOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 5 {
		return nil, fmt.Errorf("flow: gradient got %d inputs, want 5", len(in))
	}
	out, err := preallocData(prealloc, in[0].Shape())
	if err != nil {
		return nil, err
	}
	// The kernel computes with the copy of theta it converted in Forward
	// (the forward's reference is only known to be intact in the common
	// case where theta is a graph input); this node's input is checked.
	theta, err := denseData(in[2], "theta")
	if err != nil {
		return nil, err
	}
	gOut, err := denseData(in[4], "output gradient")
	if err != nil {
		return nil, err
	}
	if err := g.op.kern.backwardCore(theta, gOut, out); err != nil {
		return nil, err
	}
	return prealloc, nil
}

// flowPartOp assembles the theta gradient (inputs: core gradient, cond) or
// the cond gradient (inputs: core gradient, theta) after flowGradOp ran.
type flowPartOp struct {
	opBase
	noSecondDerivative
	op    *FlowOp
	theta bool
	buf   []float64
}

func (p *flowPartOp) Arity() int { return 2 }
func (p *flowPartOp) Type() hm.Type {
	if p.theta {
		return hm.NewFnType(f64T3, f64T2, f64T1)
	}
	return hm.NewFnType(f64T3, f64T1, f64T2)
}
func (p *flowPartOp) shape(core tensor.Shape) tensor.Shape {
	if p.theta {
		return tensor.Shape{p.op.kern.info.nP}
	}
	return tensor.Shape{core[0], p.op.kern.info.Cond}
}
func (p *flowPartOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 3 {
		return nil, fmt.Errorf("flow: gradient shape %v, want (T, D, Dim)", in[0])
	}
	return p.shape(s), nil
}
func (p *flowPartOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("flow: gradient part got %d inputs, want 2", len(in))
	}
	shape := p.shape(in[0].Shape())
	out, _ := ownedTensor(&p.buf, shape)
	return p.UsePreallocDo(out, in...)
}
func (p *flowPartOp) UsePreallocDo(prealloc gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("flow: gradient part got %d inputs, want 2", len(in))
	}
	out, err := preallocData(prealloc, p.shape(in[0].Shape()))
	if err != nil {
		return nil, err
	}
	other, err := denseData(in[1], "flow input")
	if err != nil {
		return nil, err
	}
	if p.theta {
		err = p.op.kern.gradTheta(other, out)
	} else {
		err = p.op.kern.gradCond(other, out)
	}
	if err != nil {
		return nil, err
	}
	return prealloc, nil
}
