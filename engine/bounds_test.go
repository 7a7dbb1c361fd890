package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Sizes read from a model file, a checkpoint or a config are checked
// against what the file holds and against Validate's ceilings before
// anything is allocated, with arithmetic that cannot overflow; values that
// are not finite are refused where a model is to be evaluated, naming the
// tensor.

// smallCheckpoint is a freshly initialized classifier's checkpoint.
func smallCheckpoint(t testing.TB) *Checkpoint {
	t.Helper()
	cfg := classConfig("metakernel", 0.9)
	cfg.Conv.Filters, cfg.InferHidden, cfg.PriorHidden, cfg.FlowHidden, cfg.Bases = 2, 3, 3, 3, 4
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 6, 2, 1
	m, err := NewModel(cfg, blobs{way: 3, side: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return newCheckpoint("blobs-3w", "blobs", m, NewOptimizer(cfg, m.Params.List), 4, window{}, 1)
}

// rewriteModelFile changes a model file's header (and its values, when
// vals is not nil) and writes a correct checksum again, as someone who
// crafts a file would.
func rewriteModelFile(t *testing.T, data []byte, edit func(h *modelHeader), vals func([]byte) []byte) []byte {
	t.Helper()
	n := binary.BigEndian.Uint32(data[12:])
	var h modelHeader
	if err := json.Unmarshal(data[16:16+n], &h); err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), data[16+n:len(data)-sha256.Size]...)
	if edit != nil {
		edit(&h)
	}
	if vals != nil {
		body = vals(body)
	}
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.Write(data[:12])
	binary.Write(&b, binary.BigEndian, uint32(len(js)))
	b.Write(js)
	b.Write(body)
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// oneLine fails t unless err is a single line without gorgonia's machine
// text.
func oneLine(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if s := err.Error(); strings.Contains(s, "\n") || strings.Contains(s, "PC ") || strings.Contains(s, "Failed to execute") {
		t.Fatalf("not one clear line: %q", s)
	}
}

// A model file's lengths are compared with its remaining bytes without
// overflow: a state length of 2⁶² (4·k wraps to 0), a shape whose product
// wraps, a header claiming more than the file are refused as damaged,
// without a panic and without allocating what they claim.
func TestModelFileHostileLengths(t *testing.T) {
	data := ModelFile(smallCheckpoint(t))
	cases := map[string][]byte{
		"state 2^62": rewriteModelFile(t, data, func(h *modelHeader) { h.State[0][0] = 1 << 62 }, nil),
		"state -1":   rewriteModelFile(t, data, func(h *modelHeader) { h.State[1][1] = -1 }, nil),
		"shape wraps": rewriteModelFile(t, data, func(h *modelHeader) {
			h.Params[0].Shape = []int{1 << 32, 1 << 32, 4}
		}, nil),
		"shape 2^62": rewriteModelFile(t, data, func(h *modelHeader) { h.Params[1].Shape = []int{1 << 62} }, nil),
		"negative":   rewriteModelFile(t, data, func(h *modelHeader) { h.Buffers = []tensorDef{{"x", []int{-4, -4}}} }, nil),
		"header": func() []byte {
			d := append([]byte(nil), data...)
			binary.BigEndian.PutUint32(d[12:], math.MaxUint32)
			body := d[:len(d)-sha256.Size]
			sum := sha256.Sum256(body)
			return append(body, sum[:]...)
		}(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			allocBound(t, 1<<20+8*uint64(len(b)), "ReadModelFile", func() { _, err = ReadModelFile(b, "x.mkbm") })
			if !errors.Is(err, ErrBadModelFile) {
				t.Fatalf("got %v, want a damaged model file", err)
			}
			oneLine(t, err)
		})
	}
}

