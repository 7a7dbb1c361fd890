package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
	"github.com/mkbench/mkbench/presets/models"
)

// A run's model exported into a folder of models is listed, evaluates
// to its recorded test result with no run directory, at another way too,
// and runs the versatility experiment (an earlier copy of it under the
// runs root moved aside); a damaged or missing model and an oversized
// one are each one error.
func TestModelsExportListEval(t *testing.T) {
	data := testutil.Data(t, "omniglot")
	root := t.TempDir()
	run, lib := filepath.Join(root, "run"), filepath.Join(root, "models")
	small := []string{"--set", "conv_filters=4", "--set", "infer_hidden=16", "--set", "prior_hidden=16", "--set", "flow_hidden=16", "--set", "bases=32"}
	args := append([]string{"run", "--preset", "omniglot-5w1s", "--data", data, "--iters", "4", "--eval-tasks", "20", "--set", "val_every=2", "--set", "val_tasks=5", "--out", run, "--quiet"}, small...)
	if out, e, code := mkbench(t, args...); code != 0 {
		t.Fatalf("run (exit %d): %s%s", code, out, e)
	}
	out, e, code := mkbench(t, "models", "export", run, "--name", "tiny", "--dir", lib)
	if code != 0 || !strings.Contains(out, "exported") {
		t.Fatalf("export (exit %d): %s%s", code, out, e)
	}
	for _, f := range []string{"model.mkbm", "model.json", "metrics.jsonl", "val.jsonl"} {
		if _, err := os.Stat(filepath.Join(lib, "tiny", f)); err != nil {
			t.Error(err)
		}
	}
	// A damaged summary.json is refused before the evaluation, and the
	// model exported before stays as it was.
	sumPath := filepath.Join(run, "summary.json")
	sumBytes := testutil.ReadFile(t, sumPath)
	infoBefore := testutil.ReadFile(t, filepath.Join(lib, "tiny", "model.json"))
	os.WriteFile(sumPath, sumBytes[:len(sumBytes)/2], 0o644)
	if _, e, code := mkbench(t, "models", "export", run, "--name", "tiny", "--dir", lib, "--force"); code == 0 || !strings.Contains(e, "summary.json is damaged") {
		t.Errorf("export with a damaged summary.json (exit %d): %s", code, e)
	}
	if string(testutil.ReadFile(t, filepath.Join(lib, "tiny", "model.json"))) != string(infoBefore) {
		t.Error("a refused export changed the model exported before")
	}
	os.WriteFile(sumPath, sumBytes, 0o644)

	out, e, code = mkbench(t, "models", "--dir", lib)
	if code != 0 || !strings.Contains(out, "tiny") || !strings.Contains(out, "omniglot-5w1s") || !strings.Contains(out, "(20 tasks)") {
		t.Errorf("models (exit %d): %s%s", code, out, e)
	}
	if out, _, _ := mkbench(t, "models", "--dir", lib, "--json"); !strings.Contains(out, `"settings"`) || !strings.Contains(out, `"conv.filters=4"`) {
		t.Errorf("models --json lacks the run's settings: %s", out)
	}
	out, e, code = mkbench(t, "eval", "--model", "tiny", "--models-dir", lib)
	if code != 0 || !strings.Contains(out, "matches the model's recorded test result") {
		t.Errorf("eval --model (exit %d): %s%s", code, out, e)
	}
	if out, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--way", "20", "--eval-tasks", "3"); code != 0 || !strings.Contains(out, "(3 tasks)") {
		t.Errorf("eval --model --way 20 (exit %d): %s%s", code, out, e)
	}
	if out, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--samples", "3", "--json"); code != 0 || !strings.Contains(out, `"samples": 3`) {
		t.Errorf("eval --samples 3 (exit %d): %s%s", code, out, e)
	}
	// --bases draws another number of bases per task: the run's own D
	// gives its number, one basis another.
	evalMeanOf := func(model string, args ...string) string {
		out, e, code := mkbench(t, append([]string{"eval", "--model", model, "--models-dir", lib, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("eval %v (exit %d): %s%s", args, code, out, e)
		}
		i := strings.Index(out, `"mean"`)
		if i < 0 {
			t.Fatalf("eval %v: no mean in %s", args, out)
		}
		return strings.SplitN(out[i:], ",", 2)[0]
	}
	evalMean := func(args ...string) string { return evalMeanOf("tiny", args...) }
	if d, same, one := evalMean(), evalMean("--bases", "32"), evalMean("--bases", "1"); same != d || one == d {
		t.Errorf("eval --bases: %s with the run's 32 bases, %s with 32, %s with 1", d, same, one)
	}
	// Evaluation settings are chosen on the validation classes: --val
	// scores other episodes than the test, and --support-shift changes
	// the scores of the same episodes.
	if test, val, shifted := evalMean(), evalMean("--val"), evalMean("--val", "--support-shift", "1"); val == test || shifted == val {
		t.Errorf("eval --val --support-shift: %s on the test classes, %s on the validation classes, %s with shifted support copies", test, val, shifted)
	}
	if out, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--val", "--support-shift", "2", "--eval-tasks", "2"); code != 0 ||
		!strings.Contains(out, "shifted by up to 2 pixels (25 images each)") || !strings.Contains(out, "on the validation classes") || strings.Contains(out, "recorded test result") {
		t.Errorf("eval --val --support-shift 2 (exit %d): %s%s", code, out, e)
	}
	if _, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--support-shift", "28"); code == 0 || !strings.Contains(e, "eval_support_shift 28 would shift a 28×28 image out of its frame") {
		t.Errorf("eval --support-shift 28 (exit %d): %s", code, e)
	}
	if _, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--way", "100", "--shot", "10", "--query", "5", "--support-shift", "5"); code == 0 ||
		!strings.Contains(e, "needs about") || !strings.Contains(e, "--support-shift ") {
		t.Errorf("eval of 121,000 support images a task (exit %d): %s", code, e)
	}
	// An evaluation setting chosen after training goes with the exported
	// model: its config, its settings, its recorded test.
	if out, e, code := mkbench(t, "models", "export", run, "--name", "tiny-shift", "--dir", lib, "--support-shift", "1"); code != 0 {
		t.Fatalf("export --support-shift 1 (exit %d): %s%s", code, out, e)
	}
	if info := string(testutil.ReadFile(t, filepath.Join(lib, "tiny-shift", "model.json"))); !strings.Contains(info, `"eval_support_shift=1"`) {
		t.Errorf("model.json of a model exported with --support-shift 1: %s", info)
	}
	if out, e, code := mkbench(t, "eval", "--model", "tiny-shift", "--models-dir", lib); code != 0 || !strings.Contains(out, "(9 images each)") || !strings.Contains(out, "matches the model's recorded test result") {
		t.Errorf("eval --model tiny-shift (exit %d): %s%s", code, out, e)
	}
	if plain, off := evalMean(), evalMeanOf("tiny-shift", "--support-shift", "0"); off != plain {
		t.Errorf("tiny-shift with --support-shift 0: %s, the model exported without it: %s", off, plain)
	}
	if _, e, code := mkbench(t, "models", "export", run, "--name", "bad", "--dir", lib, "--support-shift", "-1"); code == 0 || !strings.Contains(e, "eval_support_shift must be ≥ 0") {
		t.Errorf("export --support-shift -1 (exit %d): %s", code, e)
	}
	if out, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--bases", "8", "--eval-tasks", "2"); code != 0 || !strings.Contains(out, "with 8 bases drawn per task") {
		t.Errorf("eval --bases 8 (exit %d): %s%s", code, out, e)
	}
	if _, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib, "--bases", "0"); code == 0 || !strings.Contains(e, "--bases must be positive") {
		t.Errorf("eval --bases 0 (exit %d): %s", code, e)
	}

	// The versatility experiment on the model, with no run directory: the
	// model becomes a run directory under the runs root, read like --run's.
	exp := filepath.Join(root, "vers")
	out, e, code = mkbench(t, "experiment", "versatility", "--model", "tiny", "--models-dir", lib, "--ways", "5,10", "--shots", "1",
		"--eval-tasks", "3", "--out", exp, "--quiet")
	if code != 0 || !strings.Contains(out, "10") {
		t.Fatalf("experiment versatility --model (exit %d): %s%s", code, out, e)
	}
	if csv := string(testutil.ReadFile(t, filepath.Join(exp, "results.csv"))); strings.Count(csv, "\n") < 3 {
		t.Errorf("results.csv: %s", csv)
	}
	// A newer mkbench ships the model retrained: the copy an earlier one
	// wrote under the runs root is moved aside (and said so), not refused.
	runs := filepath.Join(root, "runs")
	earlier := filepath.Join(runs, "models", "tiny")
	os.MkdirAll(earlier, 0o755)
	os.WriteFile(filepath.Join(earlier, "model.mkbm"), []byte("an earlier tiny"), 0o644)
	if _, se, code := mkbenchRuns(t, runs, "experiment", "versatility", "--model", "tiny", "--models-dir", lib, "--ways", "5", "--shots", "1",
		"--eval-tasks", "2", "--out", filepath.Join(root, "vers2"), "--quiet"); code != 0 || !strings.Contains(se, "held an earlier model tiny: moved to "+earlier+".replaced-") {
		t.Errorf("versatility over an earlier copy of the model (exit %d): %s", code, se)
	}
	if aside, _ := filepath.Glob(earlier + ".replaced-*"); len(aside) != 1 || string(testutil.ReadFile(t, filepath.Join(aside[0], "model.mkbm"))) != "an earlier tiny" {
		t.Errorf("the earlier copy was not kept aside: %v", aside)
	}
	if _, e, code := mkbench(t, "experiment", "ablation", "--model", "tiny", "--models-dir", lib, "--out", filepath.Join(root, "x")); code == 0 || !strings.Contains(e, "versatility") {
		t.Errorf("--model on ablation (exit %d): %s", code, e)
	}

	// Damage and absence.
	f := filepath.Join(lib, "tiny", "model.mkbm")
	b, _ := os.ReadFile(f)
	b[len(b)/3] ^= 0x10
	os.WriteFile(f, b, 0o644)
	if _, e, code := mkbench(t, "eval", "--model", "tiny", "--models-dir", lib); code == 0 || !strings.Contains(e, "model file is damaged") || !strings.Contains(e, "re-export") {
		t.Errorf("damaged model (exit %d): %s", code, e)
	}
	if _, e, code := mkbench(t, "eval", "--model", "nosuch", "--models-dir", lib); code == 0 || !strings.Contains(e, `no such model "nosuch"`) {
		t.Errorf("missing model (exit %d): %s", code, e)
	}
	if _, e, code := mkbench(t, "eval", "--run", run, "--model", "tiny"); code == 0 || !strings.Contains(e, "--run DIR") {
		t.Errorf("--run and --model together (exit %d): %s", code, e)
	}

	// The paper's architecture is 3.2 M parameters: over the 8 MB a model
	// may take in float32.
	big := filepath.Join(root, "big")
	if out, e, code := mkbench(t, "run", "--preset", "omniglot-5w1s", "--data", data, "--iters", "1", "--eval-tasks", "1", "--set", "val_every=0", "--out", big, "--quiet"); code != 0 {
		t.Fatalf("big run (exit %d): %s%s", code, out, e)
	}
	if _, e, code := mkbench(t, "models", "export", big, "--dir", lib); code == 0 || !strings.Contains(e, "over the 8 MB") {
		t.Errorf("oversized export (exit %d): %s", code, e)
	}
}

