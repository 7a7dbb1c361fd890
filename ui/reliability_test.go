package ui

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// Quitting leaves nothing of the workbench: the last frame bubbletea
// flushes, into the alternate screen just before leaving it, is empty.
// A full frame there, with the cursor on its last line, is what tmux
// copied back onto the normal screen after the window had grown (16
// lines of dashboard above the summary).
func TestQuitLeavesNothing(t *testing.T) {
	tm, _ := startDashboard(t, Options{}, 100, 30)
	var raw bytes.Buffer
	scr := &termScreen{t: t, out: io.TeeReader(tm.Output(), &raw)}
	scr.waitFor(`MetaKernel|metakernel`)
	tm.Send(tea.WindowSizeMsg{Width: 160, Height: 48})
	scr.waitFor(`MetaKernel\s+running\s+\d+/`) // the grid, with its table
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))
	if v := tm.FinalModel(t).View(); v != "" {
		t.Fatalf("the final frame is not empty:\n%s", ansi.Strip(v))
	}
	scr.pull()
	// The renderer starts each frame by moving the cursor up to the top
	// of the previous one; what follows the last such move is the last
	// frame.
	out := raw.String()
	moves := regexp.MustCompile(`\x1b\[\d+A`).FindAllStringIndex(out, -1)
	if len(moves) == 0 {
		t.Fatal("no frame was redrawn")
	}
	if last := ansi.Strip(out[moves[len(moves)-1][1]:]); strings.TrimSpace(last) != "" {
		t.Fatalf("the last frame drawn before leaving the screen is not blank:\n%s", last)
	}
}

// The help overlay fits every terminal the workbench draws on (minW×minH
// and up): its box is whole, nothing is cut at its edges, and every key
// of every screen can be read, scrolling (j) where the page is taller
// than the terminal. At 60×18 its last rows used to be cut off.
func TestHelpFitsEverySize(t *testing.T) {
	th := testTheme()
	screens := map[string]component{
		"picker":      newPicker(th, newPickerKeys(), presets.All(), nil),
		"dashboard":   fakeDashboard(th, 80, 24),
		"experiments": newExpScreen(th, Options{Seed: -1}, &expRegistry{}),
	}
	for name, c := range screens {
		var groups []helpGroup
		if tc, ok := c.(titledHelp); ok {
			groups = tc.HelpGroups()
		}
		for _, w := range []int{minW, minW + 1, 50, 60, 70, 79, 80, 100, 160} {
			for _, h := range []int{minH, minH + 1, 15, 18, 20, 24, 30, 48} {
				o := newHelpOverlay(th)
				o.SetSize(w, h)
				o.show(c)
				seen := map[string]bool{}
				prev := ""
				for step := 0; step < 200; step++ {
					v := o.View()
					checkBlock(t, fmt.Sprintf("%s help %dx%d", name, w, h), v, w, h)
					plain := ansi.Strip(v)
					if !strings.Contains(plain, "╭") || !strings.Contains(plain, "╰") {
						t.Fatalf("%s help at %dx%d is cut:\n%s", name, w, h, plain)
					}
					for _, l := range strings.Split(plain, "\n") {
						if strings.HasSuffix(l, "…") { // block cut the line at the edge
							t.Fatalf("%s help at %dx%d is cut:\n%s", name, w, h, plain)
						}
						seen[strings.Join(strings.Fields(strings.Trim(strings.TrimSpace(l), "│")), " ")] = true
					}
					if v == prev {
						break // the bottom
					}
					prev = v
					o.Update(keys("j"))
				}
				all := strings.Join(slices.Collect(maps.Keys(seen)), "\n")
				for _, g := range groups {
					for _, b := range g.Keys {
						first := strings.Fields(b.Help().Desc)[0]
						re := regexp.MustCompile(regexp.QuoteMeta(b.Help().Key) + `\s+` + regexp.QuoteMeta(first))
						if !re.MatchString(all) {
							t.Fatalf("%s help at %dx%d never shows %q %q:\n%s", name, w, h, b.Help().Key, b.Help().Desc, prev)
						}
					}
				}
			}
		}
	}
}

