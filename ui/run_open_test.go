package ui

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runstate"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// tinyRun trains a small sine-5shot run in dir, its settings tiny's with
// set on top, and returns its config and sources.
func tinyRun(t testing.TB, dir string, set presets.Overrides) (engine.Config, presets.Sources) {
	t.Helper()
	ov := tiny.With("iters", 30)
	for k, v := range set {
		ov = ov.With(k, v)
	}
	p, cfg, err := presets.Spec{Preset: "sine-5shot", Overrides: ov}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := presets.NewSources(p.Source, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), cfg, srcs.Train, engine.RunOptions{Preset: p.Name, Dir: dir}, nil); err != nil {
		t.Fatal(err)
	}
	return cfg, srcs
}

// tinyModel trains a small sine-5shot run in dir/run and exports it as
// model "sine-tiny" into the library dir/models.
func tinyModel(t *testing.T, dir string) (run string, lib models.Library) {
	t.Helper()
	run = filepath.Join(dir, "run")
	cfg, srcs := tinyRun(t, run, nil)
	libDir := filepath.Join(dir, "models")
	_, _, err := models.Export(run, libDir, "sine-tiny", false, []string{"iters=30"}, nil, func(ck *engine.Checkpoint) (engine.EvalResult, error) {
		m, err := ck.Model(srcs.Train)
		if err != nil {
			return engine.EvalResult{}, err
		}
		defer m.Close()
		return m.Evaluate(cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
	})
	if err != nil {
		t.Fatal(err)
	}
	return run, models.Dir(libDir)
}

// An opened run carries its files into one update: every metrics row,
// the final evaluation and the ω of each flow step from its checkpoint.
// A run without summary.json opens as stopped; a folder that is no run
// is one error.
func TestOpenRun(t *testing.T) {
	dir := t.TempDir()
	run, _ := tinyModel(t, dir)
	r, err := openRun(run, "")
	if err != nil {
		t.Fatal(err)
	}
	u := r.Update
	rows := strings.Count(string(readFile(t, filepath.Join(run, engine.FileMetrics))), "\n")
	if len(u.Points) != rows || rows == 0 {
		t.Errorf("%d points from %d metrics rows", len(u.Points), rows)
	}
	if u.Eval == nil || !u.Final || u.Err != nil || u.Last.Iter != 30 {
		t.Errorf("eval %v final %v err %v last %+v", u.Eval, u.Final, u.Err, u.Last)
	}
	if u.Display == nil || len(u.Display.OmegaSteps) != r.Preset.Config.FlowLayers+1 || len(u.Display.PredMean) == 0 {
		t.Fatalf("display %+v, note %q", u.Display, r.Note)
	}
	d := newOpenedDashboard(testTheme(), newDashKeys(), r)
	d.SetSize(160, 48)
	if v := ansi.Strip(d.View()); !regexp.MustCompile(`MetaKernel\s+`+runstate.Finished).MatchString(v) || !strings.Contains(v, "after each flow step") {
		t.Errorf("the opened dashboard:\n%s", v)
	}
	d.key(keys("s")) // a training key: not for a finished run
	if !strings.Contains(d.note.text, "finished run") {
		t.Errorf("a training key on an opened run says %q", d.note.text)
	}

	os.Remove(filepath.Join(run, engine.FileSummary))
	if r, err := openRun(run, ""); err != nil || r.Update.Err == nil || !r.Update.Result.Interrupted {
		t.Errorf("a run without summary.json: %+v, %v", r.Update, err)
	}
	if _, err := openRun(dir, ""); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Errorf("a folder that is no run: %v", err)
	}
}

// The picker lists the shipped models after the presets; enter opens
// one on its curves and ω panes (an earlier version of it under the runs
// root moved aside, which its message line says), and X there sets up
// the versatility experiment on it, with no training.
func TestPickerOpensShippedModel(t *testing.T) {
	dir := t.TempDir()
	_, lib := tinyModel(t, dir)
	root := filepath.Join(dir, "runs")
	earlier := models.RunDir(root, "sine-tiny")
	os.MkdirAll(earlier, 0o755)
	os.WriteFile(filepath.Join(earlier, models.FileModel), []byte("an earlier sine-tiny"), 0o644)
	tm := teatest.NewTestModel(t, New(Options{Root: root, Seed: -1, Renderer: testTheme().r, Models: &lib}), teatest.WithInitialTermSize(140, 40))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`Presets`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnd})
	scr.waitFor(`sine-tiny · trained model`)
	scr.waitFor(`enter opens it`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`after each flow step`)
	if _, err := os.Stat(filepath.Join(models.RunDir(root, "sine-tiny"), engine.FileBest)); err != nil {
		t.Errorf("the model was not written under the runs root: %v", err)
	}
	aside, _ := filepath.Glob(earlier + ".replaced-*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %v", aside)
	}
	if b, _ := os.ReadFile(filepath.Join(aside[0], models.FileModel)); string(b) != "an earlier sine-tiny" {
		t.Errorf("the earlier model was not kept: %q", b)
	}
	scr.waitFor(`earlier model moved to sine-tiny\.replaced-\d{8}T\d{6}Z`)
	tm.Send(keys("X"))
	scr.waitFor(`Model\s+‹ sine-tiny ›`)
	scr.waitFor(`the model sine-tiny, evaluated on \d+ cells`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	scr.waitFor(`Presets`)
	// Opened again, the folder holds the model: kept, nothing moved, and
	// the message line is the usual one.
	tm.Send(tea.KeyMsg{Type: tea.KeyEnd})
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`model sine-tiny · esc back`)
	if again, _ := filepath.Glob(earlier + ".replaced-*"); len(again) != 1 {
		t.Errorf("opened again, moved aside: %v", again)
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A model's picker line says which parameters it holds: the best
// validation's, at their iteration, or the last of a run that did not
// validate.
func TestModelSummaryNamesItsParameters(t *testing.T) {
	m := models.Info{Preset: "omniglot-5w1s", Variant: "metakernel", Iters: 4800, BestIter: 4500, TrainSeconds: 4530}
	if s := modelSummary(m); !strings.Contains(s, "best of 4800 iterations at 4500") {
		t.Errorf("best-validation model: %s", s)
	}
	m.BestIter, m.Last = 4800, true
	if s := modelSummary(m); !strings.Contains(s, "last of 4800 iterations (not validated)") || strings.Contains(s, "best") {
		t.Errorf("last-parameters model: %s", s)
	}
}