// A run trained on the training and validation classes together
// (train_split=trainval) does not validate: its export is its last
// parameters, listed as such, and evaluates to its recorded result.
func TestModelsExportLastParameters(t *testing.T) {
	data := testutil.Data(t, "omniglot")
	root := t.TempDir()
	run, lib := filepath.Join(root, "run"), filepath.Join(root, "models")
	args := []string{"run", "--preset", "omniglot-5w1s", "--data", data, "--iters", "3", "--eval-tasks", "10", "--set", "train_split=trainval", "--set", "val_every=0",
		"--set", "conv_filters=4", "--set", "infer_hidden=16", "--set", "prior_hidden=16", "--set", "flow_hidden=16", "--set", "bases=32", "--out", run, "--quiet"}
	if out, e, code := mkbench(t, args...); code != 0 {
		t.Fatalf("run (exit %d): %s%s", code, out, e)
	}
	if out, e, code := mkbench(t, "models", "export", run, "--name", "tv", "--dir", lib); code != 0 {
		t.Fatalf("export (exit %d): %s%s", code, out, e)
	}
	info := string(testutil.ReadFile(t, filepath.Join(lib, "tv", "model.json")))
	if !strings.Contains(info, `"last": true`) || !strings.Contains(info, `"train_split=\"trainval\""`) {
		t.Errorf("model.json of a run without validation: %s", info)
	}
	if _, err := os.Stat(filepath.Join(lib, "tv", "val.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a run without validation exported a val.jsonl: %v", err)
	}
	if out, e, code := mkbench(t, "models", "--dir", lib); code != 0 || !strings.Contains(out, "3 (last)") {
		t.Errorf("models (exit %d): %s%s", code, out, e)
	}
	if out, e, code := mkbench(t, "eval", "--model", "tv", "--models-dir", lib); code != 0 || !strings.Contains(out, "matches the model's recorded test result") {
		t.Errorf("eval --model (exit %d): %s%s", code, out, e)
	}
	if _, e, code := mkbench(t, "eval", "--model", "tv", "--models-dir", lib, "--val"); code == 0 || !strings.Contains(e, "trained on its validation classes") {
		t.Errorf("eval --val of a model trained on train ∪ val (exit %d): %s", code, e)
	}
}

