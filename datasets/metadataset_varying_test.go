package datasets

import (
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/task"
)

// taggedClasses is a class set whose example k of class c reads (c, k), so
// a test can tell which images an episode drew.
type taggedClasses struct{ sizes []int }

func (s taggedClasses) Family() string                { return "tagged" }
func (s taggedClasses) Name() string                  { return "train" }
func (s taggedClasses) NumClasses() int               { return len(s.sizes) }
func (s taggedClasses) ImagesIn(c int) int            { return s.sizes[c] }
func (s taggedClasses) InDim() int                    { return 2 }
func (s taggedClasses) Image(c, k int, dst []float64) { dst[0], dst[1] = float64(c), float64(k) }

// Varying episodes: shapes within the sampler's bounds, every label one
// class with at least one shot, no image twice in an episode, the same
// episode from the same seed, and both sources drawn.
func TestMDVaryingEpisodes(t *testing.T) {
	sizes := [][]int{{40, 7, 12, 30, 9, 25, 11, 60}, {3, 3, 4, 5, 3, 3}}
	var specs []*MDSpec
	var cs []ClassSource
	for _, sz := range sizes {
		spec, err := PlainMDSpec("x", "train", sz)
		if err != nil {
			t.Fatal(err)
		}
		specs, cs = append(specs, spec), append(cs, taggedClasses{sz})
	}
	e, err := NewMDVarying("tagged", []string{"big", "small"}, specs, "train", cs, MDSamplerOptions{MaxWays: 7, MaxSupport: 40, MaxQuery: 4})
	if err != nil {
		t.Fatal(err)
	}
	var _ task.Varying = e
	if e.OutDim() != 7 || e.InDim() != 2 {
		t.Fatalf("out %d, in %d", e.OutDim(), e.InDim())
	}
	ways := map[int]bool{}
	smallSeen := false
	for i := 0; i < 300; i++ {
		var b task.Batch
		e.SampleVarying(task.Stream(1, 2, uint64(i)), &b)
		way := b.OutDim
		if b.T != 1 || way < 5 || way > 7 || b.NS > 40 || b.NS < way || b.NQ%way != 0 || b.NQ/way > 4 || b.NQ == 0 {
			t.Fatalf("episode %d: T %d, way %d, support %d, query rows %d", i, b.T, way, b.NS, b.NQ)
		}
		ways[way] = true
		class := make([]int, way)
		for j := range class {
			class[j] = -1
		}
		seen := map[[2]int]bool{}
		shots := make([]int, way)
		check := func(x, y []float64, rows int, what string) {
			for r := 0; r < rows; r++ {
				j, ones := -1, 0
				for k, v := range y[r*way : (r+1)*way] {
					if v == 1 {
						j, ones = k, ones+1
					} else if v != 0 {
						t.Fatalf("episode %d: %s row %d target %v", i, what, r, y[r*way:(r+1)*way])
					}
				}
				if ones != 1 {
					t.Fatalf("episode %d: %s row %d is not one-hot", i, what, r)
				}
				c, k := int(x[2*r]), int(x[2*r+1])
				if class[j] == -1 {
					class[j] = c
				}
				if class[j] != c {
					t.Fatalf("episode %d: label %d holds classes %d and %d", i, j, class[j], c)
				}
				if seen[[2]int{c, k}] {
					t.Fatalf("episode %d: image %d of class %d drawn twice", i, k, c)
				}
				seen[[2]int{c, k}] = true
				if what == "support" {
					shots[j]++
				}
			}
		}
		check(b.XS, b.YS, b.NS, "support")
		check(b.XQ, b.YQ, b.NQ, "query")
		for j, n := range shots {
			if n == 0 {
				t.Fatalf("episode %d: class %d has no shot", i, j)
			}
		}
		if b.NS <= 3*way && b.NQ/way <= 1 {
			smallSeen = true
		}
		var again task.Batch
		e.SampleVarying(task.Stream(1, 2, uint64(i)), &again)
		if again.NS != b.NS || again.NQ != b.NQ || again.OutDim != b.OutDim || !slices.Equal(again.XS, b.XS) || !slices.Equal(again.XQ, b.XQ) {
			t.Fatalf("episode %d differs when drawn again from its seed", i)
		}
	}
	if len(ways) != 3 || !smallSeen {
		t.Errorf("ways drawn %v, an episode of the small source seen: %v", ways, smallSeen)
	}
}

// A class set that is not the spec's split is refused, naming it.
func TestMDVaryingRefusesMismatch(t *testing.T) {
	spec, _ := PlainMDSpec("x", "train", []int{5, 5, 5, 5, 5})
	if _, err := NewMDVarying("t", []string{"x"}, []*MDSpec{spec}, "train", []ClassSource{taggedClasses{[]int{5, 5, 5, 5}}}, MDSamplerOptions{}); err == nil || !strings.Contains(err.Error(), "4 classes read, the spec has 5") {
		t.Errorf("fewer classes: %v", err)
	}
	if _, err := NewMDVarying("t", []string{"x"}, []*MDSpec{spec}, "train", []ClassSource{taggedClasses{[]int{5, 5, 6, 5, 5}}}, MDSamplerOptions{}); err == nil || !strings.Contains(err.Error(), "class 2 has 6 examples, the spec says 5") {
		t.Errorf("a class of another size: %v", err)
	}
	if _, err := NewMDVarying("t", []string{"x"}, []*MDSpec{spec}, "train", []ClassSource{taggedClasses{[]int{5, 5, 5, 5, 5}}}, MDSamplerOptions{Way: 5}); err == nil {
		t.Error("a fixed way was accepted")
	}
	if _, err := NewMDVarying("t", []string{"x"}, []*MDSpec{spec}, "train", []ClassSource{taggedClasses{[]int{5, 5, 5, 5, 5}}}, MDSamplerOptions{MinWays: 6, MaxWays: 8}); err == nil || !strings.Contains(err.Error(), "5 classes, fewer than the 6 ways") {
		t.Errorf("too few classes for the ways: %v", err)
	}
}