// A checkpoint is served between two snapshots: the table and the status
// bar show the iteration it saved, as its message does, not the older
// snapshot's (10300 against a checkpoint at 10304).
func TestCheckpointShowsSavedIteration(t *testing.T) {
	d := fakeDashboard(testTheme(), 160, 48)
	mk := d.views[5]
	d.Update(batchMsg{ups: []session.Update{{Run: mk.run,
		Last:    &engine.Snapshot{Iter: 10300, Iters: 20000, ItersPerSec: 40, Loss: 0.08},
		Replies: []engine.Reply{{Kind: engine.CmdCheckpoint, Iter: 10304}}}}})
	if r := d.rows()[5]; r.Iter != 10304 {
		t.Errorf("table row at iteration %d, want 10304", r.Iter)
	}
	if s := d.status(); s.Iter != 10304 {
		t.Errorf("status bar at iteration %d, want 10304", s.Iter)
	}
	plain := ansi.Strip(d.View())
	for _, want := range []string{"checkpoint saved: metakernel at iteration 10304", "10304/20000"} {
		if !strings.Contains(plain, want) {
			t.Errorf("%q not on screen:\n%s", want, plain)
		}
	}
	if strings.Contains(plain, "10300/20000") {
		t.Errorf("the table still shows the snapshot's iteration:\n%s", plain)
	}
	// A later snapshot moves it on as before.
	d.Update(batchMsg{ups: []session.Update{{Run: mk.run, Last: &engine.Snapshot{Iter: 10400, Iters: 20000}}}})
	if r := d.rows()[5]; r.Iter != 10400 {
		t.Errorf("table row at iteration %d after a later snapshot, want 10400", r.Iter)
	}
}

// Pausing reports the selected run's iteration, whichever run's reply
// comes last; with the selected run not training, the one that paused.
func TestPauseReportsSelectedRun(t *testing.T) {
	for _, order := range [][2]int{{5, 1}, {1, 5}} {
		d := fakeDashboard(testTheme(), 160, 48) // metakernel (5) is selected
		iters := map[int]int{5: 1234, 1: 1567}
		var ups []session.Update
		for _, i := range order {
			ups = append(ups, session.Update{Run: d.views[i].run, Replies: []engine.Reply{{Kind: engine.CmdPause, Iter: iters[i]}}})
		}
		d.Update(batchMsg{ups: ups})
		if want := "paused metakernel at iteration 1234"; !strings.Contains(d.note.text, want) {
			t.Errorf("replies in order %v: message %q, want %q", order, d.note.text, want)
		}
		if d.views[1].state != "paused" || d.views[5].state != "paused" {
			t.Errorf("states %s, %s", d.views[1].state, d.views[5].state)
		}
	}
	// The selected run has stopped: the other run's pause is reported,
	// under its own name.
	d := fakeDashboard(testTheme(), 160, 48)
	d.views[5].state, d.views[5].ended = "stopped", true
	d.Update(batchMsg{ups: []session.Update{{Run: d.views[1].run, Replies: []engine.Reply{{Kind: engine.CmdPause, Iter: 1567}}}}})
	if want := "paused rff at iteration 1567"; !strings.Contains(d.note.text, want) {
		t.Errorf("message %q, want %q", d.note.text, want)
	}
}

// Iteration axes are labelled with whole iterations, also early in a run
// when the range is a few iterations (the labels used to read 2.5), and
// each label sits under its iteration's column.
func TestIterationTicksAreWhole(t *testing.T) {
	th := testTheme()
	for _, r := range [][2]float64{{1, 2}, {1, 3}, {1, 6}, {2, 20}, {1, 96}, {20, 1200}, {1, 1e6}, {1e3, 1e12 - 7}} {
		for _, w := range []int{25, 40, 65} { // below 66 the three charts are stacked
			c := curve{Variant: "metakernel"}
			for i := 0; i <= 50; i++ {
				c.Iter = append(c.Iter, math.Round(r[0]+(r[1]-r[0])*float64(i)/50))
				c.Loss = append(c.Loss, 1+math.Sin(float64(i))/2)
			}
			c.ELBO, c.Data, c.KL = c.Loss, c.Loss, c.Loss
			pane := ansi.Strip(curvesPane(th, curvesData{Curves: []curve{c}, DataName: "MSE"}, w, 40))
			lines := strings.Split(pane, "\n")
			axes := 0
			for i, axis := range lines[:len(lines)-1] {
				origin := strings.IndexRune(axis, '└')
				if origin < 0 {
					continue
				}
				axes++
				checkIterLabels(t, r, w, axis, origin, []rune(lines[i+1]), pane)
			}
			if axes != 3 {
				t.Fatalf("%v at width %d: %d axes:\n%s", r, w, axes, pane)
			}
		}
	}
}