// A model file whose header asks for a size past Validate's ceilings —
// eval_tasks 10¹², the evaluation's per-task results alone 8 TB — is
// refused when it is opened, in one line naming the setting.
func TestModelFileSizesBounded(t *testing.T) {
	data := ModelFile(smallCheckpoint(t))
	for key, edit := range map[string]func(c *Config){
		"eval_tasks":   func(c *Config) { c.EvalTasks = 1e12 },
		"eval_query":   func(c *Config) { c.EvalQuery = 1 << 40 },
		"eval_samples": func(c *Config) { c.EvalSamples = 1 << 40 },
		"bases":        func(c *Config) { c.Bases = 1 << 40 },
		"meta_batch":   func(c *Config) { c.MetaBatch = 1 << 40 },
	} {
		b := rewriteModelFile(t, data, func(h *modelHeader) { edit(&h.Config) }, nil)
		_, err := ReadModelFile(b, "x.mkbm")
		if !errors.Is(err, ErrBadModelFile) || !strings.Contains(err.Error(), key+" must be at most") {
			t.Errorf("%s: got %v", key, err)
			continue
		}
		oneLine(t, err)
	}
}

// A NaN or infinite value in a model file is refused at load, naming the
// tensor that holds it.
func TestModelFileRefusesNonFinite(t *testing.T) {
	ck := smallCheckpoint(t)
	data := ModelFile(ck)
	for _, x := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		// The second parameter's first value.
		b := rewriteModelFile(t, data, nil, func(v []byte) []byte {
			binary.LittleEndian.PutUint32(v[4*len(ck.Params[0].Data):], math.Float32bits(x))
			return v
		})
		_, err := ReadModelFile(b, "x.mkbm")
		var nf *NonFiniteParamError
		if !errors.As(err, &nf) || !errors.Is(err, ErrBadModelFile) || !errors.Is(err, ErrNonFinite) {
			t.Fatalf("got %v, want a NonFiniteParamError", err)
		}
		want := "parameter " + ck.Params[1].Name + " holds "
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "the model diverged or the file is damaged") {
			t.Fatalf("%q does not say %q", err, want)
		}
		oneLine(t, err)
	}
}

// A config's counts are bounded by Validate, each named by the key a user
// types; the ceilings themselves pass.
func TestConfigCeilings(t *testing.T) {
	for key, set := range map[string]func(c *Config, v int){
		"eval_tasks":     func(c *Config, v int) { c.EvalTasks = v },
		"val_tasks":      func(c *Config, v int) { c.ValTasks = v },
		"eval_query":     func(c *Config, v int) { c.EvalQuery = v },
		"eval_samples":   func(c *Config, v int) { c.EvalSamples = v },
		"query":          func(c *Config, v int) { c.Query = v },
		"shot":           func(c *Config, v int) { c.Shot = v },
		"way":            func(c *Config, v int) { c.Way = v },
		"train_way":      func(c *Config, v int) { c.TrainWay = v },
		"train_shot":     func(c *Config, v int) { c.TrainShot = v },
		"bases":          func(c *Config, v int) { c.Bases = v },
		"meta_batch":     func(c *Config, v int) { c.MetaBatch = v },
		"infer_hidden":   func(c *Config, v int) { c.InferHidden = v },
		"prior_hidden":   func(c *Config, v int) { c.PriorHidden = v },
		"flow_hidden":    func(c *Config, v int) { c.FlowHidden = v },
		"iters":          func(c *Config, v int) { c.Iters = v },
		"log_every":      func(c *Config, v int) { c.LogEvery = v },
		"snapshot_every": func(c *Config, v int) { c.SnapshotEvery = v },
		"val_every":      func(c *Config, v int) { c.ValEvery = v },
		"checkpoint_sec": func(c *Config, v int) { c.CheckpointSec = v },
		"flow_layers":    func(c *Config, v int) { c.FlowLayers = v },
		"infer_layers":   func(c *Config, v int) { c.InferLayers = v },
	} {
		for _, v := range []int{1e11, 1e12, math.MaxInt} {
			c := classConfig("metakernel", 0.9)
			c.ValEvery, c.ValTasks = 10, 10
			set(&c, v)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), key+" must be at most") {
				t.Errorf("%s=%d: got %v", key, v, err)
			}
		}
	}
	c := classConfig("metakernel", 0.9)
	c.EvalTasks, c.ValEvery, c.ValTasks, c.Iters = MaxTasks, MaxIters, MaxTasks, MaxIters
	c.Bases, c.EvalQuery, c.EvalSamples, c.MetaBatch = MaxSize, MaxSize, MaxSize, MaxSize
	if err := c.Validate(); err != nil {
		t.Errorf("the ceilings themselves are refused: %v", err)
	}
	c = classConfig("metakernel", 0.9)
	c.Bases, c.MetaBatch = 0, -1
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "bases must be positive") || !strings.Contains(err.Error(), "meta_batch must be positive") {
		t.Errorf("settings not named as typed: %v", err)
	}
}

