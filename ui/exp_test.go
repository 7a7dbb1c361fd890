package ui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/internal/runstate"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

func mustPreset(t *testing.T, name string) presets.Preset {
	t.Helper()
	p, err := presets.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeExperiment is an experiments screen in mid-experiment without a
// Runner: kind on preset with the given rows, run job of jobs training.
func fakeExperiment(th Theme, w, h int, kind string, p presets.Preset, rows []expRow, job, jobs int, name string) *expScreen {
	s := &expScreen{theme: th, keys: newExpKeys(), dashKeys: newDashKeys(), reg: &expRegistry{}, stage: expResults, w: w, h: h}
	metric := "mse"
	if p.Config.Classify() {
		metric = "accuracy"
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.run = &expState{
		worker: &expWorker{Dir: "runs/exp-" + kind + "-" + p.Name + "-20260301-120000"},
		opts:   experiments.Options{Experiment: kind, Preset: p.Name, Seeds: []uint64{1, 2}},
		preset: p, metric: metric, rows: rows, job: job, jobs: jobs, name: name, phase: "training",
		snap:  &engine.Snapshot{Iter: 1200, Iters: 5000, ItersPerSec: 38.2},
		jobAt: at, jobSecs: []float64{130, 140}, state: runstate.Running, note: note{text: "runs/rff-s1: mse 0.1234 ± 0.0100"},
	}
	return s
}

func seed(s uint64, mean, ci float64) experiments.SeedResult {
	return experiments.SeedResult{Seed: s, Mean: mean, CI95: ci, Tasks: 1000, TrainSeconds: 120 + float64(s)}
}

func ablationRows() []expRow {
	return []expRow{
		{rowKey: rowKey{Variant: "rbf"}, Seeds: []experiments.SeedResult{seed(1, 0.512, 0.03), seed(2, 0.498, 0.03)}, Status: runstate.Finished},
		{rowKey: rowKey{Variant: "rff"}, Seeds: []experiments.SeedResult{seed(1, 0.1234, 0.01)}, Status: runstate.Pending},
		{rowKey: rowKey{Variant: "vrf"}, Status: runstate.Failed, Err: "runs/vrf-s1: training diverged at iteration 17"},
		{rowKey: rowKey{Variant: "vrf+ctx"}, Status: runstate.Pending},
		{rowKey: rowKey{Variant: "metakernel"}, Status: runstate.Running},
	}
}

func versatilityRows() []expRow {
	var rows []expRow
	for _, k := range []int{1, 5, 10} {
		for i, w := range []int{5, 10, 20, 50, 100} {
			r := expRow{rowKey: rowKey{Variant: "metakernel", Way: w, Shot: k}, Status: runstate.Pending}
			if k < 10 || i < 2 {
				acc := 0.95 - 0.04*float64(i) + 0.004*float64(k)
				r.Seeds, r.Status = []experiments.SeedResult{seed(1, acc, 0.004)}, runstate.Finished
			}
			if k == 10 && i == 2 {
				r.Status = "evaluating"
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// The experiments screen's views are pure functions of data and size:
// the setup form, the results table and the versatility heatmap.
func TestExperimentGoldens(t *testing.T) {
	th := testTheme()
	sine := mustPreset(t, "sine-5shot")
	omni := mustPreset(t, "omniglot-20w5s")
	now := time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC)
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		t.Run(fmt.Sprintf("setup-%dx%d", w, h), func(t *testing.T) {
			f := newExpForm(th, newExpKeys(), []presets.Preset{sine, omni}, "runs", models.Library{}, nil)
			v := f.view(w, h)
			checkBlock(t, "setup", v, w, h)
			golden(t, fmt.Sprintf("exp-setup-%dx%d", w, h), v)
		})
		t.Run(fmt.Sprintf("results-%dx%d", w, h), func(t *testing.T) {
			s := fakeExperiment(th, w, h, experiments.Ablation, sine, ablationRows(), 9, 10, "runs/metakernel-s2")
			v := s.resultsView(now)
			checkBlock(t, "results", v, w, h)
			golden(t, fmt.Sprintf("exp-results-%dx%d", w, h), v)
		})
		t.Run(fmt.Sprintf("heatmap-%dx%d", w, h), func(t *testing.T) {
			s := fakeExperiment(th, w, h, experiments.Versatility, omni, versatilityRows(), 1, 1, "runs/metakernel-s1")
			s.run.phase, s.run.snap = "evaluating 20-way 10-shot", nil
			s.run.opts.Seeds = []uint64{1}
			v := s.resultsView(now)
			checkBlock(t, "heatmap", v, w, h)
			golden(t, fmt.Sprintf("exp-heatmap-%dx%d", w, h), v)
		})
	}
	t.Run("help-80x24", func(t *testing.T) {
		v := helpView(th, newExpKeys().groups(), newHelpOverlay(th).close, 80, 24, 0)
		checkBlock(t, "help", v, 80, 24)
		golden(t, "exp-help-80x24", v)
	})
	t.Run("heatmap-mono", func(t *testing.T) {
		v := expHeatmap(monoTheme(), "accuracy", versatilityRows(), 60, 10)
		checkBlock(t, "heatmap-mono", v, 60, 10)
		golden(t, "exp-heatmap-mono", v)
		if !strings.ContainsAny(v, "░▒▓█") {
			t.Error("no shade glyphs without colour")
		}
	})
}

// The form checks its fields with the Runner's own plan as they change.
func TestExperimentForm(t *testing.T) {
	f := newExpForm(testTheme(), newExpKeys(), presets.All(), "runs", models.Library{}, nil)
	if f.kindName() != experiments.Ablation || f.presetOf().Name != "sine-5shot" || f.runs != 5 {
		t.Fatalf("defaults: %s %s %d runs", f.kindName(), f.presetOf().Name, f.runs)
	}
	send := func(msgs ...tea.KeyMsg) {
		for _, m := range msgs {
			f.update(m)
		}
	}
	down, right := tea.KeyMsg{Type: tea.KeyDown}, tea.KeyMsg{Type: tea.KeyRight}
	send(right) // efficiency: 8 D × 2 variants
	if f.kindName() != experiments.Efficiency || f.runs != 16 || f.visible(ffShots) {
		t.Fatalf("efficiency: %d runs, shots visible %v", f.runs, f.visible(ffShots))
	}
	send(right, down, down, down) // shots; focus on seeds
	send(keys("1,x"))
	if !strings.Contains(f.err, "--seeds") {
		t.Fatalf("want a seeds error, got %q", f.err)
	}
	send(tea.KeyMsg{Type: tea.KeyBackspace}, keys("2"))
	if f.err != "" || f.runs != 2*3*4 { // 2 seeds × 3 shots × (vrf, vrf+ctx, metakernel, maml)
		t.Fatalf("shots with seeds 1,2: %d runs, %q", f.runs, f.err)
	}
	if !f.visible(ffShots) || f.visible(ffWays) {
		t.Fatal("shots: the shots field and no ways field")
	}
}

// The flow a user goes through: open the experiments screen from the
// picker, set up a tiny ablation, start it, see a row fill in, look at
// the current run's dashboard, come back, quit. The directory is the one
// `mkbench experiment` writes.
func TestExperimentFlow(t *testing.T) {
	root := t.TempDir()
	m := New(Options{Root: root, Seed: -1, Overrides: tiny, Renderer: testTheme().r})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(160, 48))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`Presets`)
	tm.Send(keys("x"))
	scr.waitFor(`experiments · set up`)
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	tm.Type("rbf,metakernel")
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	tm.Type("40")
	scr.waitFor(`2 runs × 40 iterations`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`experiment ablation · sine-5shot · 1 seed → `)
	scr.waitFor(`rbf\s+1/1\s+\d+\.\d+ ± \d+\.\d+\s+\d+\.\d\s+finished`)

	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // the current run's dashboard
	scr.waitFor(`\[Curves\]\s+Fit`)
	scr.waitFor(`exp-ablation-sine-5shot-\S+/runs/(rbf|metakernel)-s1`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEscape})
	scr.waitFor(`enter (current|last) run's dashboard`)

	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(90*time.Second))
	ws := tm.FinalModel(t).(Model).Experiments()
	if len(ws) != 1 {
		t.Fatalf("want 1 experiment, got %d", len(ws))
	}
	if !ws[0].Wait(60 * time.Second) {
		t.Fatal("the experiment did not stop")
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "exp-ablation-sine-5shot-*"))
	if len(dirs) != 1 || dirs[0] != ws[0].Dir {
		t.Fatalf("experiment directories %v, worker's %s", dirs, ws[0].Dir)
	}
	if _, err := experiments.LoadManifest(dirs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "runs", "rbf-s1", engine.FileSummary)); err != nil {
		t.Fatal(err)
	}
	_, ended, err := ws[0].Outcome()
	if !ended || err != nil && !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("outcome: ended %v, %v", ended, err)
	}
	if strings.Contains(ansi.Strip(scr.text.String()), "panic") {
		t.Error("the screen shows a panic")
	}
}
