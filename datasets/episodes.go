package datasets

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/mkbench/mkbench/internal/task"
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
	if err := checkShape(way, shot, query); err != nil {
		return nil, err
	}
	switch {
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
func (e *Episodes) Sample(rng *rand.Rand, b *task.Batch) {
	checkBatch("Episodes", b, e.way, e.shot, e.query, OmniglotPixels)
	drawEpisodes(rng, b, &episodePool{support: omniglotClasses{e.set}}, e.way, e.shot, e.query)
}

// omniglotClasses gives a ClassSet the counts the sampler asks for.
type omniglotClasses struct{ *ClassSet }

func (omniglotClasses) ImagesIn(int) int { return OmniglotDrawings }

// ClassSource is a split whose classes episodes are drawn from: an image
// set's ImageClasses (miniImageNet, CIFAR-FS) or an EmbeddingSet. Class c
// holds ImagesIn(c) examples, each InDim values that Image writes.
// (Omniglot's ClassSet keeps its own Episodes, which shares the sampler.)
type ClassSource interface {
	// Family names the data set, the task family of a run ("miniimagenet").
	Family() string
	// Name is the split's name, e.g. "train".
	Name() string
	NumClasses() int
	ImagesIn(class int) int
	InDim() int
	// Image writes example k of class c into dst[:InDim()].
	Image(class, k int, dst []float64)
}

// ClassEpisodes is Episodes for any ClassSource: the same protocol, rows,
// rng order and guarantees, with classes of any size (an episode draws
// shot+query of a class's images without replacement, so every class must
// hold that many; NewClassEpisodes checks).
type ClassEpisodes struct {
	src              ClassSource
	way, shot, query int
}

// NewClassEpisodes checks that every episode can be drawn from src: way
// classes, and shot+query examples of every class.
func NewClassEpisodes(src ClassSource, way, shot, query int) (*ClassEpisodes, error) {
	if src == nil {
		return nil, fmt.Errorf("datasets: episodes need a class set")
	}
	if err := checkShape(way, shot, query); err != nil {
		return nil, err
	}
	if way > src.NumClasses() {
		return nil, fmt.Errorf("datasets: %d-way episodes need %d classes, %s split %q has %d", way, way, src.Family(), src.Name(), src.NumClasses())
	}
	for c := 0; c < src.NumClasses(); c++ {
		if n := src.ImagesIn(c); n < shot+query {
			return nil, fmt.Errorf("datasets: %d shots + %d queries = %d examples per class, but class %d of %s split %q has %d", shot, query, shot+query, c, src.Family(), src.Name(), n)
		}
	}
	return &ClassEpisodes{src: src, way: way, shot: shot, query: query}, nil
}

// Name is the data set's family name, e.g. "miniimagenet".
func (e *ClassEpisodes) Name() string        { return e.src.Family() }
func (e *ClassEpisodes) InDim() int          { return e.src.InDim() }
func (e *ClassEpisodes) OutDim() int         { return e.way }
func (e *ClassEpisodes) Way() int            { return e.way }
func (e *ClassEpisodes) Shot() int           { return e.shot }
func (e *ClassEpisodes) Query() int          { return e.query }
func (e *ClassEpisodes) Source() ClassSource { return e.src }

// Sample fills b, which must be sized for this source (NS = way·shot,
// NQ = way·query, InDim, OutDim way), with b.T episodes.
func (e *ClassEpisodes) Sample(rng *rand.Rand, b *task.Batch) {
	checkBatch("ClassEpisodes", b, e.way, e.shot, e.query, e.src.InDim())
	drawEpisodes(rng, b, &episodePool{support: e.src}, e.way, e.shot, e.query)
}

// checkShape is the check of way, shot and query every episode source
// makes first.
func checkShape(way, shot, query int) error {
	if way <= 0 || shot <= 0 || query <= 0 {
		return fmt.Errorf("datasets: %d-way %d-shot episodes with %d queries per class: all three must be positive", way, shot, query)
	}
	return nil
}

// checkBatch panics on a batch sized for another source: a programmer
// error, not a data error.
func checkBatch(who string, b *task.Batch, way, shot, query, in int) {
	if b.NS != way*shot || b.NQ != way*query || b.InDim != in || b.OutDim != way {
		panic(fmt.Sprintf("datasets: %s.Sample: batch sized %d support, %d query, %d→%d, want %d, %d, %d→%d",
			who, b.NS, b.NQ, b.InDim, b.OutDim, way*shot, way*query, in, way))
	}
}

// episodeClasses is what the sampler reads of a class set.
type episodeClasses interface {
	NumClasses() int
	ImagesIn(class int) int
	Image(class, k int, dst []float64)
}

// episodePool is what one task is drawn from: candidate classes, each with
// its support images in one class set and its queries in another or the
// same.
type episodePool struct {
	support episodeClasses
	// query holds the queries; nil means support, and then a class's shots
	// and queries are one draw without replacement.
	query episodeClasses
	// classes[i] is candidate i's class in support and in query; nil means
	// candidate i is class i of support.
	classes [][2]int32
}

// drawEpisodes is the sampler of Episodes and ClassEpisodes: b.T tasks from
// one pool.
func drawEpisodes(rng *rand.Rand, b *task.Batch, p *episodePool, way, shot, query int) {
	var s episodeScratch
	for t := 0; t < b.T; t++ {
		s.draw(rng, b, t, p, way, shot, query)
	}
}

// episodeScratch is the sampler's working memory, reused across tasks.
type episodeScratch struct{ order, images, other []int32 }

// draw writes task t of b from p. Its rng order is part of the contract
// (seeded runs must not change when the code is refactored): way candidate
// draws, then for each label in turn shot+query image draws, or with a
// separate query set shot support draws and then query query draws.
func (s *episodeScratch) draw(rng *rand.Rand, b *task.Batch, t int, p *episodePool, way, shot, query int) {
	in := b.InDim
	n := len(p.classes)
	if p.classes == nil {
		n = p.support.NumClasses()
	}
	// A partial Fisher–Yates shuffle gives an ordered sample: every
	// sequence of way distinct classes is equally likely, so using the
	// draw order as the labels is a uniformly random labelling. Resetting
	// per task keeps each task independent of the last.
	s.order = slices.Grow(s.order[:0], n)[:n]
	for i := range s.order {
		s.order[i] = int32(i)
	}
	partialShuffle(rng, s.order, way)
	xs := b.XS[t*b.NS*in:][:b.NS*in]
	ys := b.YS[t*b.NS*b.OutDim:][:b.NS*b.OutDim]
	xq := b.XQ[t*b.NQ*in:][:b.NQ*in]
	yq := b.YQ[t*b.NQ*b.OutDim:][:b.NQ*b.OutDim]
	clear(ys)
	clear(yq)
	for j, k := range s.order[:way] {
		sc, qc := int(k), int(k)
		if p.classes != nil {
			sc, qc = int(p.classes[k][0]), int(p.classes[k][1])
		}
		qset := p.query
		var sup, qry []int32
		if qset == nil {
			qset = p.support
			s.images = drawImages(rng, s.images, p.support.ImagesIn(sc), shot+query)
			sup, qry = s.images[:shot], s.images[shot:shot+query]
		} else {
			s.images = drawImages(rng, s.images, p.support.ImagesIn(sc), shot)
			s.other = drawImages(rng, s.other, qset.ImagesIn(qc), query)
			sup, qry = s.images[:shot], s.other[:query]
		}
		for i, img := range sup {
			row := j*shot + i
			p.support.Image(sc, int(img), xs[row*in:])
			ys[row*way+j] = 1
		}
		for i, img := range qry {
			row := j*query + i
			qset.Image(qc, int(img), xq[row*in:])
			yq[row*way+j] = 1
		}
	}
}

// partialShuffle puts a uniformly random ordered sample of k elements of s
// in s[:k].
func partialShuffle(rng *rand.Rand, s []int32, k int) {
	for j := 0; j < k; j++ {
		i := j + rng.IntN(len(s)-j)
		s[j], s[i] = s[i], s[j]
	}
}

// drawImages returns k distinct indices out of [0, n), in draw order, in
// buf's storage.
func drawImages(rng *rand.Rand, buf []int32, n, k int) []int32 {
	if cap(buf) < n {
		buf = make([]int32, n)
	}
	buf = buf[:n]
	for i := range buf {
		buf[i] = int32(i)
	}
	partialShuffle(rng, buf, k)
	return buf
}
