package ui

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/presets"
)

// folderTiny shrinks a folder preset's runs so they take seconds, also
// under the race detector; the budget is large so runs are still going
// at quit.
var folderTiny = presets.Overrides{
	"image_size": 32, "conv_filters": 4,
	"infer_hidden": 8, "prior_hidden": 8, "flow_hidden": 8, "bases": 16,
	"meta_batch": 2, "query": 2, "val_every": 0,
	"snapshot_every": 20, "log_every": 10, "checkpoint_sec": 0,
	"eval_tasks": 2, "eval_query": 2, "eval_samples": 1,
}

// writeFolder writes a folder family of 25 classes of 4 12×12 PNGs under
// a new folder (5-way: 15 train, 5 val and 5 test classes), grey or in
// colour, and returns it.
func writeFolder(t *testing.T, grey bool) string {
	t.Helper()
	dir := t.TempDir()
	for c := 0; c < 25; c++ {
		cd := filepath.Join(dir, fmt.Sprintf("class%02d", c))
		if err := os.MkdirAll(cd, 0o755); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 4; k++ {
			var img image.Image
			if grey {
				g := image.NewGray(image.Rect(0, 0, 12, 12))
				for i := range g.Pix {
					g.Pix[i] = uint8(10*c + 7*k + i%12)
				}
				img = g
			} else {
				rgb := image.NewRGBA(image.Rect(0, 0, 12, 12))
				for y := 0; y < 12; y++ {
					for x := 0; x < 12; x++ {
						rgb.Set(x, y, color.RGBA{uint8(10 * c), uint8(20*x + k), uint8(20 * y), 255})
					}
				}
				img = rgb
			}
			f, err := os.Create(filepath.Join(cd, fmt.Sprintf("%d.png", k)))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	return dir
}

// The flow a person goes through: filter the picker to folder-5w1s,
// enter asks for the folder; a wrong folder is refused in the prompt, one
// line each; the right one opens the dashboard and trains on it, with
// the channels of its images.
func TestFolderPromptFlow(t *testing.T) {
	t.Setenv("MKBENCH_CACHE", t.TempDir())
	imgs := writeFolder(t, false)
	empty := t.TempDir()
	root := t.TempDir()
	m := New(Options{Root: root, Iters: 1_000_000, Seed: -1, Overrides: folderTiny, Renderer: testTheme().r})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(100, 30))
	scr := &termScreen{t: t, out: tm.Output()}
	enter := func() { tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) }
	clear := func() { tm.Send(tea.KeyMsg{Type: tea.KeyCtrlU}) } // the text before the cursor

	scr.waitFor(`Presets`)
	tm.Type("/")
	tm.Type("folder-5w1s")
	enter() // accept the filter
	scr.waitFor(`enter asks for the folder of your images`)
	enter()
	scr.waitFor(`folder-5w1s · your own images`)
	scr.waitFor(`DIR/<class>/\*\.png\|jpg`)
	scr.waitFor(`enter checks it and trains folder-5w1s \(metakernel\) on it`)

	tm.Type(filepath.Join(imgs, "nope"))
	enter()
	scr.waitFor(regexp.QuoteMeta(filepath.Join(imgs, "nope")) + `: no such folder`)
	clear()
	tm.Type(empty)
	enter()
	scr.waitFor(regexp.QuoteMeta(empty) + ` has no class folders`)

	clear()
	tm.Type(imgs)
	enter()
	scr.waitFor(`folder-5w1s │ metakernel │ [1-9]\d*/1000000`) // the status bar

	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(90*time.Second))
	runs := tm.FinalModel(t).(Model).Session().Runs()
	if len(runs) != 1 {
		t.Fatalf("want 1 run, got %d", len(runs))
	}
	r := runs[0]
	if r.Config.Conv == nil || r.Config.Conv.Channels != 3 || r.Config.Conv.Height != 32 {
		t.Errorf("run config conv %+v, want 3 channels of 32×32", r.Config.Conv)
	}
	if o, ended := r.Outcome(); !ended || !o.Result.Interrupted || o.Result.Iters == 0 {
		t.Errorf("run ended %v, %+v", ended, o)
	}
}

// step is m.Update(msg) with the model's type.
func step(t *testing.T, m Model, msg tea.Msg) (Model, tea.Cmd) {
	t.Helper()
	nm, cmd := m.Update(msg)
	return nm.(Model), cmd
}

