package datasets

import (
	"fmt"
	"math/rand/v2"

	"github.com/mkbench/mkbench/internal/task"
)

// Shift augmentation of training episodes (engine.Config.AugmentShift).
// A wrapper rather than a sampler option, so that every image family's
// episodes (Omniglot, the class sets, Meta-Dataset's varying ones) are
// shifted the same way and their own rng order stays as it was: the
// wrapped source draws its episodes first, then the shifts follow from the
// same rng. With one rng per iteration (the engine's task stream), a
// shifted run sees the unshifted run's classes and images, moved.

// Shifted returns src whose episodes have every image, support and query,
// moved by its own (dy, dx), each uniform in −maxShift … maxShift, the pixels it
// uncovers zero and those pushed past the edge dropped. Images are h×w
// with c channels, channels-last (as ConvSpec reads them). A varying
// source stays varying. maxShift 0 returns src itself.
func Shifted(src task.Source, h, w, c, maxShift int) (task.Source, error) {
	switch {
	case maxShift == 0:
		return src, nil
	case maxShift < 0 || h < 1 || w < 1 || c < 1:
		return nil, fmt.Errorf("datasets: shifting %d×%d×%d images by up to %d pixels: every size must be positive", h, w, c, maxShift)
	case maxShift >= min(h, w):
		return nil, fmt.Errorf("datasets: shifting %d×%d images by up to %d pixels would move them out of their frame", h, w, maxShift)
	case src.InDim() != h*w*c:
		return nil, notImages(src, h, w, c)
	}
	return augmentImages(src, func(rng *rand.Rand, img, tmp []float64) {
		dy := rng.IntN(2*maxShift+1) - maxShift
		dx := rng.IntN(2*maxShift+1) - maxShift
		task.ShiftImage(img, tmp, h, w, c, dy, dx)
	}), nil
}

// notImages is the error of an augmentation asked of a source whose inputs
// are not h×w×c images.
func notImages(src task.Source, h, w, c int) error {
	return fmt.Errorf("datasets: %s inputs have %d values, not the %d of a %d×%d×%d image", src.Name(), src.InDim(), h*w*c, h, w, c)
}

// augmentImages returns src with every image of its episodes changed in
// place by change, which draws from the episode's rng after the episode:
// the support rows of all tasks, then the query rows. A varying source
// stays varying. The wrappers of this file and augment_warp.go are it.
func augmentImages(src task.Source, change func(rng *rand.Rand, img, tmp []float64)) task.Source {
	a := augmented{Source: src, change: change}
	if v, ok := src.(task.Varying); ok {
		return &augmentedVarying{augmented: a, v: v}
	}
	return &a
}

// augmented is a fixed-shape source with its images changed.
type augmented struct {
	task.Source
	change func(rng *rand.Rand, img, tmp []float64)
}

// Sample draws src's episodes, then changes their images.
func (s *augmented) Sample(rng *rand.Rand, b *task.Batch) {
	s.Source.Sample(rng, b)
	s.changeBatch(rng, b)
}

// augmentedVarying is a varying source with its images changed.
type augmentedVarying struct {
	augmented
	v task.Varying
}

// SampleVarying draws src's episode, then changes its images.
func (s *augmentedVarying) SampleVarying(rng *rand.Rand, b *task.Batch) {
	s.v.SampleVarying(rng, b)
	s.changeBatch(rng, b)
}

// changeBatch changes every image of b, the support rows of all tasks then
// the query rows. Its buffer is its own, so concurrent samples stay safe.
func (s *augmented) changeBatch(rng *rand.Rand, b *task.Batch) {
	in := b.InDim
	tmp := make([]float64, in)
	for _, xs := range [][]float64{b.XS[:b.T*b.NS*in], b.XQ[:b.T*b.NQ*in]} {
		for r := 0; r+in <= len(xs); r += in {
			s.change(rng, xs[r:r+in], tmp)
		}
	}
}
