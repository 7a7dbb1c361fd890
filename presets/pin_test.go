package presets

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/mkbench/mkbench/engine"
)

var updatePins = flag.Bool("update-pins", false, "rewrite testdata/pinned-sine.json from this build")

// pinned is what one pinned run must reproduce bit for bit.
type pinned struct {
	Metrics string `json:"metrics_sha256"` // of metrics.jsonl
	Mean    string `json:"eval_mean"`      // float64 bits, hex
	CI95    string `json:"eval_ci95"`
}

// Same seed, same bytes: every sine variant, trained through the run spec
// and engine.Run as `mkbench run --preset sine-5shot --variant V --iters
// 300 --eval-tasks 100` does, writes exactly the metrics.jsonl and
// evaluation pinned in testdata/pinned-sine.json. The pins were taken
// before the engine's restructuring and checked against the
// pre-restructuring binary; a change that moves any number fails here.
// Regenerate deliberately with -update-pins, never to make a refactor pass.
func TestSineRunsArePinned(t *testing.T) {
	if testing.Short() {
		t.Skip("trains six variants for 300 iterations")
	}
	path := filepath.Join("testdata", "pinned-sine.json")
	want := map[string]pinned{}
	if !*updatePins {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]pinned{}
	for _, v := range engine.Variants {
		p, cfg, err := Spec{Preset: "sine-5shot", Variant: v, Overrides: Overrides{"iters": 300, "eval_tasks": 100}}.Config()
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := NewSources(p.Source, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		res, err := engine.Run(context.Background(), cfg, srcs.Train, engine.RunOptions{Preset: p.Name, Dir: dir, Val: srcs.Val, Test: srcs.Test}, nil)
		if err != nil {
			t.Fatal(err)
		}
		metrics, err := os.ReadFile(filepath.Join(dir, engine.FileMetrics))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(metrics)
		bits := func(x float64) string {
			return hex.EncodeToString(binary.BigEndian.AppendUint64(nil, math.Float64bits(x)))
		}
		got[v] = pinned{Metrics: hex.EncodeToString(sum[:]), Mean: bits(res.Eval.Mean), CI95: bits(res.Eval.CI95)}
		if !*updatePins && got[v] != want[v] {
			t.Errorf("%s: %+v, pinned %+v (eval %v)", v, got[v], want[v], res.Eval)
		}
	}
	if *updatePins {
		data, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
