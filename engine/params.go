package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Param is one named trainable tensor. Data is the master copy: every graph
// binds its parameter nodes to tensors backed by this slice, so an optimizer
// step is seen by all graphs without copying.
type Param struct {
	Name  string    `json:"name"`
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// Size is the number of elements.
func (p *Param) Size() int { return len(p.Data) }

// Params is an ordered set of parameters; the order fixes the layout of
// optimizer state and checkpoints.
type Params struct {
	List   []*Param
	byName map[string]*Param
}

func (ps *Params) add(name string, shape ...int) *Param {
	n := 1
	for _, s := range shape {
		n *= s
	}
	if ps.byName == nil {
		ps.byName = map[string]*Param{}
	}
	if _, dup := ps.byName[name]; dup {
		panic("engine: duplicate parameter " + name)
	}
	p := &Param{Name: name, Shape: shape, Data: make([]float64, n)}
	ps.List = append(ps.List, p)
	ps.byName[name] = p
	return p
}

// Get returns the parameter called name, or nil.
func (ps *Params) Get(name string) *Param { return ps.byName[name] }

// Count is the total number of scalars.
func (ps *Params) Count() int {
	n := 0
	for _, p := range ps.List {
		n += p.Size()
	}
	return n
}

// CopyFrom overwrites the values of ps with those of src, which must have
// the same names and shapes (a checkpoint of the same configuration).
func (ps *Params) CopyFrom(src []*Param) error {
	if len(src) != len(ps.List) {
		return fmt.Errorf("engine: checkpoint has %d parameters, model has %d", len(src), len(ps.List))
	}
	for i, p := range ps.List {
		if src[i].Name != p.Name || len(src[i].Data) != len(p.Data) {
			return fmt.Errorf("engine: checkpoint parameter %d is %s[%d], model expects %s[%d]",
				i, src[i].Name, len(src[i].Data), p.Name, len(p.Data))
		}
		copy(p.Data, src[i].Data)
	}
	return nil
}

// glorot fills w (fanIn×fanOut) with a normal of variance 2/(fanIn+fanOut).
func glorot(rng *rand.Rand, w []float64, fanIn, fanOut int) {
	s := math.Sqrt(2 / float64(fanIn+fanOut))
	for i := range w {
		w[i] = s * rng.NormFloat64()
	}
}

// he fills w with a normal of variance 2/fanIn, suited to ReLU layers.
func he(rng *rand.Rand, w []float64, fanIn int) {
	s := math.Sqrt(2 / float64(fanIn))
	for i := range w {
		w[i] = s * rng.NormFloat64()
	}
}
