package ui

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// The workbench as a person sees it on the two terminals it is used on
// most: a large one (140×40, the smallest with the 2×2 grid) and 80×24.
var personSizes = [][2]int{{140, 40}, {80, 24}}

// training is on the screen once metakernel trains, in the status bar
// every pane shows.
const training = `metakernel │ [1-9]\d*/1000000`

// eachSize runs f as a subtest at each of personSizes.
func eachSize(t *testing.T, f func(t *testing.T, w, h int)) {
	for _, sz := range personSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) { f(t, sz[0], sz[1]) })
	}
}

// focus moves the dashboard's focus to pane p where panes show one at a
// time (below 140×39); the grid shows them all.
func focus(tm *teatest.TestModel, w int, p pane) {
	if w >= 140 {
		return
	}
	for range p {
		tm.Send(tea.KeyMsg{Type: tea.KeyTab})
	}
}

// quitAndWait quits and waits for the runs' checkpoints.
func quitAndWait(t *testing.T, tm *teatest.TestModel) {
	t.Helper()
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))
}

// The ablation table's every column fits its pane, the evaluation's
// interval and task count included: at 140×40 its last column was cut
// ("0.9153±0…").
func TestAblationTableFits(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		tm, scr := startDashboard(t, Options{}, w, h)
		scr.waitFor(training)
		tm.Send(keys("2"))
		focus(tm, w, paneRuns)
		scr.waitFor(`RFF\s+running\s+\d+/1000000`)
		tm.Send(keys("e"))
		// The row runs to the pane's border with nothing cut.
		scr.waitFor(`MetaKernel\s+running\s+\d+/1000000 [^┃│…]*\d±[0-9.e+-]+ \(8\)\s*[┃│]`)
		quitAndWait(t, tm)
	})
	// Narrower still, columns give way whole (speed first), never cut.
	rows := fakeRows()
	rows[5].EvalFinal = true
	for _, w := range []int{78, 68, 60, 50} {
		s := runsPane(testTheme(), rows, w, 20)
		checkBlock(t, "ablation", s, w, 20)
		for _, l := range strings.Split(s, "\n")[:7] {
			if strings.Contains(l, "…") {
				t.Errorf("at %d columns a row is cut: %q", w, l)
			}
		}
	}
}

// The sine fit says what its band is for the variant shown: RBF draws no
// ω, so it has none; the variational variants' is over draws of q(ω|S).
func TestFitBandPerVariant(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		tm, scr := startDashboard(t, Options{}, w, h)
		scr.waitFor(training)
		focus(tm, w, paneFit)
		scr.waitFor(`band: 8 draws of ω ~ q\(ω\|S\)`)
		tm.Send(keys("1"))
		scr.waitFor(`RBF\s+running|started rbf`)
		tm.Send(keys("v")) // the next variant with a run: rbf
		scr.waitFor(`Sine fit · rbf \(v\)`)
		scr.waitFor(`task #0 · MSE \S+ · iteration \d+ · no band: RBF draws no ω`)
		quitAndWait(t, tm)
	})
}

// The axis of a metric that cannot be negative (the MSE, KL) starts at
// 0, not at the padding below its smallest value.
func TestNonnegativeAxesStartAtZero(t *testing.T) {
	// A curve whose MSE and KL come down to nearly 0 (and whose ELBO is
	// positive, so that any negative label on the screen is wrong).
	c := curve{Variant: "metakernel"}
	for i := 1; i <= 400; i++ {
		it := float64(10 * i)
		data := 3*math.Exp(-it/300) + 1e-4
		kl := 20*math.Exp(-it/500) + 1e-3
		c.Iter, c.Data, c.KL = append(c.Iter, it), append(c.Data, data), append(c.KL, kl)
		c.Loss, c.ELBO = append(c.Loss, -1-data), append(c.ELBO, 1+data)
	}
	negLabel := regexp.MustCompile(`\s-[0-9][0-9.e+-]*[│└]`)
	eachSize(t, func(t *testing.T, w, h int) {
		m := New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r})
		d := newDashboard(m.theme, newDashKeys(), nil, mustPreset(t, "sine-5shot"))
		v := d.views[5]
		v.run = &session.Run{Variant: "metakernel", Dir: "runs/x", Config: d.preset.Config}
		v.state, v.curve, v.ended = "running", c, true // drawn as running; nothing to stop
		v.last = &engine.Snapshot{Iter: 4000, Iters: 20000, ItersPerSec: 50}
		m.dash, m.screen = d, screenDashboard
		tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
		scr := &termScreen{t: t, out: tm.Output()}
		scr.waitFor(`MSE \(data term\)`)
		scr.waitFor(`\s0└`)
		if neg := negLabel.FindString(scr.text.String()); neg != "" {
			t.Errorf("an axis goes below zero: %q", neg)
		}
		quitAndWait(t, tm)
	})
}

