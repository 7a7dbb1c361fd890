package ui

import (
	"context"
	"fmt"
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
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
)

// newSweep writes a sweep of sine-5shot × {rbf, vrf} × seeds {1, 2}
// (units 0 rbf-s1, 1 vrf-s1, 2 rbf-s2, 3 vrf-s2) under root, running
// none of its units.
func newSweep(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "sweep-test-20260301-120000")
	f := sweep.File{Presets: []string{"sine-5shot"}, Variants: []string{"rbf", "vrf"}, Seeds: []uint64{1, 2}, Iters: 60, EvalTasks: 10}
	if err := sweep.Create(dir, sweep.Manifest{File: f, Units: f.Units()}, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// makeSweep is newSweep with units 0 and 1 trained for real by the
// sweep's own worker, unit 3 failed (its failed.json written as a worker
// writes it) and unit 2 left pending.
func makeSweep(t *testing.T, root string) string {
	t.Helper()
	dir := newSweep(t, root)
	w := &sweep.Worker{Dir: dir}
	for _, i := range []int{0, 1} {
		if err := w.Work(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	m, err := sweep.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ud := filepath.Join(dir, m.Units[3].Dir)
	if err := os.MkdirAll(ud, 0o755); err != nil {
		t.Fatal(err)
	}
	f := engine.Failure{Error: "training diverged at iteration 17 (loss NaN)", Permanent: true, Host: "node7", Time: time.Now().UTC()}
	if err := runfile.WriteJSON(filepath.Join(ud, sweep.FileFailed), f, runfile.Shared); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readNow runs the screen's read of the directory here, as the program
// would in a command, and hands it to the screen.
func readNow(s *sweepScreen) {
	s.Update(s.read()())
}

func press(s *sweepScreen, ks ...string) {
	for _, k := range ks {
		var msg tea.KeyMsg
		switch k {
		case "space":
			msg = tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "pgdown":
			msg = tea.KeyMsg{Type: tea.KeyPgDown}
		default:
			msg = keys(k)
		}
		s.Update(msg)
	}
}

// mustMatch fails unless every pattern matches the screen as a person
// reads it.
func mustMatch(t *testing.T, what, view string, patterns ...string) {
	t.Helper()
	txt := ansi.Strip(view)
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(txt) {
			t.Errorf("%s: %q is not on the screen:\n%s", what, p, txt)
		}
	}
}

// The screen as a person sees it at 80×24 and 140×40, in colour and
// without: the counts, every unit's state, the results filling in, and
// the marked units' curves with their legend. Every frame is exactly
// the terminal's size.
func TestSweepScreen(t *testing.T) {
	dir := makeSweep(t, t.TempDir())
	for _, sz := range [][2]int{{80, 24}, {140, 40}} {
		for _, mono := range []bool{false, true} {
			w, h := sz[0], sz[1]
			t.Run(fmt.Sprintf("%dx%d-mono=%v", w, h, mono), func(t *testing.T) {
				th := testTheme()
				if mono {
					th = monoTheme()
				}
				s := newSweepScreen(th, "runs")
				s.SetSize(w, h)
				s.Update(s.watch(dir)())
				v := s.View()
				checkBlock(t, "sweep", v, w, h)
				mustMatch(t, "watch", v,
					`sweep `+regexp.QuoteMeta(dir),
					`4 units · 2 finished · 0 running · 1 pending · 1 failed`,
					`0 sine-5shot-rbf-s1\s+finished\s+60/60`,
					`1 sine-5shot-vrf-s1\s+finished\s+60/60`,
					`2 sine-5shot-rbf-s2\s+pending\s+0/60`,
					`3 sine-5shot-vrf-s2\s+failed\s.*training diverged`,
					`sine-5shot-rbf-s1 · finished · mse \d+\.\d{4} ± \d+\.\d{4} \(10 tasks\)`)
				if w < sideBySideW {
					press(s, "r") // the results instead of the curves
				}
				v = s.View()
				checkBlock(t, "results", v, w, h)
				mustMatch(t, "results", v,
					`results · mean ± 95% CI over seeds`,
					`sine-5shot\s+rbf\s+mse \d+\.\d{4} ± \d+\.\d{4}\s+1/2`,
					`sine-5shot\s+vrf\s+mse \d+\.\d{4} ± \d+\.\d{4}\s+1/2\s+1 failed`)
				if w < sideBySideW {
					press(s, "r")
				}

				press(s, "space", "down", "space")
				readNow(s)
				v = s.View()
				checkBlock(t, "marked", v, w, h)
				rbf, vrf := "━━ sine-5shot-rbf-s1", "━━ sine-5shot-vrf-s1"
				if mono {
					rbf, vrf = "o sine-5shot-rbf-s1", "+ sine-5shot-vrf-s1"
					if strings.Contains(v, "\x1b[") {
						t.Error("escape codes without colour")
					}
				}
				mustMatch(t, "marked", v, `training loss · 2 marked units`,
					regexp.QuoteMeta(rbf)+` \d`, regexp.QuoteMeta(vrf)+` \d`)
				if strings.Contains(v, "waiting for data") {
					t.Errorf("the marked units' curves are not drawn:\n%s", ansi.Strip(v))
				}
				for i, c := range []int{0, 1} {
					if got := len(s.curves[c].iter); got != 6 {
						t.Errorf("unit %d: %d curve points, want 6 (60 iterations, a row every 10)", i, got)
					}
				}
			})
		}
	}
}

// A sweep whose units have written nothing yet, and a terminal at the
// smallest size, draw without a panic; every key works on them.
func TestSweepScreenNoFiles(t *testing.T) {
	dir := newSweep(t, t.TempDir())
	for _, sz := range [][2]int{{80, 24}, {140, 40}, {40, 12}, {30, 8}} {
		w, h := sz[0], sz[1]
		s := newSweepScreen(monoTheme(), "runs")
		s.SetSize(w, h)
		checkBlock(t, "choose", s.View(), w, h)
		cmd := s.watch(dir)
		checkBlock(t, "reading", s.View(), w, h)
		s.Update(cmd())
		for _, k := range []string{"space", "a", "pgdown", "down", "G", "a", "l", "m", "r", "space"} {
			press(s, k)
			readNow(s)
			checkBlock(t, "after "+k, s.View(), w, h)
		}
		press(s, "r")
		if w >= 80 {
			mustMatch(t, "no files", s.View(), `4 units · 0 finished · 0 running · 4 pending · 0 failed`, `waiting for data`)
		}
	}
}

// A curve is read in pieces as the file grows, a row cut mid-line
// waits for its end, and a file that shrank (a resume cut rows past its
// checkpoint) is read again from the start.
func TestSweepCurveRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), engine.FileMetrics)
	s := &sweepScreen{curves: map[int]*unitCurve{}}
	step := func(data string, appendTo bool) {
		t.Helper()
		flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if appendTo {
			flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(path, flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(data)
		f.Close()
		var off int64
		if c := s.curves[0]; c != nil {
			off = c.off
		}
		s.applyCurve(readCurve(curveReq{0, path, off}))
	}
	want := func(iters ...float64) {
		t.Helper()
		if got := s.curves[0].iter; fmt.Sprint(got) != fmt.Sprint(iters) {
			t.Fatalf("iterations %v, want %v", got, iters)
		}
	}
	step(`{"iter":10,"loss":3}`+"\n"+`{"iter":20,"loss":2}`+"\n"+`{"iter":30,`, false)
	want(10, 20)
	step(`"loss":1}`+"\n", true)
	want(10, 20, 30)
	step(`{"iter":10,"loss":3}`+"\n", false) // shorter: read again
	want(10)
	step(`{"iter":20,"loss":2}`+"\n"+`{"iter":30,"loss":1}`+"\n"+`{"iter":20,"loss":9}`+"\n", true)
	want(10, 20) // a row going back replaces the rows it repeats
	if s.curves[0].loss[1] != 9 {
		t.Fatalf("loss %v", s.curves[0].loss)
	}
}

// The flows a person goes through: from the picker, w finds the sweep
// under the runs root, enter watches it, space marks a unit, q goes back;
// a directory that is no sweep is refused in the prompt. Opened on the
// sweep (mkbench tui --sweep), q quits.
func TestSweepFlow(t *testing.T) {
	root := t.TempDir()
	dir := makeSweep(t, root)
	m := New(Options{Root: root, Seed: -1, Renderer: testTheme().r})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(140, 40))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`Presets`)
	scr.waitFor(`w sweep`)
	tm.Send(keys("w"))
	scr.waitFor(`watch a sweep`)
	scr.waitFor(`> ` + regexp.QuoteMeta(dir))
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`4 units · 2 finished · 0 running · 1 pending · 1 failed`)
	scr.waitFor(`sine-5shot\s+rbf\s+mse \d+\.\d{4} ± \d+\.\d{4}\s+1/2`)
	tm.Send(tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}})
	scr.waitFor(`━━ sine-5shot-rbf-s1 \d`)
	tm.Send(keys("?"))
	scr.waitFor(`mark / unmark the unit`)
	tm.Send(keys("?"))
	tm.Send(keys("q"))
	scr.waitFor(`train the preset|enter train`)

	tm.Send(keys("w"))
	scr.waitFor(`watch a sweep`)
	tm.Type("-nope")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`not a sweep directory`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEscape})
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(30*time.Second))

	direct := teatest.NewTestModel(t, New(Options{Sweep: dir, Seed: -1, Renderer: testTheme().r}), teatest.WithInitialTermSize(80, 24))
	scr = &termScreen{t: t, out: direct.Output()}
	scr.waitFor(`2 finished · 0 running · 1 pending · 1 failed`)
	scr.waitFor(`q/esc quit`)
	direct.Send(keys("q"))
	direct.WaitFinished(t, teatest.WithFinalTimeout(30*time.Second))
}
