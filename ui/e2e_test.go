package ui

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// tiny shrinks every run so the end-to-end flow takes seconds, also under
// the race detector; the budget is large so runs are still going at quit.
var tiny = presets.Overrides{
	"embed_hidden": []int{8, 8},
	"infer_hidden": 8, "prior_hidden": 8, "flow_hidden": 8, "bases": 16,
	"meta_batch": 4, "query": 5,
	"snapshot_every": 20, "log_every": 10, "checkpoint_sec": 0,
	"eval_tasks": 8, "eval_query": 10, "eval_samples": 1,
}

// termScreen keeps everything the program drew, escapes stripped. The
// renderer only repaints lines that changed, so a line drawn once early
// (a pane title) is only in the history, never in later output.
type termScreen struct {
	t    *testing.T
	out  io.Reader
	raw  []byte // the part after the last newline: may end mid-escape
	text strings.Builder
}

func (s *termScreen) pull() {
	b, _ := io.ReadAll(s.out)
	s.raw = append(s.raw, b...)
	if i := bytes.LastIndexByte(s.raw, '\n'); i >= 0 {
		s.text.WriteString(ansi.Strip(string(s.raw[:i+1])))
		s.raw = append([]byte(nil), s.raw[i+1:]...)
	}
}

// waitFor waits until re matches something drawn so far and returns the
// groups of its last match.
func (s *termScreen) waitFor(re string) []string {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(90 * time.Second)
	for {
		s.pull()
		all := rx.FindAllStringSubmatch(s.text.String()+ansi.Strip(string(s.raw)), -1)
		if len(all) > 0 {
			return all[len(all)-1]
		}
		if time.Now().After(deadline) {
			txt := s.text.String()
			s.t.Fatalf("%q never appeared; the screen ended with:\n%s", re, txt[max(0, len(txt)-4000):])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func keys(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

// The whole flow a user goes through: pick sine-5shot, watch the curves
// move, switch RFF on beside it, pause, quit. Every step is checked on
// the screen; the runs are normal run directories afterwards.
func TestEndToEnd(t *testing.T) {
	root := t.TempDir()
	m := New(Options{Root: root, Iters: 1_000_000, Seed: -1, Overrides: tiny, Renderer: testTheme().r})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(160, 48))
	scr := &termScreen{t: t, out: tm.Output()}

	scr.waitFor(`Presets`)
	tm.Type("/")
	tm.Type("sine-5shot")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // accept the filter
	scr.waitFor(`sine-5shot`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // train it

	// The dashboard comes up at once and the curves fill in.
	first := scr.waitFor(`MetaKernel\s+running\s+(\d+)/1000000`)
	scr.waitFor(`ELBO\s+latest\s+-?\d`)
	n0, _ := strconv.Atoi(first[1])
	for deadline := time.Now().Add(90 * time.Second); ; {
		later := scr.waitFor(`MetaKernel\s+running\s+(\d+)/1000000`)
		if n1, _ := strconv.Atoi(later[1]); n1 > n0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("iterations did not advance past %d", n0)
		}
		time.Sleep(50 * time.Millisecond)
	}
	scr.waitFor(`task #0 · MSE \d`) // the sine fit
	scr.waitFor(`ω\[0\] after each flow step`)

	// RFF on: a second run beside the first, in the table and the legend.
	tm.Send(keys("2"))
	scr.waitFor(`\[x\]\s+RFF\s+running\s+\d+/1000000`)
	scr.waitFor(`rff\s+━━ metakernel|━━ rff`)

	// Pause: both runs hold.
	tm.Send(keys("p"))
	scr.waitFor(`paused (rff|metakernel) at iteration \d+`)
	scr.waitFor(`RFF\s+paused|MetaKernel\s+paused`)

	// Help overlay, then back.
	tm.Send(keys("?"))
	scr.waitFor(`mkbench keys`)
	tm.Send(keys("?"))

	// Quit: runs stop with a checkpoint and the program ends.
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(90*time.Second))
	final := tm.FinalModel(t).(Model)
	runs := final.Session().Runs()
	if len(runs) != 2 {
		t.Fatalf("want 2 runs, got %d", len(runs))
	}
	for _, r := range runs {
		o, ended := r.Outcome()
		if !ended || !o.Result.Interrupted || o.Result.Iters == 0 {
			t.Errorf("%s: ended %v, %+v", r.Variant, ended, o)
		}
		ck, err := engine.LoadCheckpoint(filepath.Join(r.Dir, engine.FileCheckpoint))
		if err != nil || ck.Iter != o.Result.Iters {
			t.Errorf("%s: checkpoint %v, %v", r.Variant, ck, err)
		}
		for _, f := range []string{engine.FileConfig, engine.FileMetrics} {
			if _, err := os.Stat(filepath.Join(r.Dir, f)); err != nil {
				t.Error(err)
			}
		}
	}
}