// esc leads from the dashboard back to the picker; the runs train on,
// the picker says so, and enter on their preset goes back to them.
// Another preset waits until they have ended, then trains on a dashboard
// of its own.
func TestDashboardBackToPicker(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		tm, scr := startDashboard(t, Options{}, w, h)
		scr.waitFor(training)
		scr.waitFor(`esc picker`)
		tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		scr.waitFor(`Presets`)
		scr.waitFor(`the dashboard trains sine-5shot \(1 run\) on`)
		tm.Send(keys("k")) // the preset above sine-5shot, under the cursor
		tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		// (wrapped at 80 columns, possibly at the name's hyphen)
		m := scr.waitFor(`the dashboard trains sine-5shot: stop its runs there \(s\)\s+before\s+training\s+(sine-)\s*(\S+)`)
		other := m[1] + m[2]
		tm.Send(keys("j"))
		tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		// p pauses once the dashboard is back (the pick is a message of
		// its own, after the key).
		scr.sendUntil(tm, keys("p"), `paused metakernel at iteration \d+`)
		tm.Send(keys("s"))
		scr.waitFor(`metakernel stopped at iteration \d+`)
		tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		scr.waitFor(`the dashboard's runs of sine-5shot have ended`)
		tm.Send(keys("k"))
		tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		scr.waitFor(regexp.QuoteMeta(other) + ` │ metakernel │ [1-9]\d*/1000000`)
		quitAndWait(t, tm)
		runs := tm.FinalModel(t).(Model).Session().Runs()
		if len(runs) != 2 || !strings.Contains(runs[0].Dir, "sine-5shot") || !strings.Contains(runs[1].Dir, other) {
			t.Fatalf("want the sine-5shot run that trained on, then %s's; got %d runs", other, len(runs))
		}
		for _, r := range runs {
			if o, _ := r.Outcome(); !o.Result.Interrupted || o.Result.Iters == 0 {
				t.Errorf("%s did not stop with a checkpoint: %+v", r.Dir, o)
			}
		}
	})
}

// X opens the experiments screen on the picker as on the dashboard; the
// footers and help say X.
func TestExperimentsKeyIsX(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r}), teatest.WithInitialTermSize(w, h))
		scr := &termScreen{t: t, out: tm.Output()}
		scr.waitFor(`X experiments`)
		tm.Send(keys("?"))
		scr.waitFor(`X\s+experiments \(ablation`)
		tm.Send(keys("?"))
		tm.Send(keys("X"))
		scr.waitFor(`Experiment\s+‹ ablation ›`)
		tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		quitAndWait(t, tm)

		tm, scr = startDashboard(t, Options{}, w, h)
		scr.waitFor(training)
		tm.Send(keys("X"))
		scr.waitFor(`experiments · set up`)
		tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		quitAndWait(t, tm)
	})
	if b := newDashKeys().PairX; !strings.Contains(strings.Join(b.Keys(), " "), "x") {
		t.Errorf("x is no longer the heatmap's: %v", b.Keys())
	}
}

// Letters typed faster than the program reads them come as one event
// ("ml"); each is a key. A bracketed paste is not keys.
func TestKeyBursts(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		tm, scr := startDashboard(t, Options{}, w, h)
		scr.waitFor(training)
		scr.waitFor(`EMA off · log y off`)
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("ml"), Paste: true}) // nothing
		tm.Send(keys("m"))
		scr.waitFor(`EMA on · log y off`)
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("ml")})
		scr.waitFor(`EMA off · log y on`)
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("zq")}) // zoom, then quit
		tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))

		// A burst into the picker's filter is its text.
		tm = teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r}), teatest.WithInitialTermSize(w, h))
		scr = &termScreen{t: t, out: tm.Output()}
		scr.waitFor(`Presets`)
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/sine-10")})
		scr.waitFor(`Filter: sine-10`)
		tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
		tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("zq")})
		tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	})
}

// Runs whose names share a long start show their ends, which tell them
// apart, in the runs table however narrow.
func TestRunNamesKeepTheirEnds(t *testing.T) {
	root := t.TempDir()
	for s := 1; s <= 4; s++ {
		tinyRun(t, filepath.Join(root, fmt.Sprintf("sine-5shot-metakernel-s%d-20260301-12000%d", s, s)), presets.Overrides{"seed": s})
	}
	eachSize(t, func(t *testing.T, w, h int) {
		tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r, Runs: root}), teatest.WithInitialTermSize(w, h))
		scr := &termScreen{t: t, out: tm.Output()}
		scr.waitFor(`4 runs · 4 finished`)
		for s := 1; s <= 4; s++ {
			scr.waitFor(fmt.Sprintf(`s%d-20260…?\S*%d\s+sine-5shot`, s, s))
		}
		quitAndWait(t, tm)
	})
	if got := fitNames([]string{"sine-5shot-metakernel-s1-20260301-120000", "sine-5shot-metakernel-s2-20260301-120010"}, 18); got[0] == got[1] || !strings.Contains(got[1], "s2") || !strings.HasSuffix(got[1], "120010") {
		t.Errorf("fitted names %q", got)
	}
	mixed := []string{"models/omniglot-5w5s", "sine-5shot-metakernel-s1-20261129-035047", "sine-5shot-rbf-s1-20261129-035055", "sine-5shot-rff-s1-20261129-035055"}
	got := fitNames(mixed, 18)
	for i, want := range []string{"omniglot", "metakern", "rbf-s1", "rff-s1"} {
		if !strings.Contains(got[i], want) || len([]rune(got[i])) > 18 {
			t.Errorf("%s fitted to 18 columns as %q, which lacks %q", mixed[i], got[i], want)
		}
	}
	if got := cutMiddle("runs/sine-5shot-metakernel-s1-20260301-120000", 20); got != "runs/sine-…01-120000" {
		t.Errorf("cutMiddle: %q", got)
	}
}

