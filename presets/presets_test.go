package presets

import (
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
)

func TestPresetsAreValidForEveryVariant(t *testing.T) {
	for _, p := range All() {
		if _, err := NewSource(p.Source); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		for _, v := range engine.Variants {
			c := p.Config
			if err := c.ApplyVariant(v, 4); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("%s/%s: %v", p.Name, v, err)
			}
		}
	}
}

func TestSinePresetsMatchThePaper(t *testing.T) {
	for k, name := range map[int]string{3: "sine-3shot", 5: "sine-5shot", 10: "sine-10shot"} {
		p, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Config
		if c.Shot != k || c.Bases != 128 || c.FeatureDim() != 40 || c.MetaBatch != 25 || c.Query != 10 ||
			c.KLWeight != 1e-4 || c.LR != 1e-3 || c.Iters != 20000 || c.EvalTasks != 1000 || c.EvalQuery != 100 ||
			c.Variant() != "metakernel" || c.FlowLayers != 4 || c.FlowHidden != 128 {
			t.Errorf("%s: %+v", name, c)
		}
	}
}

func TestGetReturnsIndependentCopies(t *testing.T) {
	a, _ := Get("sine-5shot")
	a.Config.EmbedHidden[0] = 999
	b, _ := Get("sine-5shot")
	if b.Config.EmbedHidden[0] == 999 {
		t.Fatal("changing a preset's copy changed the preset")
	}
	if _, err := Get("sine-6shot"); err == nil || !strings.Contains(err.Error(), "mkbench presets") {
		t.Fatalf("unknown preset: %v", err)
	}
}
