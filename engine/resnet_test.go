package engine

import (
	"bytes"
	"encoding/gob"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/mkbench/mkbench/engine/ops"
)

// resnetConfig is a tiny ResNet classifier for blobs tasks (7×7 images:
// maps 7 → 4 → 2 → 2 → 1 → 1 → 1), evaluating with bnEval.
func resnetConfig(variant, bnEval string) Config {
	c := classConfig(variant, 1)
	c.Conv = nil
	c.Backbone, c.BNEval = BackboneResNet18, bnEval
	c.ResNet = &ResNetSpec{Channels: 1, Height: 7, Width: 7, Widths: [4]int{2, 2, 3, 3}, Out: 6}
	return c
}

func TestResNetConfig(t *testing.T) {
	c := resnetConfig("metakernel", "")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.FeatureDim() != 6 || !c.UsesResNet() {
		t.Errorf("FeatureDim %d, UsesResNet %v", c.FeatureDim(), c.UsesResNet())
	}
	for name, mut := range map[string]func(*Config){
		"no spec":      func(c *Config) { c.ResNet = nil },
		"bad spec":     func(c *Config) { c.ResNet.Out = 0 },
		"and conv":     func(c *Config) { c.Conv = &ConvSpec{Channels: 1, Height: 7, Width: 7, Blocks: 1, Filters: 2, Keep: 1} },
		"spec unused":  func(c *Config) { c.Backbone = "" },
		"conv no spec": func(c *Config) { c.Backbone, c.ResNet = BackboneConv, nil },
		"backbone":     func(c *Config) { c.Backbone = "vgg" },
		"bn_eval":      func(c *Config) { c.BNEval = "batch" },
	} {
		c := resnetConfig("vrf", "")
		spec := *c.ResNet
		c.ResNet = &spec
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// The kernel of ResNet-18 on a 75-image 84×84 episode held ~320 MB
	// (ops.BenchmarkResNet18Step's heap less its float64 test data).
	s := ops.ResNet18(3, 84, 84)
	if mb := resnetBytes(&s, 75, false) / 1e6; mb < 250 || mb > 450 {
		t.Errorf("ResNet-18 episode estimate %.0f MB, measured ~320", mb)
	}
	if tr, ev := resnetBytes(&s, 75, true), resnetBytes(&s, 75, false); tr <= ev {
		t.Errorf("training estimate %g not above evaluation's %g", tr, ev)
	}
}

// The whole model with a ResNet ψ against finite differences, per-task
// batch statistics included.
func TestResNetModelGradient(t *testing.T) {
	for _, v := range []string{"rff", "metakernel"} {
		t.Run(v, func(t *testing.T) {
			m, err := NewModel(resnetConfig(v, ""), blobs{way: 3, side: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			// Batch-normalized features come out at unit scale, and the
			// tiny model's loss then curves so sharply in them (gradients
			// of ~100) that central differences with a step of 1e-6 are
			// off by 1e-5 (they converge as h² to the gradient). Smaller
			// features keep the check at its tolerance.
			for _, n := range []string{"resnet.fc.w", "resnet.fc.b"} {
				scale(m.Params.Get(n).Data, 0.2)
			}
			checkModelFD(t, m, rand.New(rand.NewPCG(13, 0)))
		})
	}
}

// The staged step gives the one-graph step's loss and gradients: each task
// is its own batch-norm episode, so splitting the meta-batch into ranges,
// or running ψ on the support rows alone in the summary passes, changes
// no task's features.
func TestResNetStagedMatchesOneGraph(t *testing.T) {
	for _, v := range []string{"vrf", "vrf+ctx"} {
		t.Run(v, func(t *testing.T) {
			cfg := resnetConfig(v, "")
			cfg.MetaBatch = 5
			m, err := NewModel(cfg, blobs{way: 3, side: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			randomizeModel(m, rand.New(rand.NewPCG(21, 0)))
			one, st := trainGraphs(t, m)
			for _, gs := range [][]*graph{{one}, st.tasks, st.sums, st.seeded} {
				for _, gr := range gs {
					useFloat64(gr)
				}
			}
			in := &m.bufs[0]
			m.prepare(3, in, nil)
			s1 := m.State.clone()
			if err := m.run(one, &in.batch, &in.noise, &s1, nil); err != nil {
				t.Fatal(err)
			}
			want, err := one.grads(nil, len(m.Params.List))
			if err != nil {
				t.Fatal(err)
			}
			s2 := m.State.clone()
			var got [][]float64
			stats, err := st.run(m.Params, &in.batch, &in.noise, &s2, nil, &got)
			if err != nil {
				t.Fatal(err)
			}
			close := func(what string, a, b float64) {
				t.Helper()
				if math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(b)) {
					t.Errorf("%s = %.15g staged, %.15g in one graph", what, a, b)
				}
			}
			close("loss", stats.Loss, scalarOf(one.r.lossV))
			for i, p := range m.Params.List {
				for j := range want[i] {
					close(p.Name, got[i][j], want[i][j])
				}
			}
		})
	}
}

// A tiny ResNet model trains: the loss is finite, the running statistics
// move (folded once per step, from the task stages), and the checkpoint
// carries them: a model rebuilt from it evaluates, with the running
// statistics, exactly as the run did.
func TestResNetTrainsAndCheckpointRoundTrips(t *testing.T) {
	cfg := resnetConfig("vrf+ctx", BNEvalRunning)
	cfg.Iters, cfg.LogEvery, cfg.SnapshotEvery = 12, 4, 6
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 12, 2, 2
	src := blobs{way: 3, side: 7}
	dir := t.TempDir()
	res := runTo(t, cfg, src, dir, nil)
	if res.Iters != cfg.Iters || math.IsNaN(res.Last.Loss) {
		t.Fatalf("run: %d iterations, last %+v", res.Iters, res.Last)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	convs := cfg.ResNet.Convs()
	if len(ck.Buffers) != 2*len(convs) || ck.Buffers[0].Name != "resnet.stem.bn.mean" || ck.Buffers[1].Name != "resnet.stem.bn.var" {
		t.Fatalf("checkpoint buffers %d (want %d), first %v", len(ck.Buffers), 2*len(convs), ck.Buffers[0])
	}
	start := ops.NewResNetStats(*cfg.ResNet)
	if slices.Equal(ck.Buffers[0].Data, start[0].Mean) || slices.Equal(ck.Buffers[1].Data, start[0].Var) {
		t.Error("the running statistics did not move in training")
	}
	m, err := ck.Model(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !slices.Equal(m.BN[0].Mean, ck.Buffers[0].Data) || !slices.Equal(m.BN[len(convs)-1].Var, ck.Buffers[len(ck.Buffers)-1].Data) {
		t.Error("the rebuilt model's running statistics differ from the checkpoint's")
	}
	ev, err := m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Mean != res.Eval.Mean || ev.CI95 != res.Eval.CI95 {
		t.Fatalf("eval from checkpoint %v, run reported %v", ev, res.Eval)
	}
	// A checkpoint whose buffers do not match is refused.
	ck.Buffers = ck.Buffers[1:]
	if _, err := ck.Model(src); err == nil {
		t.Error("checkpoint with a missing running statistic: no error")
	}
}

// Checkpoints written before Buffers existed (the same gob without the
// field) still load and restore.
func TestCheckpointWithoutBuffersLoads(t *testing.T) {
	cfg := tinyConfig("vrf", 3)
	dir := t.TempDir()
	runTo(t, cfg, sineLike{}, dir, nil)
	path := filepath.Join(dir, FileCheckpoint)
	ck, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	// The Checkpoint type as it was: every exported field but Buffers.
	cv := reflect.ValueOf(ck).Elem()
	var fields []reflect.StructField
	for i := range cv.NumField() {
		if f := cv.Type().Field(i); f.IsExported() && f.Name != "Buffers" {
			fields = append(fields, f)
		}
	}
	old := reflect.New(reflect.StructOf(fields)).Elem()
	for _, f := range fields {
		old.FieldByName(f.Name).Set(cv.FieldByName(f.Name))
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(old.Interface()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, encodeCheckpointFile(buf.Bytes()), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Buffers != nil || back.Iter != ck.Iter {
		t.Fatalf("old checkpoint read back with buffers %v, iteration %d", back.Buffers, back.Iter)
	}
	m, err := back.Model(sineLike{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}
