package engine

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
)

// A model file holds the run's model in float32: read back, every value is
// the float32 rounding of the run's, it evaluates the same every time, and
// within rounding of the run's own parameters; damage is refused.
func TestModelFileRoundTrip(t *testing.T) {
	cfg := classConfig("metakernel", 0.9)
	cfg.Iters, cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 20, 30, 2, 1
	src := blobs{way: 3, side: 7}
	dir := t.TempDir()
	if _, err := Run(context.Background(), cfg, src, RunOptions{Dir: dir, Preset: "blobs-3w"}, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	data := ModelFile(ck)
	back, err := ReadModelFile(data, "blobs.mkbm")
	if err != nil {
		t.Fatal(err)
	}
	if back.Preset != "blobs-3w" || back.Iter != 20 || back.Config.Bases != cfg.Bases || len(back.Params) != len(ck.Params) {
		t.Fatalf("header: %+v", back)
	}
	for i, p := range ck.Params {
		for j, v := range p.Data {
			if back.Params[i].Data[j] != float64(float32(v)) {
				t.Fatalf("%s[%d] = %v, want float32(%v)", p.Name, j, back.Params[i].Data[j], v)
			}
		}
	}
	for k := 0; k < 2; k++ {
		if len(back.State.H[k]) != len(ck.State.H[k]) {
			t.Fatalf("context state of direction %d: %d values, want %d", k, len(back.State.H[k]), len(ck.State.H[k]))
		}
	}
	eval := func(c *Checkpoint) EvalResult {
		m, err := c.Model(src)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ev, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	a, b, full := eval(back), eval(back), eval(ck)
	if a.Mean != b.Mean {
		t.Errorf("the model file evaluates to %v, then %v", a, b)
	}
	if math.Abs(a.Mean-full.Mean) > 0.02 {
		t.Errorf("float32 model %v, float64 run %v", a, full)
	}

	for name, bytes := range map[string][]byte{
		"flipped": func() []byte { d := append([]byte(nil), data...); d[len(d)/2] ^= 1; return d }(),
		"cut":     data[:len(data)-10],
		"magic":   append([]byte("NOTMODEL"), data[8:]...),
		"empty":   nil,
	} {
		if _, err := ReadModelFile(bytes, "x.mkbm"); !errors.Is(err, ErrBadModelFile) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
