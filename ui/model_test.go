package ui

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/presets"
)

// startDashboard runs the workbench straight into a preset (no picker).
func startDashboard(t *testing.T, opts Options, w, h int) (*teatest.TestModel, *termScreen) {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	if opts.Iters == 0 {
		opts.Iters = 1_000_000
	}
	opts.Preset, opts.Seed, opts.Overrides, opts.Renderer = "sine-5shot", -1, tiny, testTheme().r
	tm := teatest.NewTestModel(t, New(opts), teatest.WithInitialTermSize(w, h))
	return tm, &termScreen{t: t, out: tm.Output()}
}

// The training keys reach the engine and their results reach the screen:
// checkpoint, evaluate, a new display task, stop, and resume by toggle.
func TestTrainingKeys(t *testing.T) {
	root := t.TempDir()
	tm, scr := startDashboard(t, Options{Root: root}, 160, 48)
	scr.waitFor(`MetaKernel\s+running\s+\d+/`)
	tm.Send(keys("c"))
	m := scr.waitFor(`checkpoint saved: metakernel at iteration (\d+)`)
	dirs, _ := filepath.Glob(filepath.Join(root, "sine-5shot-metakernel-*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	if ck, err := engine.LoadCheckpoint(filepath.Join(dirs[0], engine.FileCheckpoint)); err != nil || strconv.Itoa(ck.Iter) != m[1] {
		t.Fatalf("checkpoint %v, %v; the screen said iteration %s", ck, err, m[1])
	}
	tm.Send(keys("e"))
	scr.waitFor(`metakernel at iteration \d+: mse \d\S* ± \S+ \(8 tasks\)`)
	scr.waitFor(`\(8\)`) // the table's eval column
	tm.Send(keys("n"))
	scr.waitFor(`task #1 · MSE`)
	tm.Send(keys("s"))
	scr.waitFor(`metakernel stopped at iteration \d+; checkpoint in`)
	scr.waitFor(`MetaKernel\s+stopped`)
	tm.Send(keys("6"))
	scr.waitFor(`resumed metakernel → `)
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))
	runs := tm.FinalModel(t).(Model).Session().Runs()
	if len(runs) != 2 || runs[0].Dir != runs[1].Dir || !runs[1].Resumed {
		t.Fatalf("want the stopped run resumed in its own directory, got %+v", runs)
	}
}

type panicky struct{ task.Source }

func (panicky) Sample(*rand.Rand, *task.Batch) { panic("task source exploded") }

// A panic in a training worker is an error on screen; the UI goes on.
func TestWorkerPanicShownInUI(t *testing.T) {
	opts := Options{NewSources: func(family string, cfg engine.Config) (presets.Sources, error) {
		srcs, err := presets.NewSources(family, cfg, "")
		srcs.Train = panicky{srcs.Train}
		return srcs, err
	}}
	tm, scr := startDashboard(t, opts, 160, 48)
	scr.waitFor(`metakernel failed: engine: internal error: task source exploded`)
	scr.waitFor(`MetaKernel\s+failed`)
	tm.Send(keys("q")) // nothing left to stop: quits at once
	tm.WaitFinished(t, teatest.WithFinalTimeout(30*time.Second))
}

// Every terminal size gives a frame of exactly that size, through any
// sequence of resizes; the layout switches between grid and tabs.
func TestResize(t *testing.T) {
	for _, th := range []Theme{testTheme(), monoTheme()} {
		d := fakeDashboard(th, 80, 24)
		for _, sz := range [][2]int{{80, 24}, {200, 60}, {160, 48}, {100, 30}, {120, 33}, {140, 39}, {139, 50}, {60, 20}, {39, 11}, {250, 80}, {80, 24}} {
			d.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			checkBlock(t, "frame", d.View(), sz[0], sz[1])
			grid, _ := d.layout()
			if want := sz[0] >= 140 && sz[1]-3 >= 36; grid != want {
				t.Errorf("%v: grid %v", sz, grid)
			}
		}
	}
}

// Without colour (NO_COLOR) nothing is coloured, and overlaid curves are
// told apart by markers.
func TestNoColor(t *testing.T) {
	d := fakeDashboard(monoTheme(), 160, 48)
	f := d.View()
	for _, esc := range []string{"\x1b[38;", "\x1b[48;", "\x1b[3", "\x1b[9"} {
		if strings.Contains(f, esc) {
			t.Fatalf("colour escape %q with NO_COLOR", esc)
		}
	}
	plain := ansi.Strip(f)
	for _, mark := range []string{"+ rff", "* metakernel"} {
		if !strings.Contains(plain, mark) {
			t.Errorf("legend lacks %q", mark)
		}
	}
	if !strings.ContainsRune(plain, '+') || !strings.ContainsRune(plain, '*') {
		t.Error("curves lack their markers")
	}
}

// The view keys change what the panes draw.
func TestViewKeys(t *testing.T) {
	d := fakeDashboard(testTheme(), 160, 48)
	press := func(k string) string {
		var msg tea.KeyMsg
		switch k {
		case "tab":
			msg = tea.KeyMsg{Type: tea.KeyTab}
		default:
			msg = keys(k)
		}
		d.Update(msg)
		return ansi.Strip(d.View())
	}
	cases := []struct{ key, want string }{
		{"m", "EMA on"},
		{"l", "−ELBO (log)"},
		{"d", "ω[1] after each flow step"},
		{"D", "ω[0] after each flow step"},
		{"x", "ω[1] × ω[1] at step f4"},
		{"y", "ω[1] × ω[2] at step f4"},
		{"v", "Sine fit · rff (v)"},
		{"v", "Sine fit · metakernel (v)"},
		{"tab", "[Fit]"},
		{"z", "Sine fit · metakernel"},
	}
	for _, c := range cases {
		if got := press(c.key); !strings.Contains(got, c.want) {
			t.Fatalf("after %q: want %q on screen:\n%s", c.key, c.want, got)
		}
	}
	if grid, _ := d.layout(); grid {
		t.Fatal("zoom kept the grid")
	}
}

// The ablation toggles are every engine variant, one key each.
func TestToggleVariants(t *testing.T) {
	if !slices.Equal(toggleVariants[:], engine.Variants) {
		t.Fatalf("toggles %v, engine variants %v", toggleVariants, engine.Variants)
	}
}

// Quitting from the picker ends the program at once.
func TestQuitFromPicker(t *testing.T) {
	tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r}), teatest.WithInitialTermSize(80, 24))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`Presets`)
	tm.Send(keys("?"))
	scr.waitFor(`enter\s+train the preset`)
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}