// typeText types s into whatever takes the keys.
func typeText(t *testing.T, m Model, s string) Model {
	t.Helper()
	for _, r := range s {
		m, _ = step(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	return m
}

// A grey folder trains on one channel, chosen at the prompt or given
// with --data (no prompt then); --preset of a folder preset opens the
// prompt; the prompt fits every terminal; esc goes back, ctrl+c quits.
func TestFolderPromptGrey(t *testing.T) {
	t.Setenv("MKBENCH_CACHE", t.TempDir())
	grey := writeFolder(t, true)
	p, err := presets.Get("folder-5w1s")
	if err != nil {
		t.Fatal(err)
	}
	newModel := func(opts Options) Model {
		opts.Root, opts.Iters, opts.Seed, opts.Overrides, opts.Renderer = t.TempDir(), 1_000_000, -1, folderTiny, testTheme().r
		m := New(opts)
		t.Cleanup(func() { m.Session().Close(); m.Session().Wait(60 * time.Second) })
		m, _ = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
		return m
	}
	channels := func(m Model) int {
		t.Helper()
		runs := m.Session().Runs()
		if len(runs) != 1 || runs[0].Config.Conv == nil {
			t.Fatalf("runs %+v", runs)
		}
		return runs[0].Config.Conv.Channels
	}

	// --preset folder-5w1s: the prompt, at every size exactly the frame.
	m := newModel(Options{Preset: "folder-5w1s"})
	m, _ = step(t, m, m.Init()())
	if m.screen != screenFolder {
		t.Fatalf("screen %d, want the folder prompt", m.screen)
	}
	m = typeText(t, m, grey+"/x")
	m, cmd := step(t, m, tea.KeyMsg{Type: tea.KeyEnter})
	m, _ = step(t, m, cmd())
	for _, sz := range [][2]int{{80, 24}, {100, 30}, {40, 12}, {30, 8}} {
		m, _ = step(t, m, tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		checkBlock(t, fmt.Sprintf("prompt %v", sz), m.View(), sz[0], sz[1])
	}
	m, _ = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	mustMatch(t, "prompt 80×24", m.View(), `folder-5w1s · your own images\s+esc back`, `> `+regexp.QuoteMeta(grey)+`/x`,
		regexp.QuoteMeta(grey)+`/x: no such folder`, `DIR/<class>/\*\.png\|jpg`, `DIR/train/<class>/…, val/…, test/…`,
		`5-way 1-shot: train and test need 5 classes or more, each of 3 images`, `resized to 32×32`,
		`enter train • esc back • ctrl\+c quit`)

	// The right folder: the dashboard, one channel.
	for range 2 { // "/x" off
		m, _ = step(t, m, tea.KeyMsg{Type: tea.KeyBackspace})
	}
	mustMatch(t, "edited", m.View(), `enter checks it and trains folder-5w1s`) // the error was about "/x"
	m, cmd = step(t, m, tea.KeyMsg{Type: tea.KeyEnter})
	m, cmd = step(t, m, cmd()) // checked: picks the preset with the folder
	m, _ = step(t, m, cmd())
	if m.screen != screenDashboard {
		t.Fatalf("screen %d after a good folder, want the dashboard; the prompt says %q", m.screen, m.folder.err)
	}
	if got := channels(m); got != 1 {
		t.Errorf("grey folder: %d channels, want 1", got)
	}
	if m.sess.Data != grey {
		t.Errorf("session data %q, want %q", m.sess.Data, grey)
	}

	// --data: no prompt, the channels read all the same.
	m = newModel(Options{Data: grey})
	m, cmd = step(t, m, pickedMsg{p: p})
	if m.screen != screenPicker || cmd == nil {
		t.Fatalf("--data: screen %d, want the picker until the folder is read", m.screen)
	}
	m, _ = step(t, m, cmd())
	if m.screen != screenDashboard {
		t.Fatalf("--data: screen %d, want the dashboard", m.screen)
	}
	if got := channels(m); got != 1 {
		t.Errorf("--data grey folder: %d channels, want 1", got)
	}

	// esc goes back to the picker and drops the check in flight; ctrl+c
	// quits.
	m = newModel(Options{})
	m, _ = step(t, m, pickedMsg{p: p})
	m = typeText(t, m, grey)
	m, cmd = step(t, m, tea.KeyMsg{Type: tea.KeyEnter})
	m, _ = step(t, m, tea.KeyMsg{Type: tea.KeyEscape})
	if m.screen != screenPicker {
		t.Fatalf("esc: screen %d, want the picker", m.screen)
	}
	if m, late := step(t, m, cmd()); late != nil || m.screen != screenPicker || len(m.Session().Runs()) != 0 {
		t.Fatal("a check answered after esc started the preset")
	}
	m, _ = step(t, m, pickedMsg{p: p})
	mustMatch(t, "reopened", m.View(), `> `+regexp.QuoteMeta(grey))
	if _, cmd = step(t, m, tea.KeyMsg{Type: tea.KeyCtrlC}); cmd == nil {
		t.Fatal("ctrl+c in the prompt does nothing")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("ctrl+c in the prompt does not quit")
	}
}

// A leading ~ is the home folder; nothing else is touched.
func TestExpandHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for in, want := range map[string]string{"~": home, "~/pics": filepath.Join(home, "pics"), "~x/pics": "~x/pics", "pics/~": "pics/~", "/abs": "/abs"} {
		if got := expandHome(in); got != want {
			t.Errorf("expandHome(%q) = %q, want %q", in, got, want)
		}
	}
}