// checkIterLabels checks the labels under an iteration axis of range r:
// whole iterations inside it, each under its iteration's column.
func checkIterLabels(t *testing.T, r [2]float64, w int, axis string, origin int, labels []rune, chart string) {
	t.Helper()
	origin = len([]rune(axis[:origin]))
	gw := len([]rune(strings.TrimRight(axis, " "))) - origin - 1
	n := 0
	for _, f := range regexp.MustCompile(`\S+`).FindAllStringIndex(string(labels), -1) {
		col := len([]rune(string(labels)[:f[0]]))
		s := string(labels)[f[0]:f[1]]
		mult := 1.0
		for suffix, m := range map[string]float64{"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12} {
			if strings.HasSuffix(s, suffix) {
				s, mult = strings.TrimSuffix(s, suffix), m
			}
		}
		v, err := strconv.ParseFloat(s, 64)
		v *= mult
		if err != nil || v != math.Trunc(v) || v < r[0] || v > r[1] {
			t.Fatalf("%v at width %d: label %q is not a whole iteration in range:\n%s", r, w, string(labels), chart)
		}
		if want := origin + 1 + int(math.Round((v-r[0])/(r[1]-r[0])*float64(gw-1))); col != want {
			t.Errorf("%v at width %d: label %q at column %d, its iteration is drawn at %d", r, w, s, col, want)
		}
		n++
	}
	if n == 0 {
		t.Errorf("%v at width %d: no label:\n%s", r, w, chart)
	}
}

// A huge budget (--iters 1e12) gives a sane ETA and progress everywhere:
// the status bar, the ablation table and an experiment's progress line;
// the 876000h0m0s that engine.Remaining's cap formats to reads ≥100y.
func TestHugeBudget(t *testing.T) {
	th := testTheme()
	const iters = 1_000_000_000_000
	bar := ansi.Strip(statusBar(th, statusData{Preset: "sine-5shot", Variants: []string{"metakernel"}, Variant: "metakernel",
		Iter: 65, Iters: iters, ItPerSec: 16.8, State: "running"}, 100))
	checkBlock(t, "status", bar, 100, 2)
	for _, want := range []string{"65/1T", "0%", "ETA ≥100y", "░"} {
		if !strings.Contains(bar, want) {
			t.Errorf("status bar lacks %q:\n%s", want, bar)
		}
	}

	rows := fakeRows()
	before := strings.Split(ansi.Strip(runsPane(th, rows, 100, 20)), "\n")[2]
	rows[1].Iter, rows[1].Iters = 65, iters
	row := strings.Split(ansi.Strip(runsPane(th, rows, 100, 20)), "\n")[2]
	if !strings.Contains(row, "65/1T") {
		t.Errorf("row lacks 65/1T:\n%s", row)
	}
	// The table's columns stay put: it/s is where it is with a small budget.
	if strings.Index(row, "61.3") != strings.Index(before, "61.3") {
		t.Errorf("it/s column moved:\n%s\n%s", before, row)
	}

	e := &expState{jobs: 3, job: 1, state: "running", phase: "training",
		snap: &engine.Snapshot{Iter: 5, Iters: iters, ItersPerSec: 10}}
	d := e.progressData(time.Now())
	if d.RunETA < 0 || d.AllETA < d.RunETA {
		t.Errorf("run ETA %v, experiment ETA %v", d.RunETA, d.AllETA)
	}
	line := ansi.Strip(expProgress(th, d, 160))
	for _, want := range []string{"iter 5/1T", "run ETA ≥100y", "experiment ETA ≥100y"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line lacks %q:\n%s", want, line)
		}
	}
	// Summed ETAs saturate instead of wrapping to a negative Duration.
	e.jobs, e.jobSecs, e.jobAt = 1_000_000, []float64{3e9}, time.Now()
	if d := e.progressData(time.Now()); d.AllETA < 0 {
		t.Errorf("experiment ETA %v", d.AllETA)
	}
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{-1, "–"}, {90 * time.Second, "1m30s"}, {50 * time.Hour, "2d2h"}, {3 * 365 * 24 * time.Hour, "3.0y"}, {etaCap, "≥100y"}} {
		if got := eta(c.d); got != c.want {
			t.Errorf("eta(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
