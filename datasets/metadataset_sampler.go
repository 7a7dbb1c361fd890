package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Meta-Dataset's episode sampler: which classes an episode has and how many
// support and query images of each, the rules of the reference's
// data/sampling.py (EpisodeDescriptionSampler), and the order in which a
// class's images are served, that of data/reader.py
// (dataset_id_generator). Only the composition is drawn here; reading the
// images is the loader's.

// The reference's defaults (learn/gin/setups/data_config_common.gin), and
// the widest node a hierarchical episode is drawn from (sampling.py,
// MAX_SPANNING_LEAVES_ELIGIBLE: the least bound that leaves every ILSVRC
// training class reachable).
const (
	MDMinWays           = 5
	MDMaxWays           = 50
	MDMaxQuery          = 10
	MDMaxSupport        = 500
	MDMaxPerClass       = 100
	MDMaxSpanningLeaves = 392
)

// Class log-weights are uniform in [log ½, log 2]
// (data_config_common.gin, min_log_weight and max_log_weight).
const (
	mdMinLogWeight = -math.Ln2
	mdMaxLogWeight = math.Ln2
)

// MDSamplerOptions are the episode shapes of an MDSampler. A zero field
// means the reference's behaviour: Way, Shot and Query 0 are drawn per
// episode, and the bounds default to MDMinWays … MDMaxPerClass.
type MDSamplerOptions struct {
	// Way fixes the number of classes. Classes are then drawn uniformly
	// from the whole split, whatever the kind: the reference refuses
	// num_ways together with a hierarchy (sampling.py), so fixed-way runs
	// ignore it.
	Way int
	// Shot fixes the support images per class; Query the query images
	// per class.
	Shot, Query int

	MinWays, MaxWays int // bounds of a drawn way
	MaxQuery         int // bound of a derived query size
	MaxSupport       int // bound of a drawn support-set size
	MaxPerClass      int // bound of one class's contribution to that size
}

