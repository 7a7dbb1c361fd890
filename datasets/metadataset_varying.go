package datasets

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/mkbench/mkbench/internal/task"
)

// MDVarying draws Meta-Dataset's own episodes: ways, shots per class and
// query size by the reference's sampler (MDSampler: every rule and
// constant of sampling.py), each episode from one of several sources'
// split chosen uniformly (MDMultiSampler). It is a task.Varying: the
// engine trains on it one episode per step.
//
// Images are drawn per episode from the rng alone, without replacement
// within the episode, instead of the reference's per-class streams
// consumed across episodes (mdImageOrder): episode i then depends on its
// seed only, so a resumed run draws the same episodes as an
// uninterrupted one. Within an episode the distribution is the same.
//
// Labels follow the sampler's class order; the model is invariant to it.
type MDVarying struct {
	family string
	names  []string
	multi  *MDMultiSampler
	srcs   []ClassSource
	first  []int // the class id of each source's class 0
	maxWay int
}

// NewMDVarying checks that the sources' splits can give every episode of
// opts (see NewMDSampler) and that each class set srcs[i] holds exactly
// the classes of specs[i]'s split, in class-id order, with the spec's
// image counts.
func NewMDVarying(family string, names []string, specs []*MDSpec, split string, srcs []ClassSource, opts MDSamplerOptions) (*MDVarying, error) {
	if len(srcs) == 0 || len(names) != len(srcs) || len(specs) != len(srcs) {
		return nil, errors.New("datasets: varying episodes need one or more named sources, each with its spec")
	}
	if opts.Way > 0 || opts.Shot > 0 {
		return nil, errors.New("datasets: varying episodes draw their way and shots; use NewMDEpisodes for fixed ones")
	}
	e := &MDVarying{family: family, names: slices.Clone(names), srcs: slices.Clone(srcs)}
	var samplers []*MDSampler
	for i, spec := range specs {
		s, err := NewMDSampler(spec, split, opts)
		if err != nil {
			return nil, err
		}
		ids := spec.Classes(split)
		if n := srcs[i].NumClasses(); n != len(ids) {
			return nil, fmt.Errorf("datasets: %s %s: %d classes read, the spec has %d", names[i], split, n, len(ids))
		}
		for k, id := range ids {
			if got, want := srcs[i].ImagesIn(k), spec.Images(id); got != want {
				return nil, fmt.Errorf("datasets: %s %s: class %d has %d examples, the spec says %d", names[i], split, id, got, want)
			}
		}
		if srcs[i].InDim() != srcs[0].InDim() {
			return nil, fmt.Errorf("datasets: %s has %d-wide examples, %s %d", names[i], srcs[i].InDim(), names[0], srcs[0].InDim())
		}
		samplers = append(samplers, s)
		e.first = append(e.first, ids[0])
		e.maxWay = s.Options().MaxWays
	}
	var err error
	e.multi, err = NewMDMultiSampler(samplers...)
	return e, err
}

// PlainMDSpec is the spec of a plain source whose split holds classes of
// the given sizes (ids 0 … len(images)−1): the sampler's plain rules for
// a class set that has no dataset_spec.json, such as a split's
// pre-computed features.
func PlainMDSpec(name, split string, images []int) (*MDSpec, error) {
	si := mdSplitIndex(split)
	if si < 0 {
		return nil, fmt.Errorf("datasets: unknown split %q (want train, valid or test)", split)
	}
	s := &MDSpec{Name: name, Kind: MDPlain, images: slices.Clone(images), names: make([]string, len(images))}
	s.first[si], s.count[si] = 0, len(images)
	return s, nil
}

func (e *MDVarying) Name() string { return e.family }
func (e *MDVarying) InDim() int   { return e.srcs[0].InDim() }

// OutDim is the largest way.
func (e *MDVarying) OutDim() int { return e.maxWay }

// Sources names the sources episodes are drawn from.
func (e *MDVarying) Sources() []string { return slices.Clone(e.names) }

// Sample is not used: episodes vary (task.Varying).
func (e *MDVarying) Sample(*rand.Rand, *task.Batch) {
	panic("datasets: MDVarying draws episodes of varying shape: call SampleVarying")
}

// SampleVarying draws a source and an episode of it, then each class's
// shots and queries in one draw without replacement: support rows class
// by class, query rows class by class.
func (e *MDVarying) SampleVarying(rng *rand.Rand, b *task.Batch) {
	i, ep := e.multi.Sample(rng)
	src, in, way := e.srcs[i], e.srcs[i].InDim(), ep.Way()
	b.Resize(1, ep.Support(), way*ep.Query, in, way)
	clear(b.YS)
	clear(b.YQ)
	var images []int32
	r := 0
	for j, c := range ep.Classes {
		k := c - e.first[i]
		shots := ep.Shots[j]
		images = drawImages(rng, images, src.ImagesIn(k), shots+ep.Query)
		for _, im := range images[:shots] {
			src.Image(k, int(im), b.XS[r*in:(r+1)*in])
			b.YS[r*way+j] = 1
			r++
		}
		for q, im := range images[shots : shots+ep.Query] {
			row := j*ep.Query + q
			src.Image(k, int(im), b.XQ[row*in:(row+1)*in])
			b.YQ[row*way+j] = 1
		}
	}
}