// The memory estimates count what an evaluation keeps for its whole
// length: each task's metric, per test source, and the validation's.
func TestMemoryEstimateCountsEvalResults(t *testing.T) {
	c := classConfig("metakernel", 0.9)
	c.ValEvery, c.ValTasks = 10, 10
	big := c
	big.EvalTasks, big.ValTasks = MaxTasks, MaxTasks
	in, out := 49, 3
	for name, est := range map[string]func(Config, int, int) uint64{"MemoryEstimate": Config.MemoryEstimate, "EvalMemoryEstimate": Config.EvalMemoryEstimate} {
		if d := est(big, in, out) - est(c, in, out); d < 8*uint64(MaxTasks-c.EvalTasks) {
			t.Errorf("%s grows by %d bytes from %d to %d evaluation tasks", name, d, c.EvalTasks, big.EvalTasks)
		}
	}
	sources := big
	sources.TestSources = []string{"a", "b", "c"}
	if d := sources.MemoryEstimate(in, out) - big.MemoryEstimate(in, out); d < 2*8*uint64(MaxTasks) {
		t.Errorf("three test sources add only %d bytes", d)
	}
}

// A diverged run's checkpoint may hold NaN: resuming reads it (training
// refuses the step, not the file), but evaluating refuses it in one line
// naming the tensor, never with gorgonia's machine text.
func TestNonFiniteCheckpointEvaluation(t *testing.T) {
	ck := smallCheckpoint(t)
	ck.Params[2].Data[0] = math.NaN()
	dir := t.TempDir()
	if err := ck.Save(filepath.Join(dir, FileCheckpoint)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint)); err != nil {
		t.Fatalf("a checkpoint holding NaN must still load for resume: %v", err)
	}
	_, _, _, err := LoadEvalCheckpoint(dir)
	if !errors.Is(err, ErrBadCheckpoint) || !errors.Is(err, ErrNonFinite) ||
		!strings.Contains(err.Error(), "parameter "+ck.Params[2].Name+" holds NaN") || !strings.Contains(err.Error(), FileCheckpoint) {
		t.Fatalf("got %v", err)
	}
	oneLine(t, err)

	// Evaluated all the same (a model in memory), the error names the
	// tensor instead of the op that met the NaN.
	m, err := ck.Model(blobs{way: 3, side: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Evaluate(ck.Config.EvalTasks, ck.Config.EvalQuery, ck.Config.EvalSamples, 1)
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "parameter "+ck.Params[2].Name+" holds NaN") {
		t.Fatalf("got %v", err)
	}
	oneLine(t, err)

	// Finite parameters whose values overflow inside the graph: the op's
	// problem, in evaluation's words.
	for _, p := range m.Params.List {
		for i := range p.Data {
			p.Data[i] = 1e300
		}
	}
	_, err = m.Evaluate(ck.Config.EvalTasks, ck.Config.EvalQuery, ck.Config.EvalSamples, 1)
	if err == nil || !strings.HasPrefix(err.Error(), "engine: evaluation failed: ") {
		t.Fatalf("got %v", err)
	}
	oneLine(t, err)
}