// The sweep files the shipped models are trained from plan without error.
func TestShippedModelSweepsPlan(t *testing.T) {
	files, _ := filepath.Glob("presets/models/sweeps/*.yaml")
	if len(files) == 0 {
		t.Fatal("no sweep files in presets/models/sweeps")
	}
	for _, f := range files {
		if out, e, code := mkbench(t, "sweep", "plan", f); code != 0 || !strings.Contains(out, "1 units") {
			t.Errorf("%s (exit %d): %s%s", f, code, out, e)
		}
	}
}

// Every shipped model is in the README's table with the test result its
// model.json records, and `mkbench models` lists each with that number.
func TestShippedModelsInREADME(t *testing.T) {
	list, err := models.Shipped().List()
	if err != nil {
		t.Fatal(err)
	}
	readme := string(testutil.ReadFile(t, "README.md"))
	out, e, code := mkbench(t, "models")
	if code != 0 {
		t.Fatalf("models (exit %d): %s", code, e)
	}
	for _, m := range list {
		want := fmt.Sprintf("`%s` | %.2f%% ± %.2f", m.Name, 100*m.Test.Mean, 100*m.Test.CI95)
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks %q", want)
		}
		if !strings.Contains(out, m.Name) || !strings.Contains(out, m.Test.String()) {
			t.Errorf("mkbench models lacks %s %s:\n%s", m.Name, m.Test, out)
		}
	}
}

// With the defaults, `mkbench eval --model NAME` repeats each shipped
// model's recorded test result exactly (its 3,000 episodes take minutes
// per model: set MKBENCH_LONG=1).
func TestShippedModelsReproduce(t *testing.T) {
	if os.Getenv("MKBENCH_LONG") == "" {
		t.Skip("set MKBENCH_LONG=1 to evaluate every shipped model on its 3,000 test episodes")
	}
	testutil.Data(t, "omniglot") // the shipped models are Omniglot's
	list, err := models.Shipped().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		out, e, code := mkbench(t, "eval", "--model", m.Name)
		if code != 0 || !strings.Contains(out, "matches the model's recorded test result") {
			t.Errorf("eval --model %s (exit %d): %s%s", m.Name, code, out, e)
		}
		t.Logf("%s: %s", m.Name, strings.TrimSpace(out))
	}
}
