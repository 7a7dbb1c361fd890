package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the engine's readers of untrusted bytes: the checkpoint
// (LoadCheckpoint, whatever its format: the seeds are written by Save, so
// they follow it), the model file (ReadModelFile: the seeds are a shipped
// model and one written by ModelFile) and config.json/summary.json
// (RunConfig, Summary and Config.Validate). No input may panic, hang or allocate without bound;
// errors name the file.

// withDeadline runs f and fails t when it takes longer than d: a hang on
// a crafted input is a failure, not a slow test.
func withDeadline(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// allocBound fails t when f allocates more than limit bytes: a size field
// claiming a billion elements must be refused before allocating them.
func allocBound(t *testing.T, limit uint64, what string, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Fatalf("%s allocated %d bytes, more than %d", what, got, limit)
	}
}

// fuzzCheckpoints are real checkpoints as Save writes them: a regression
// and a classification model, freshly initialized.
func fuzzCheckpoints(f *testing.F) [][]byte {
	reg := sineConfig("metakernel")
	reg.EmbedHidden, reg.InferHidden, reg.PriorHidden, reg.FlowHidden, reg.Bases, reg.FlowLayers = []int{3}, 3, 3, 3, 4, 2
	cls := classConfig("vrf+ctx", 0.9)
	cls.Conv.Filters, cls.InferHidden, cls.PriorHidden, cls.Bases = 2, 3, 3, 4
	dir := f.TempDir()
	var out [][]byte
	for i, c := range []struct {
		cfg Config
		src interface{ Name() string }
	}{{reg, sineLike{}}, {cls, blobs{way: 3, side: 7}}} {
		var m *Model
		var err error
		switch s := c.src.(type) {
		case sineLike:
			m, err = NewModel(c.cfg, s)
		case blobs:
			m, err = NewModel(c.cfg, s)
		}
		if err != nil {
			f.Fatal(err)
		}
		opt := NewOptimizer(c.cfg, m.Params.List)
		ck := newCheckpoint("fuzz", c.src.Name(), m, opt, 7, window{N: 2, Loss: 1.5}, 3.25)
		ck.BestVal, ck.BestIter = 0.5, 5
		path := filepath.Join(dir, filepath.Base(FileCheckpoint)+string(rune('a'+i)))
		if err := ck.Save(path); err != nil {
			f.Fatal(err)
		}
		if _, err := LoadCheckpoint(path); err != nil {
			f.Fatalf("a saved checkpoint does not load: %v", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzLoadCheckpoint writes arbitrary bytes as a checkpoint file and loads
// it: an error must name the file, and what loads must be a valid,
// complete checkpoint.
func FuzzLoadCheckpoint(f *testing.F) {
	for _, b := range fuzzCheckpoints(f) {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, FileCheckpoint)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var c *Checkpoint
		var err error
		allocBound(t, 64<<20+64*uint64(len(data)), "LoadCheckpoint", func() {
			withDeadline(t, 10*time.Second, "LoadCheckpoint", func() { c, err = LoadCheckpoint(path) })
		})
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if c == nil || c.Config.Validate() != nil || c.Iter < 0 || c.Optimizer == nil {
			t.Fatalf("accepted an invalid checkpoint: %+v", c)
		}
	})
}

// FuzzRunConfig reads arbitrary bytes as config.json (ReadRunConfig) and as
// summary.json (Summary), and validates the config they hold: Validate and
// the config's derived sizes must never panic or hang; a config that
// validates survives a JSON round trip unchanged and still valid.
func FuzzRunConfig(f *testing.F) {
	for _, v := range Variants {
		b, _ := json.MarshalIndent(RunConfig{Preset: "sine-5shot", Source: "sine", Config: sineConfig(v)}, "", "  ")
		f.Add(b)
	}
	b, _ := json.MarshalIndent(RunConfig{Preset: "omniglot-5w1s", Source: "omniglot", Config: omniglotLikeConfig()}, "", "  ")
	f.Add(b)
	b, _ = json.Marshal(Summary{Preset: "omniglot-5w1s", Variant: "metakernel", Iters: 10, Eval: &EvalResult{Metric: "accuracy", Mean: 0.5}, Config: omniglotLikeConfig()})
	f.Add(b)
	f.Add([]byte(`{"config":{"kernel":"vrf","flow_layers":2,"conv":{"channels":1,"height":28,"width":28,"blocks":40,"filters":64,"keep":1,"floor_pool":true}}}`))
	f.Add([]byte(`{"config":{"kernel":"vrf","context":"bilstm","embed_hidden":[-1,1e9],"bases":-3,"lr":1e308}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		var sum Summary
		if json.Unmarshal(data, &sum) == nil {
			withDeadline(t, 5*time.Second, "Validate of summary.json's config", func() { checkConfig(t, sum.Config) })
		}
		path := filepath.Join(dir, FileConfig)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rc, err := ReadRunConfig(dir)
		var want RunConfig
		if werr := json.Unmarshal(data, &want); (err == nil) != (werr == nil) {
			t.Fatalf("ReadRunConfig: %v; json.Unmarshal: %v", err, werr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		withDeadline(t, 5*time.Second, "Validate of config.json's config", func() { checkConfig(t, rc.Config) })
	})
}

// checkConfig validates c and, when valid, checks its JSON round trip.
func checkConfig(t *testing.T, c Config) {
	err := c.Validate()
	c.Variant()
	c.Classify()
	if err != nil {
		if !strings.HasPrefix(err.Error(), "engine: invalid config: ") {
			t.Errorf("error %q lacks its prefix", err)
		}
		return
	}
	c.FeatureDim()
	b, err := json.Marshal(RunConfig{Config: c})
	if err != nil {
		t.Fatalf("a valid config does not encode: %v", err)
	}
	var again RunConfig
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&again); err != nil {
		t.Fatalf("a valid config does not decode again: %v", err)
	}
	if again.Config.Validate() != nil || !reflect.DeepEqual(normalConfig(again.Config), normalConfig(c)) {
		t.Fatalf("a valid config changes in a JSON round trip:\n%+v\n%+v", c, again.Config)
	}
}

// normalConfig treats an empty and a nil list alike (JSON keeps neither
// apart).
func normalConfig(c Config) Config {
	if len(c.EmbedHidden) == 0 {
		c.EmbedHidden = nil
	}
	return c
}

// FuzzReadModelFile reads arbitrary bytes as a model file, as they are and
// with their checksum made right (so that the header and the values are
// reached): an error matches ErrBadModelFile and names the file; what
// loads is a valid, finite model that writes back to the same bytes.
func FuzzReadModelFile(f *testing.F) {
	f.Add(ModelFile(smallCheckpoint(f)))
	if shipped, _ := filepath.Glob("../presets/models/shipped/*/model.mkbm"); len(shipped) > 0 {
		b, err := os.ReadFile(shipped[0])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("MKBMODEL\x00\x00\x00\x01\xff\xff\xff\xff{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		body := data
		if len(body) >= sha256.Size {
			body = body[:len(body)-sha256.Size]
		}
		sum := sha256.Sum256(body)
		for _, b := range [][]byte{data, append(body[:len(body):len(body)], sum[:]...)} {
			var ck *Checkpoint
			var err error
			allocBound(t, 64<<20+16*uint64(len(b)), "ReadModelFile", func() {
				withDeadline(t, 10*time.Second, "ReadModelFile", func() { ck, err = ReadModelFile(b, "fuzz.mkbm") })
			})
			if err != nil {
				if !errors.Is(err, ErrBadModelFile) || !strings.Contains(err.Error(), "fuzz.mkbm") {
					t.Fatalf("error %q does not match ErrBadModelFile or name the file", err)
				}
				continue
			}
			if ck.Config.Validate() != nil || ck.checkFinite("", nil) != nil || ck.Optimizer == nil {
				t.Fatalf("accepted an invalid model: %+v", ck)
			}
			if _, err := ReadModelFile(ModelFile(ck), "again.mkbm"); err != nil {
				t.Fatalf("a model read does not read back once written: %v", err)
			}
		}
	})
}

// The shipped models open as they are, and write back byte for byte: the
// bounds refuse none of them.
func TestShippedModelFilesOpen(t *testing.T) {
	files, _ := filepath.Glob("../presets/models/shipped/*/model.mkbm")
	if len(files) == 0 {
		t.Skip("no shipped models")
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := ReadModelFile(b, path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.Equal(ModelFile(ck), b) {
			t.Errorf("%s does not write back to the same bytes", path)
		}
	}
}