// withDefaults fills the zero bounds and refuses negative numbers.
func (o MDSamplerOptions) withDefaults() (MDSamplerOptions, error) {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{{"Way", &o.Way, 0}, {"Shot", &o.Shot, 0}, {"Query", &o.Query, 0},
		{"MinWays", &o.MinWays, MDMinWays}, {"MaxWays", &o.MaxWays, MDMaxWays},
		{"MaxQuery", &o.MaxQuery, MDMaxQuery}, {"MaxSupport", &o.MaxSupport, MDMaxSupport},
		{"MaxPerClass", &o.MaxPerClass, MDMaxPerClass}} {
		if *f.v < 0 {
			return o, fmt.Errorf("datasets: meta-dataset sampler: %s is %d", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.MinWays > o.MaxWays {
		return o, fmt.Errorf("datasets: meta-dataset sampler: MinWays %d > MaxWays %d", o.MinWays, o.MaxWays)
	}
	return o, nil
}

// MDEpisodeSpec is the composition of one episode: the classes (ids of the
// source), the support images of each and the query images of every class.
// Classes are in draw order, which is random except for an ILSVRC node
// taken whole (wn_id order, as the reference lists them), so a model that
// is not invariant to label order should shuffle the labels.
type MDEpisodeSpec struct {
	Classes []int
	Shots   []int
	Query   int
}

// Way is the number of classes.
func (e MDEpisodeSpec) Way() int { return len(e.Classes) }

// Support is the size of the support set.
func (e MDEpisodeSpec) Support() int {
	n := 0
	for _, k := range e.Shots {
		n += k
	}
	return n
}

// How an MDSampler picks classes (sampling.py, sample_class_ids).
type mdPick int

const (
	mdUniform mdPick = iota // a uniform way, then classes uniformly from the split
	mdBiLevel               // a superclass, a uniform way, classes within it
	mdDAG                   // an eligible node, its leaves (at most MaxWays of them)
)

// MDSampler draws episode compositions from one split of one source. It
// keeps no state between episodes, so they are a function of the rng
// alone, and Sample is safe for concurrent use.
type MDSampler struct {
	spec  *MDSpec
	split string
	opts  MDSamplerOptions
	pick  mdPick
	// classes are the split's class ids (mdUniform); groups the class ids
	// of each superclass (mdBiLevel) or the leaves of each eligible node,
	// in wn_id order (mdDAG).
	classes []int
	groups  [][]int
}

// NewMDSampler checks that every episode of the options can be drawn from
// the split ("train", "valid" or "test") of spec: enough classes for the
// ways, a hierarchy that yields them, and in every class of the split
// enough images for the shots and queries. Sample then cannot fail.
func NewMDSampler(spec *MDSpec, split string, opts MDSamplerOptions) (*MDSampler, error) {
	if spec == nil {
		return nil, fmt.Errorf("datasets: meta-dataset sampler needs a spec")
	}
	si := mdSplitIndex(split)
	if si < 0 {
		return nil, fmt.Errorf("datasets: meta-dataset %s: unknown split %q (want train, valid or test)", spec.Name, split)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("meta-dataset %s split %q", spec.Name, split)
	classes := spec.Classes(split)
	if len(classes) == 0 {
		var has []string
		for i, n := range spec.count {
			if n > 0 {
				has = append(has, fmt.Sprintf("%s (%d)", strings.ToLower(mdSplitKeys[i]), n))
			}
		}
		return nil, fmt.Errorf("datasets: %s has no classes; the source has classes in %v", where, has)
	}
	s := &MDSampler{spec: spec, split: split, opts: opts, classes: classes}
	maxWay := 0
	switch {
	case opts.Way > 0:
		if opts.Way > len(classes) {
			return nil, fmt.Errorf("datasets: %d-way episodes need %d classes, %s has %d", opts.Way, opts.Way, where, len(classes))
		}
		maxWay = opts.Way
	case spec.Kind == MDBiLevel:
		// Every superclass must hold MinWays classes (sampling.py raises
		// "Superclass: %d has num_classes=%d < min_ways=%d").
		s.pick = mdBiLevel
		for _, sc := range spec.supers[si] {
			if sc.Classes < opts.MinWays {
				return nil, fmt.Errorf("datasets: %s: superclass %d (%s) has %d classes, fewer than the %d ways of an episode", where, sc.ID, sc.Name, sc.Classes, opts.MinWays)
			}
			s.groups = append(s.groups, sc.ClassIDs())
			maxWay = max(maxWay, min(opts.MaxWays, sc.Classes))
		}
	case spec.Kind == MDHierarchical:
		// The internal nodes spanning MinWays … MDMaxSpanningLeaves leaves,
		// by wn_id (sampling.py, EpisodeDescriptionSampler.__init__).
		s.pick = mdDAG
		for _, nd := range spec.dags[si].Nodes {
			if len(nd.Children) > 0 && len(nd.Leaves) >= opts.MinWays && len(nd.Leaves) <= MDMaxSpanningLeaves {
				s.groups = append(s.groups, nd.Leaves)
				maxWay = max(maxWay, min(opts.MaxWays, len(nd.Leaves)))
			}
		}
		if len(s.groups) == 0 {
			return nil, fmt.Errorf("datasets: %s: no node of the hierarchy spans %d to %d classes", where, opts.MinWays, MDMaxSpanningLeaves)
		}
	default:
		// sampling.py refuses a split with fewer classes than min_ways.
		if len(classes) < opts.MinWays {
			return nil, fmt.Errorf("datasets: %s has %d classes, fewer than the %d ways of an episode", where, len(classes), opts.MinWays)
		}
		maxWay = min(opts.MaxWays, len(classes))
	}
	if opts.Shot == 0 && opts.MaxSupport < maxWay {
		return nil, fmt.Errorf("datasets: %s: a support set of at most %d cannot hold one image of each of %d classes", where, opts.MaxSupport, maxWay)
	}
	// What compute_num_query and sample_num_support_per_class require of
	// the classes drawn, checked here for every class of the split.
	need, what := 2, "one support and one query image"
	switch {
	case opts.Shot > 0 && opts.Query > 0:
		need, what = opts.Shot+opts.Query, fmt.Sprintf("%d shots + %d queries", opts.Shot, opts.Query)
	case opts.Shot > 0:
		need, what = opts.Shot+1, fmt.Sprintf("%d shots and a query", opts.Shot)
	case opts.Query > 0:
		need, what = opts.Query+1, fmt.Sprintf("%d queries and a shot", opts.Query)
	}
	for _, c := range classes {
		if n := spec.Images(c); n < need {
			return nil, fmt.Errorf("datasets: %s: class %d (%s) has %d images, too few for %s (%d)", where, c, spec.ClassName(c), n, what, need)
		}
	}
	return s, nil
}

// Spec is the source the sampler draws from.
func (s *MDSampler) Spec() *MDSpec { return s.spec }

// Split is the split the sampler draws from.
func (s *MDSampler) Split() string { return s.split }

// Options are the sampler's options, defaults filled in.
func (s *MDSampler) Options() MDSamplerOptions { return s.opts }

// Sample draws one episode's composition. The rng is consumed in a fixed
// order, the reference's (sampling.py, sample_episode_description): the
// classes (mdUniform: a way unless fixed, then the classes; mdBiLevel: a
// superclass, a way, the classes; mdDAG: a node, then MaxWays of its
// leaves if it has more), then, unless the shot is fixed, β for the
// support-set size and one log-weight per class in class order. Draws are
// Go's, so episodes follow the reference's distribution, not numpy's
// numbers.
func (s *MDSampler) Sample(rng *rand.Rand) MDEpisodeSpec {
	ep := MDEpisodeSpec{Classes: s.drawClasses(rng)}
	s.compose(rng, &ep)
	return ep
}

func (s *MDSampler) drawClasses(rng *rand.Rand) []int {
	o := s.opts
	switch s.pick {
	case mdBiLevel:
		g := s.groups[rng.IntN(len(s.groups))]
		return mdChoose(rng, g, mdDrawWays(rng, len(g), o.MinWays, o.MaxWays))
	case mdDAG:
		g := s.groups[rng.IntN(len(s.groups))]
		if len(g) > o.MaxWays {
			return mdChoose(rng, g, o.MaxWays)
		}
		return slices.Clone(g)
	}
	way := o.Way
	if way == 0 {
		way = mdDrawWays(rng, len(s.classes), o.MinWays, o.MaxWays)
	}
	return mdChoose(rng, s.classes, way)
}

// mdDrawWays is uniform in [lo, min(hi, n)] (sampling.py,
// sample_num_ways_uniformly).
func mdDrawWays(rng *rand.Rand, n, lo, hi int) int {
	return lo + rng.IntN(min(hi, n)-lo+1)
}

// mdChoose draws k of pool without replacement, in draw order (numpy's
// choice with replace=False).
func mdChoose(rng *rand.Rand, pool []int, k int) []int {
	p := slices.Clone(pool)
	for j := range k {
		i := j + rng.IntN(len(p)-j)
		p[j], p[i] = p[i], p[j]
	}
	return p[:k:k]
}

// compose sets the query and the shots of ep's classes.
func (s *MDSampler) compose(rng *rand.Rand, ep *MDEpisodeSpec) {
	o := s.opts
	way := len(ep.Classes)
	images := make([]int, way)
	fewest := math.MaxInt
	for i, c := range ep.Classes {
		images[i] = s.spec.Images(c)
		fewest = min(fewest, images[i])
	}
	// sampling.py, compute_num_query: at most half the smallest class when
	// the support is drawn, what the fixed shot leaves of it otherwise.
	switch {
	case o.Query > 0:
		ep.Query = o.Query
	case o.Shot > 0:
		ep.Query = min(o.MaxQuery, fewest-o.Shot)
	default:
		ep.Query = min(o.MaxQuery, fewest/2)
	}
	ep.Shots = make([]int, way)
	if o.Shot > 0 {
		for i := range ep.Shots {
			ep.Shots[i] = o.Shot
		}
		return
	}
	// sampling.py, sample_support_set_size: ⌊β·min(cap, remaining)+1⌋
	// summed over the classes, at most MaxSupport; the +1 (β in [0, 1))
	// keeps it at least the way.
	beta := rng.Float64()
	size := 0
	for _, n := range images {
		size += int(math.Floor(beta*float64(min(o.MaxPerClass, n-ep.Query)) + 1))
	}
	size = min(size, o.MaxSupport)
	// sampling.py, sample_num_support_per_class: one shot each, the rest
	// shared in proportion to class size times exp(u), u uniform in
	// [log ½, log 2], and never more than the class has left.
	w := make([]float64, way)
	total := 0.0
	for i, n := range images {
		w[i] = float64(n) * math.Exp(mdMinLogWeight+(mdMaxLogWeight-mdMinLogWeight)*rng.Float64())
		total += w[i]
	}
	for i, n := range images {
		ep.Shots[i] = min(int(math.Floor(w[i]/total*float64(size-way)))+1, n-ep.Query)
	}
}

// MDMultiSampler draws each episode from one of several sources, chosen
// uniformly (the reference's make_multisource_episode_pipeline in
// data/pipeline.py). Sample is safe for concurrent use.
type MDMultiSampler struct {
	sources []*MDSampler
}

// NewMDMultiSampler combines the samplers of the sources.
func NewMDMultiSampler(sources ...*MDSampler) (*MDMultiSampler, error) {
	if len(sources) == 0 {
		return nil, fmt.Errorf("datasets: meta-dataset multi-source sampler needs a source")
	}
	if i := slices.Index(sources, nil); i >= 0 {
		return nil, fmt.Errorf("datasets: meta-dataset multi-source sampler: source %d is nil", i)
	}
	return &MDMultiSampler{sources: slices.Clone(sources)}, nil
}

// Sources are the samplers in the order given.
func (m *MDMultiSampler) Sources() []*MDSampler { return slices.Clone(m.sources) }

// Sample draws a source (one rng draw), then an episode of it; it returns
// the source's index and the episode.
func (m *MDMultiSampler) Sample(rng *rand.Rand) (int, MDEpisodeSpec) {
	i := rng.IntN(len(m.sources))
	return i, m.sources[i].Sample(rng)
}

// mdClassStream serves one class's images as the reference's reader does
// (reader.py, dataset_id_generator): a shuffled pass over the class,
// consumed in order, so no image comes twice in one request; when a request
// asks for more than the pass has left, the rest of the pass is dropped and
// a new shuffled pass begins. The reference shuffles through a buffer of
// shuffle_buffer_size examples (1000 by default, data_config_common.gin);
// here each pass is a full permutation.
type mdClassStream struct {
	order []int
	next  int
}

// newMDClassStream is the stream of a class of n images; its first Take
// shuffles.
func newMDClassStream(n int) *mdClassStream {
	s := &mdClassStream{order: make([]int, n), next: n}
	for i := range s.order {
		s.order[i] = i
	}
	return s
}

// Take returns n distinct image indices of the class. Asking for more than
// the class holds is a programmer error (the sampler never does) and
// panics.
func (s *mdClassStream) Take(n int, rng *rand.Rand) []int {
	if n > len(s.order) || n < 0 {
		panic(fmt.Sprintf("datasets: mdClassStream.Take(%d) of a class of %d images", n, len(s.order)))
	}
	if n > len(s.order)-s.next {
		rng.Shuffle(len(s.order), func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
		s.next = 0
	}
	out := slices.Clone(s.order[s.next : s.next+n])
	s.next += n
	return out
}

// mdImageOrder holds the streams of one source's classes, made as episodes
// first ask for them. It is not safe for concurrent use: the order of the
// images depends on the order of the episodes.
type mdImageOrder struct {
	spec    *MDSpec
	streams map[int]*mdClassStream
}

func newMDImageOrder(spec *MDSpec) *mdImageOrder {
	return &mdImageOrder{spec: spec, streams: map[int]*mdClassStream{}}
}

// Draw picks the images of an episode: for each class in order, its shots
// and queries in one Take (so they never overlap), support first.
func (o *mdImageOrder) Draw(ep MDEpisodeSpec, rng *rand.Rand) (support, query [][]int) {
	support = make([][]int, len(ep.Classes))
	query = make([][]int, len(ep.Classes))
	for i, c := range ep.Classes {
		st := o.streams[c]
		if st == nil {
			st = newMDClassStream(o.spec.Images(c))
			o.streams[c] = st
		}
		got := st.Take(ep.Shots[i]+ep.Query, rng)
		support[i], query[i] = got[:ep.Shots[i]:ep.Shots[i]], got[ep.Shots[i]:]
	}
	return support, query
}