// A run opened without its data set says at once that its ω panes need
// it and how to get it, and shows the rest; nothing waits for a display
// that cannot come.
func TestOpenedRunWithoutData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tinyRun(t, dir, nil)
	r, err := openRun(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	missing := fmt.Errorf("omniglot: %w (looked in /nowhere)", datasets.ErrNoOmniglot)
	r.Update.Display, r.Model = nil, "omniglot-5w1s"
	r.Note, r.NoDisplay = "ω panes: "+firstLine(missing.Error()), noDisplay("omniglot", missing)
	eachSize(t, func(t *testing.T, w, h int) {
		tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r}), teatest.WithInitialTermSize(w, h))
		scr := &termScreen{t: t, out: tm.Output()}
		scr.waitFor(`Presets`)
		tm.Send(runOpenedMsg{run: r})
		scr.waitFor(`ELBO\s+latest`) // its curves
		focus(tm, w, paneOmega)
		scr.waitFor(`mkbench data get omniglot`)
		if strings.Contains(scr.text.String(), "waiting for the first display") {
			t.Error("a pane waits for a display that cannot come")
		}
		tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
		scr.waitFor(`Presets`)
		quitAndWait(t, tm)
	})
	if s := noDisplay("omniglot", fmt.Errorf("x: %w", engine.ErrStopped)); strings.Contains(s, "data get") {
		t.Errorf("an error other than missing data sends the user for the data: %s", s)
	}
}

// A run with a training-time budget gives the budget's ETA when that ends
// it first; an evaluation gives its own progress and ETA.
func TestETAKnowsBudgetAndEvaluation(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		tm, scr := startDashboard(t, Options{Minutes: 0.5}, w, h)
		scr.waitFor(training)
		scr.waitFor(`ETA (\d+s|\dm\d+s) \(30s budget\)`)
		quitAndWait(t, tm)

		opts := Options{Root: t.TempDir(), Preset: "sine-5shot", Iters: 40, Seed: -1, Renderer: testTheme().r,
			Overrides: tiny.With("eval_tasks", 100000)}
		tm = teatest.NewTestModel(t, New(opts), teatest.WithInitialTermSize(w, h))
		scr = &termScreen{t: t, out: tm.Output()}
		scr.waitFor(`evaluating \d+/100000 tasks │ ETA \d`)
		quitAndWait(t, tm)
	})
	if left, by := runETA(100, 1000, 10, time.Minute, 50*time.Second); !by || left != 10*time.Second {
		t.Errorf("budget-bound ETA %v %v", left, by)
	}
	if left, by := runETA(900, 1000, 10, time.Hour, 0); by || left != 10*time.Second {
		t.Errorf("iteration-bound ETA %v %v", left, by)
	}
}

// sendUntil sends msg, again every second, until re matches something
// drawn: for a key that works only once an earlier one's message has
// changed the screen.
func (s *termScreen) sendUntil(tm *teatest.TestModel, msg tea.Msg, re string) {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		tm.Send(msg)
		for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			s.pull()
			if rx.MatchString(s.text.String() + ansi.Strip(string(s.raw))) {
				return
			}
		}
	}
	txt := s.text.String()
	s.t.Fatalf("%q never appeared; the screen ended with:\n%s", re, txt[max(0, len(txt)-4000):])
}

// A terminal's reply to a query can arrive as one event of runes: it is
// not split into keys, whose digits would start the ablation variants
// (TestFailedRunExitStatus saw rbf start from one); keys typed fast still
// are.
func TestTerminalRepliesAreNotKeys(t *testing.T) {
	for s, want := range map[string]bool{"jjj": false, "zq": false, "/sine-10": false, "11": false, "[?1;2c": true, "[24;1R": true, "]11;rgb:0/0/0": true} {
		if got := reply([]rune(s)); got != want {
			t.Errorf("reply(%q) = %v, want %v", s, got, want)
		}
	}
}
