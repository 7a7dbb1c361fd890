package datasets

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// mdCheckEpisode checks the rules every variable episode of the sampler
// obeys (sampling.py): distinct classes of the split, ways in bounds,
// the query min(10, ⌊fewest images/2⌋), a support set between the way and
// 500 that respects the per-class cap of 100, shots between 1 and what
// the query leaves.
func mdCheckEpisode(t *testing.T, s *MDSampler, ep MDEpisodeSpec, maxWay int) {
	t.Helper()
	spec := s.Spec()
	inSplit := spec.Classes(s.Split())
	way := ep.Way()
	if way < MDMinWays || way > maxWay || len(ep.Shots) != way {
		t.Fatalf("%d ways, %d shot counts; want 5 to %d", way, len(ep.Shots), maxWay)
	}
	fewest, capped := int(^uint(0)>>1), 0
	for _, c := range ep.Classes {
		if c < inSplit[0] || c > inSplit[len(inSplit)-1] {
			t.Fatalf("class %d outside the split (%d to %d)", c, inSplit[0], inSplit[len(inSplit)-1])
		}
		fewest = min(fewest, spec.Images(c))
	}
	if len(slices.Compact(mdSorted(ep.Classes))) != way {
		t.Fatalf("classes repeat: %v", ep.Classes)
	}
	if want := min(MDMaxQuery, fewest/2); ep.Query != want {
		t.Fatalf("query %d, want %d (fewest images %d)", ep.Query, want, fewest)
	}
	for i, c := range ep.Classes {
		left := spec.Images(c) - ep.Query
		if ep.Shots[i] < 1 || ep.Shots[i] > left {
			t.Fatalf("class %d: %d shots of %d left", c, ep.Shots[i], left)
		}
		capped += min(MDMaxPerClass, left)
	}
	// The support-set size is at most Σ min(100, left) (β < 1), and the
	// shots add up to at most the size.
	if n := ep.Support(); n < way || n > MDMaxSupport || n > capped {
		t.Fatalf("support of %d for %d ways (cap %d)", n, way, capped)
	}
}

// TestMDSampleRealSources draws 2,000 episodes of every split of every
// source that has classes and checks the reference's rules, and the
// kind's class selection: one alphabet (Omniglot), the leaves of one
// eligible node (ILSVRC).
func TestMDSampleRealSources(t *testing.T) {
	for _, name := range mdSources {
		spec := realMDSpec(t, name)
		for _, split := range []string{MDTrain, MDValid, MDTest} {
			if len(spec.Classes(split)) == 0 {
				continue
			}
			t.Run(name+"/"+split, func(t *testing.T) {
				s, err := NewMDSampler(spec, split, MDSamplerOptions{})
				if err != nil {
					t.Fatal(err)
				}
				rng := task.Stream(7, 1, 0)
				ways := map[int]int{}
				for range 2000 {
					ep := s.Sample(rng)
					ways[ep.Way()]++
					switch spec.Kind {
					case MDPlain:
						mdCheckEpisode(t, s, ep, min(MDMaxWays, len(spec.Classes(split))))
					case MDBiLevel:
						sc := mdSuperclassOf(spec, split, ep.Classes[0])
						for _, c := range ep.Classes {
							if c < sc.First || c >= sc.First+sc.Classes {
								t.Fatalf("classes %v span alphabets", ep.Classes)
							}
						}
						mdCheckEpisode(t, s, ep, min(MDMaxWays, sc.Classes))
					case MDHierarchical:
						if !mdOneNode(spec.DAG(split), ep.Classes) {
							t.Fatalf("no eligible node spans %v", ep.Classes)
						}
						mdCheckEpisode(t, s, ep, MDMaxWays)
					}
				}
				if spec.Kind == MDPlain && len(ways) != min(MDMaxWays, len(spec.Classes(split)))-MDMinWays+1 {
					t.Errorf("%d distinct ways in 2,000 episodes", len(ways))
				}
			})
		}
	}
}

func mdSuperclassOf(spec *MDSpec, split string, class int) MDSuperclass {
	for _, sc := range spec.Superclasses(split) {
		if class >= sc.First && class < sc.First+sc.Classes {
			return sc
		}
	}
	panic(fmt.Sprintf("class %d in no superclass", class))
}

// mdOneNode says whether one eligible node spans all the classes.
func mdOneNode(d *MDDAG, classes []int) bool {
	for _, e := range d.Eligible {
		if !slices.ContainsFunc(classes, func(c int) bool { return !slices.Contains(d.Nodes[e].Leaves, c) }) {
			return true
		}
	}
	return false
}