// An evaluation asked for more tasks than Validate allows (a flag, not a
// config) is refused before its results are allocated.
func TestEvaluateBoundsTasks(t *testing.T) {
	ck := smallCheckpoint(t)
	m, err := ck.Model(blobs{way: 3, side: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	allocBound(t, 1<<20, "Evaluate", func() { _, err = m.Evaluate(1e12, 2, 1, 1) })
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("got %v", err)
	}
	oneLine(t, err)
}

// checkpointGob is the gob of ck, for crafting.
func checkpointGob(t *testing.T, ck *Checkpoint) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(ck); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A checkpoint's gob claiming a slice of 2⁴⁰ float64 (8 TiB), checksum
// and all correct, is refused without allocating it: encoding/gob bounds
// a slice by its message and grows it as values arrive. What decodes is
// then checked: tensors' shapes against their values, the optimizer's
// moments against the parameters.
func TestCheckpointHostileGob(t *testing.T) {
	ck := smallCheckpoint(t)
	// A parameter of 300 values, its length encoded as FE 01 2C.
	marker := make([]float64, 300)
	for i := range marker {
		marker[i] = 0.5
	}
	ck.Params[0].Data, ck.Params[0].Shape = marker, []int{300}
	ck.Optimizer.M[0], ck.Optimizer.V[0] = make([]float64, 300), make([]float64, 300)
	raw := checkpointGob(t, ck)
	// The last message holds the value; its length prefix is rewritten.
	var msgs [][]byte
	for r := raw; len(r) > 0; {
		n, w := gobUint(r)
		msgs, r = append(msgs, r[w:w+int(n)]), r[w+int(n):]
	}
	last := msgs[len(msgs)-1]
	i := bytes.Index(last, []byte{0xFE, 0x01, 0x2C, 0xFE, 0xE0, 0x3F})
	if i < 0 {
		t.Fatal("the slice's length is not where the test expects it")
	}
	huge := append(append(append([]byte(nil), last[:i]...), 0xFA, 0x01, 0, 0, 0, 0, 0), last[i+3:]...)
	var crafted []byte
	for _, m := range msgs[:len(msgs)-1] {
		crafted = append(append(crafted, gobPutUint(uint64(len(m)))...), m...)
	}
	crafted = append(append(crafted, gobPutUint(uint64(len(huge)))...), huge...)

	dir := t.TempDir()
	path := filepath.Join(dir, FileCheckpoint)
	if err := os.WriteFile(path, encodeCheckpointFile(crafted), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	allocBound(t, 16<<20, "LoadCheckpoint", func() { _, err = LoadCheckpoint(path) })
	if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v", err)
	}

	// A consistent gob whose shape and values disagree.
	ck.Params[0].Shape = []int{1 << 40, 1 << 40}
	if err := os.WriteFile(path, encodeCheckpointFile(checkpointGob(t, ck)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = LoadCheckpoint(path); !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), "has shape") {
		t.Fatalf("got %v", err)
	}
	ck.Params[0].Shape = []int{300}
	ck.Optimizer.M[0] = ck.Optimizer.M[0][:10]
	if err := os.WriteFile(path, encodeCheckpointFile(checkpointGob(t, ck)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = LoadCheckpoint(path); !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), "optimizer state") {
		t.Fatalf("got %v", err)
	}
}

// A checkpoint file whose header claims another length than the file
// holds is refused from its header, before its content is read: a sparse
// file of 1 GiB costs nothing to refuse.
func TestCheckpointSizeBeforeReading(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a sparse 1 GiB file")
	}
	path := filepath.Join(t.TempDir(), FileCheckpoint)
	head := encodeCheckpointFile([]byte("payload"))[:checkpointHeader]
	binary.BigEndian.PutUint64(head[12:], 1<<62)
	if err := os.WriteFile(path, head, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<30); err != nil {
		t.Skip(err)
	}
	var err error
	allocBound(t, 1<<20, "LoadCheckpoint", func() { _, err = LoadCheckpoint(path) })
	if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), "header says") {
		t.Fatalf("got %v", err)
	}
	oneLine(t, err)
}

// gobUint decodes one of encoding/gob's unsigned integers: a byte below
// 128, or the negated byte count followed by the big-endian bytes.
func gobUint(b []byte) (uint64, int) {
	if b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	n := int(-int8(b[0]))
	var x uint64
	for _, c := range b[1 : 1+n] {
		x = x<<8 | uint64(c)
	}
	return x, 1 + n
}

// gobPutUint encodes x as encoding/gob does.
func gobPutUint(x uint64) []byte {
	if x < 0x80 {
		return []byte{byte(x)}
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], x)
	i := 0
	for be[i] == 0 {
		i++
	}
	return append([]byte{byte(-int8(8 - i))}, be[i:]...)
}
