package datasets

import (
	"fmt"
	"math/rand/v2"

	"github.com/mkbench/mkbench/engine"
)

// Episodes draws N-way k-shot classification tasks from a class set, the
// paper's episodic protocol: way distinct classes chosen uniformly, shot +
// query distinct images of each chosen class without replacement, labels
// assigned in a random order, targets one-hot.
//
// Rows are class-major: support row j·shot+s is image s of the class with
// label j, query row j·query+q likewise. Inputs are the 784 pixels of the
// 28×28 image, row-major, strokes 1 on background 0.
//
// An episode consumes the rng in a fixed order (way class draws, then
// shot+query image draws for each label in turn), and Sample keeps no state
// between calls, so the tasks are a function of the rng alone: equal seeds
// give equal batches, and interleaving other draws from one Episodes (for
// evaluation, say) changes nothing. Sample is safe for concurrent use.
type Episodes struct {
	set              *ClassSet
	way, shot, query int
}

// NewEpisodes checks that every episode can be drawn: way classes out of
// the set and shot+query images out of each class's 20.
func NewEpisodes(set *ClassSet, way, shot, query int) (*Episodes, error) {
	if set == nil {
		return nil, fmt.Errorf("datasets: episodes need a class set")
	}
	switch {
	case way <= 0 || shot <= 0 || query <= 0:
		return nil, fmt.Errorf("datasets: %d-way %d-shot episodes with %d queries per class: all three must be positive", way, shot, query)
	case way > set.NumClasses():
		return nil, fmt.Errorf("datasets: %d-way episodes need %d classes, split %q has %d", way, way, set.Name(), set.NumClasses())
	case shot+query > set.ImagesPerClass():
		return nil, fmt.Errorf("datasets: %d shots + %d queries = %d images per class, but Omniglot classes have %d", shot, query, shot+query, set.ImagesPerClass())
	}
	return &Episodes{set: set, way: way, shot: shot, query: query}, nil
}

func (*Episodes) Name() string     { return "omniglot" }
func (*Episodes) InDim() int       { return OmniglotPixels }
func (e *Episodes) OutDim() int    { return e.way }
func (e *Episodes) Way() int       { return e.way }
func (e *Episodes) Shot() int      { return e.shot }
func (e *Episodes) Query() int     { return e.query }
func (e *Episodes) Set() *ClassSet { return e.set }

// Sample fills b, which must be sized for this source (NS = way·shot,
// NQ = way·query, InDim 784, OutDim way), with b.T episodes.
func (e *Episodes) Sample(rng *rand.Rand, b *engine.Batch) {
	if b.NS != e.way*e.shot || b.NQ != e.way*e.query || b.InDim != OmniglotPixels || b.OutDim != e.way {
		panic(fmt.Sprintf("datasets: Episodes.Sample: batch sized %d support, %d query, %d→%d, want %d, %d, %d→%d",
			b.NS, b.NQ, b.InDim, b.OutDim, e.way*e.shot, e.way*e.query, OmniglotPixels, e.way))
	}
	classes := make([]int32, e.set.NumClasses())
	var images [OmniglotDrawings]int
	for t := 0; t < b.T; t++ {
		// A partial Fisher–Yates shuffle gives an ordered sample: every
		// sequence of way distinct classes is equally likely, so using the
		// draw order as the labels is a uniformly random labelling.
		// Resetting per task keeps each task independent of the last.
		for i := range classes {
			classes[i] = int32(i)
		}
		for j := 0; j < e.way; j++ {
			k := j + rng.IntN(len(classes)-j)
			classes[j], classes[k] = classes[k], classes[j]
		}
		xs := b.XS[t*b.NS*b.InDim:][:b.NS*b.InDim]
		ys := b.YS[t*b.NS*b.OutDim:][:b.NS*b.OutDim]
		xq := b.XQ[t*b.NQ*b.InDim:][:b.NQ*b.InDim]
		yq := b.YQ[t*b.NQ*b.OutDim:][:b.NQ*b.OutDim]
		clear(ys)
		clear(yq)
		for j, c := range classes[:e.way] {
			for i := range images {
				images[i] = i
			}
			for i := 0; i < e.shot+e.query; i++ {
				k := i + rng.IntN(len(images)-i)
				images[i], images[k] = images[k], images[i]
			}
			for s, img := range images[:e.shot] {
				row := j*e.shot + s
				e.set.Image(int(c), img, xs[row*OmniglotPixels:])
				ys[row*e.way+j] = 1
			}
			for q, img := range images[e.shot : e.shot+e.query] {
				row := j*e.query + q
				e.set.Image(int(c), img, xq[row*OmniglotPixels:])
				yq[row*e.way+j] = 1
			}
		}
	}
}