// TestMDSampleWaysUniform checks that a plain source's ways are uniform on
// [5, 50] (aircraft train, 70 classes) by a loose chi-square test: 45
// degrees of freedom, so a statistic over 100 is a one-in-a-million event.
func TestMDSampleWaysUniform(t *testing.T) {
	s, err := NewMDSampler(realMDSpec(t, "aircraft"), MDTrain, MDSamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const per = 400
	counts := make([]int, MDMaxWays+1)
	classes := make([]int, 100)
	rng := task.Stream(11, 1, 0)
	for range per * (MDMaxWays - MDMinWays + 1) {
		ep := s.Sample(rng)
		counts[ep.Way()]++
		for _, c := range ep.Classes {
			classes[c]++
		}
	}
	chi := 0.0
	for w := MDMinWays; w <= MDMaxWays; w++ {
		d := float64(counts[w] - per)
		chi += d * d / per
	}
	if chi > 100 {
		t.Errorf("ways far from uniform: χ² = %.1f over 45 degrees of freedom (%v)", chi, counts[MDMinWays:])
	}
	// Every training class is drawn, and only those.
	if slices.Contains(classes[:70], 0) || slices.ContainsFunc(classes[70:], func(n int) bool { return n > 0 }) {
		t.Errorf("class draws %v", classes)
	}
}

// TestMDSampleSameSeed checks that episodes are a function of the rng:
// equal seeds, equal episodes; another seed, others. The multi-source
// sampler likewise.
func TestMDSampleSameSeed(t *testing.T) {
	for _, name := range []string{"ilsvrc_2012", "omniglot", "fungi"} {
		s, err := NewMDSampler(realMDSpec(t, name), MDTrain, MDSamplerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		draw := func(seed uint64) []MDEpisodeSpec {
			rng := task.Stream(seed, 1, 0)
			eps := make([]MDEpisodeSpec, 50)
			for i := range eps {
				eps[i] = s.Sample(rng)
			}
			return eps
		}
		if a, b, c := draw(3), draw(3), draw(4); !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) {
			t.Errorf("%s: same seed equal %v, other seed equal %v", name, reflect.DeepEqual(a, b), reflect.DeepEqual(a, c))
		}
	}
}

// TestMDSampleConcurrent draws from one sampler in several goroutines, each
// with its own stream: the episodes are those drawn alone (run with -race).
func TestMDSampleConcurrent(t *testing.T) {
	s, err := NewMDSampler(realMDSpec(t, "ilsvrc_2012"), MDTrain, MDSamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	draw := func(stream uint64) []MDEpisodeSpec {
		rng := task.Stream(1, stream, 0)
		eps := make([]MDEpisodeSpec, 200)
		for i := range eps {
			eps[i] = s.Sample(rng)
		}
		return eps
	}
	got := make([][]MDEpisodeSpec, 4)
	var wg sync.WaitGroup
	for g := range got {
		wg.Go(func() { got[g] = draw(uint64(g)) })
	}
	wg.Wait()
	for g := range got {
		if !reflect.DeepEqual(got[g], draw(uint64(g))) {
			t.Errorf("goroutine %d drew other episodes", g)
		}
	}
}

// mdToySpec is a plain source whose test split holds classes of the given
// sizes.
func mdToySpec(t *testing.T, images ...int) *MDSpec {
	t.Helper()
	m := map[string]int{}
	for i, n := range images {
		m[fmt.Sprint(i)] = n
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, MDSpecFile), []byte(`{"__class__": "DatasetSpecification", "name": "toy", "file_pattern": "{}.tfrecords",
		"classes_per_split": {"TRAIN": 0, "VALID": 0, "TEST": `+fmt.Sprint(len(images))+`}, "images_per_class": `+mdJSON(m)+`}`))
	s, err := LoadMetaDatasetSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mdHalfSource makes every Float64 0.5 (so β = ½ and every log-weight 0)
// and every IntN 0 (so draws keep the classes in order).
type mdHalfSource struct{}

func (mdHalfSource) Uint64() uint64 { return 1 << 52 }

// TestMDComposeByHand checks the support size and shots against numbers
// worked by hand from sampling.py's formulas. Classes of 100, 60, 40, 20,
// 10 images: query min(10, 10/2) = 5, left 95 55 35 15 5; β = ½ gives a
// size of 48+28+18+8+3 = 105; weights in proportion to class size give
// ⌊100·{100,60,40,20,10}/230⌋+1 = 44 27 18 9 5.
func TestMDComposeByHand(t *testing.T) {
	spec := mdToySpec(t, 100, 60, 40, 20, 10)
	rng := rand.New(mdHalfSource{})
	for _, c := range []struct {
		opts  MDSamplerOptions
		query int
		shots []int
	}{
		{MDSamplerOptions{}, 5, []int{44, 27, 18, 9, 5}},
		// A support set of at most 20: 15 shared, ⌊15·w/230⌋+1.
		{MDSamplerOptions{MaxSupport: 20}, 5, []int{7, 4, 3, 2, 1}},
		// A cap of 10 per class: 6+6+6+6+3 = 27, 22 shared.
		{MDSamplerOptions{MaxPerClass: 10}, 5, []int{10, 6, 4, 2, 1}},
		// Two queries: left 98 58 38 18 8, a size of 50+30+20+10+5 = 115.
		{MDSamplerOptions{Query: 2}, 2, []int{48, 29, 20, 10, 5}},
		{MDSamplerOptions{Way: 5, Shot: 3}, 7, []int{3, 3, 3, 3, 3}},
		{MDSamplerOptions{Way: 5, Shot: 3, Query: 4}, 4, []int{3, 3, 3, 3, 3}},
	} {
		s, err := NewMDSampler(spec, MDTest, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		ep := s.Sample(rng)
		if !slices.Equal(ep.Classes, []int{0, 1, 2, 3, 4}) || ep.Query != c.query || !slices.Equal(ep.Shots, c.shots) {
			t.Errorf("%+v: %+v, want query %d shots %v", c.opts, ep, c.query, c.shots)
		}
	}
}

// TestMDFixedWayShot draws 5-way 1-shot and 5-shot episodes of every
// source's test split: five classes of the split, the given shot, the
// query min(10, fewest images − shot) or the given one.
func TestMDFixedWayShot(t *testing.T) {
	for _, name := range mdSources {
		spec := realMDSpec(t, name)
		for _, shot := range []int{1, 5} {
			for _, query := range []int{0, 1} {
				s, err := NewMDSampler(spec, MDTest, MDSamplerOptions{Way: 5, Shot: shot, Query: query})
				if err != nil {
					t.Fatal(err)
				}
				rng := task.Stream(5, uint64(shot), 0)
				for range 300 {
					ep := s.Sample(rng)
					fewest := int(^uint(0) >> 1)
					for _, c := range ep.Classes {
						fewest = min(fewest, spec.Images(c))
					}
					want := min(MDMaxQuery, fewest-shot)
					if query > 0 {
						want = query
					}
					if ep.Way() != 5 || ep.Support() != 5*shot || ep.Query != want || len(slices.Compact(mdSorted(ep.Classes))) != 5 {
						t.Fatalf("%s 5-way %d-shot: %+v (query want %d)", name, shot, ep, want)
					}
				}
			}
		}
	}
}

// TestMDSamplerErrors checks that impossible episodes are refused when the
// sampler is made, each error naming the source and split.
func TestMDSamplerErrors(t *testing.T) {
	for _, c := range []struct {
		source, split string
		opts          MDSamplerOptions
		msg           string
	}{
		{"aircraft", MDTrain, MDSamplerOptions{Way: 71}, "71-way episodes need 71 classes"},
		{"traffic_sign", MDTrain, MDSamplerOptions{}, "has no classes"},
		{"mscoco", MDTrain, MDSamplerOptions{Way: 5, Shot: 1}, "has no classes"},
		{"omniglot", MDTest, MDSamplerOptions{Way: 5, Shot: 15, Query: 10}, "too few for 15 shots + 10 queries"},
		{"fungi", MDTrain, MDSamplerOptions{Shot: 6}, "too few for 6 shots and a query"},
		{"dtd", MDValid, MDSamplerOptions{}, "has 7 classes, fewer than the 10 ways"},
		{"omniglot", MDTrain, MDSamplerOptions{MinWays: 30, MaxWays: 60}, "superclass 0 (Anglo-Saxon_Futhorc) has 29 classes, fewer than the 30 ways"},
		{"ilsvrc_2012", MDTest, MDSamplerOptions{MinWays: 200, MaxWays: 300}, "no node of the hierarchy spans 200"},
		{"aircraft", MDTrain, MDSamplerOptions{MaxSupport: 20}, "at most 20 cannot hold"},
		{"aircraft", "validation", MDSamplerOptions{}, "unknown split"},
		{"aircraft", MDTrain, MDSamplerOptions{Shot: -1}, "Shot is -1"},
		{"aircraft", MDTrain, MDSamplerOptions{MinWays: 9, MaxWays: 8}, "MinWays 9 > MaxWays 8"},
	} {
		opts := c.opts
		if c.source == "dtd" {
			opts.MinWays = 10
		}
		_, err := NewMDSampler(realMDSpec(t, c.source), c.split, opts)
		if err == nil {
			t.Errorf("%s %s %+v: no error", c.source, c.split, opts)
			continue
		}
		msg := err.Error()
		named := strings.Contains(msg, c.source) && strings.Contains(msg, c.split)
		if strings.Contains(c.msg, "is -1") || strings.Contains(c.msg, "MaxWays 8") {
			named = true // option errors come before the source is read
		}
		if !strings.HasPrefix(msg, "datasets: ") || !named || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s: error %q, want it to name them and say %q", c.source, c.split, msg, c.msg)
		}
	}
	if _, err := NewMDMultiSampler(); err == nil {
		t.Error("a multi-source sampler of no source")
	}
}

// TestMDMultiSampler draws the test splits of the ten sources: each about
// a tenth of the time, each episode valid for its source.
func TestMDMultiSampler(t *testing.T) {
	var srcs []*MDSampler
	for _, name := range mdSources {
		s, err := NewMDSampler(realMDSpec(t, name), MDTest, MDSamplerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	m, err := NewMDMultiSampler(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	counts := make([]int, len(srcs))
	rng := task.Stream(9, 1, 0)
	for range n {
		i, ep := m.Sample(rng)
		counts[i]++
		if c := ep.Classes[0]; !slices.Contains(srcs[i].Spec().Classes(MDTest), c) || ep.Query < 1 {
			t.Fatalf("source %d gave %+v", i, ep)
		}
	}
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - n/10
		chi += d * d / (n / 10)
	}
	if chi > 40 { // 9 degrees of freedom
		t.Errorf("sources far from uniform: %v", counts)
	}
}

// TestMDClassStream checks the reader's order: within a pass no image
// repeats; a request the pass cannot meet starts a new shuffled pass; each
// pass is a permutation; the same seed gives the same order.
func TestMDClassStream(t *testing.T) {
	takes := func(seed uint64) [][]int {
		s, rng := newMDClassStream(10), task.Stream(seed, 2, 0)
		var out [][]int
		for _, n := range []int{3, 3, 3, 3, 10, 4, 4, 4} {
			out = append(out, s.Take(n, rng))
		}
		return out
	}
	got := takes(1)
	pass := func(parts ...[]int) []int { return mdSorted(slices.Concat(parts...)) }
	whole := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	// Passes: 3+3+3 (one left over, dropped), 3 (then 10 > 7 left), 10,
	// 4+4 (then 4 > 2 left), 4.
	if p := pass(got[0], got[1], got[2]); len(slices.Compact(p)) != 9 {
		t.Errorf("first pass repeats: %v", got[:3])
	}
	if !slices.Equal(pass(got[4]), whole) || len(slices.Compact(pass(got[5], got[6]))) != 8 {
		t.Errorf("passes %v", got)
	}
	if !reflect.DeepEqual(got, takes(1)) || reflect.DeepEqual(got, takes(2)) {
		t.Error("the order is not a function of the seed")
	}
	defer func() {
		if recover() == nil {
			t.Error("taking 11 of 10 images did not panic")
		}
	}()
	newMDClassStream(10).Take(11, task.Stream(1, 2, 0))
}

// TestMDImageOrderDraw draws the images of Omniglot episodes: per class the
// shots and queries asked for, disjoint, within the class.
func TestMDImageOrderDraw(t *testing.T) {
	spec := realMDSpec(t, "omniglot")
	s, err := NewMDSampler(spec, MDTrain, MDSamplerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	order, rng := newMDImageOrder(spec), task.Stream(1, 3, 0)
	for range 200 {
		ep := s.Sample(rng)
		sup, qry := order.Draw(ep, rng)
		for i, c := range ep.Classes {
			all := mdSorted(slices.Concat(sup[i], qry[i]))
			if len(sup[i]) != ep.Shots[i] || len(qry[i]) != ep.Query || len(slices.Compact(all)) != ep.Shots[i]+ep.Query || all[len(all)-1] >= spec.Images(c) {
				t.Fatalf("class %d: support %v query %v for %d shots, %d queries", c, sup[i], qry[i], ep.Shots[i], ep.Query)
			}
		}
	}
}

// BenchmarkMDSample measures episode compositions drawn per second from
// the training split of each kind's source.
func BenchmarkMDSample(b *testing.B) {
	for _, name := range []string{"ilsvrc_2012", "omniglot", "fungi"} {
		b.Run(name, func(b *testing.B) {
			s, err := NewMDSampler(realMDSpec(b, name), MDTrain, MDSamplerOptions{})
			if err != nil {
				b.Fatal(err)
			}
			rng := task.Stream(1, 1, 0)
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(rng)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "episodes/s")
		})
	}
}
