package ui

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/presets"
)

// runsRoot makes a runs root of three small sine runs (seeds 1–3, the
// third's lr changed) and an experiment holding a fourth, stopped.
func runsRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for s := 1; s <= 3; s++ {
		set := presets.Overrides{"seed": s}
		if s == 3 {
			set["lr"] = 0.005
		}
		tinyRun(t, filepath.Join(root, fmt.Sprintf("sine-s%d", s)), set)
	}
	exp := filepath.Join(root, "exp-ablation")
	tinyRun(t, filepath.Join(exp, "runs", "rff"), presets.Overrides{"seed": 4})
	os.WriteFile(filepath.Join(exp, experiments.FileExperiment), []byte("{}"), 0o644)
	os.Remove(filepath.Join(exp, "runs", "rff", engine.FileSummary))
	return root
}

// The runs screen as a person uses it, at 80×24 without colour: the table
// with its group, sorting, the filter, marks, the diff and the curves of
// marked runs, evaluating a run into its row, deleting one after naming
// it, opening one and coming back.
func TestRunsScreen(t *testing.T) {
	root := runsRoot(t)
	tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: monoTheme().r, Runs: root}), teatest.WithInitialTermSize(80, 24))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`4 runs · 3 finished · 1 stopped`)
	scr.waitFor(`experiment exp-ablation · 1 run`)
	scr.waitFor(`runs/rff\s+sine-5shot\s+30/30\s+stopped`)

	tm.Send(keys("s")) // sort by preset
	scr.waitFor(`sorted by preset ▲`)
	tm.Send(keys("/"))
	for _, r := range "s3" {
		tm.Send(keys(string(r)))
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`filter "s3": 1 shown`)
	tm.Send(keys("/"))
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc}) // clears it
	scr.waitFor(`sorted by preset ▲\s`)

	tm.Send(keys("g"))
	tm.Send(keys(" "))
	tm.Send(keys("j"))
	tm.Send(keys("j"))
	tm.Send(keys(" ")) // sine-s1 and sine-s3 marked
	scr.waitFor(`2 marked`)
	tm.Send(keys("d"))
	scr.waitFor(`settings that differ between 2 marked runs`)
	scr.waitFor(`lr\s+0\.001\s+0\.005`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	tm.Send(keys("c"))
	scr.waitFor(`loss \(−ELBO\) · 2 runs against iterations`)
	tm.Send(tea.KeyMsg{Type: tea.KeyRight})
	tm.Send(keys("t"))
	scr.waitFor(`ELBO · 2 runs against training time`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})

	tm.Send(keys("e")) // sine-s3, under the cursor
	scr.waitFor(`sine-s3: mse [0-9.]+ ± [0-9.]+ \(\d+ tasks\) \(matches summary\.json\)`)

	tm.Send(keys("x"))
	scr.waitFor(`delete ` + regexpQuote(filepath.Join(root, "sine-s3")) + ` and everything in it\?`)
	tm.Send(keys("y"))
	scr.waitFor(`deleted ` + regexpQuote(filepath.Join(root, "sine-s3")))
	if _, err := os.Stat(filepath.Join(root, "sine-s3")); !os.IsNotExist(err) {
		t.Errorf("the run was not deleted: %v", err)
	}
	scr.waitFor(`3 runs · 2 finished`)

	tm.Send(keys("g"))
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`sine-5shot │ metakernel │ 30/30 .* finished`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	scr.waitFor(`sorted by preset`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc}) // to the picker
	scr.waitFor(`Presets`)
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

// r resumes a stopped run on the dashboard, its curve so far drawn from
// its files; the dashboard's R comes back to the runs, now finished.
func TestRunsScreenResumes(t *testing.T) {
	root := runsRoot(t)
	tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: testTheme().r, Runs: root}), teatest.WithInitialTermSize(140, 40))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`4 runs · 3 finished · 1 stopped`)
	tm.Send(keys("/"))
	for _, r := range "rff" {
		tm.Send(keys(string(r)))
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	scr.waitFor(`filter "rff": 1 shown`)
	tm.Send(keys("r"))
	scr.waitFor(`metakernel finished 30 iterations`)
	tm.Send(keys("R"))
	scr.waitFor(`4 runs · 4 finished`)
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

// With a thousand runs the table shows once the directories are listed,
// before any run is read, and keys work while the reads go on in chunks.
func TestRunsScreenLazy(t *testing.T) {
	root := t.TempDir()
	seed := filepath.Join(t.TempDir(), "seed")
	tinyRun(t, seed, nil)
	for i := range 1000 {
		copyDir(t, seed, filepath.Join(root, fmt.Sprintf("exp%02d", i/100), "runs", fmt.Sprintf("r%04d", i)))
	}
	s := newRunsScreen(testTheme(), root, "")
	s.SetSize(120, 40)
	found := s.Init()().(runsFoundMsg)
	_, next := s.Update(found)
	if v := s.View(); !strings.Contains(v, "1000 runs") || !strings.Contains(v, "reading 0/1000") || !strings.Contains(v, "…") {
		t.Fatalf("the table before any run is read:\n%s", v)
	}
	s.Update(keys("j"))
	if s.cursor.At() != 1 {
		t.Errorf("a key while reading: cursor %d", s.cursor.At())
	}
	chunks := 0
	for next != nil {
		msg := next()
		_, next = s.Update(msg)
		chunks++
	}
	if chunks != 1000/runsChunk+1 || s.nread != 1000 || s.scanning {
		t.Errorf("%d chunks, %d read, scanning %v", chunks, s.nread, s.scanning)
	}
	if v := s.View(); !strings.Contains(v, "1000 finished") || s.cursor.At() != 1 {
		t.Errorf("after reading (cursor %d):\n%s", s.cursor.At(), v)
	}
}

// BenchmarkRunsScreen1000 is the runs screen on 1,000 runs: the time to
// its first table (the listing) and to every row read.
func BenchmarkRunsScreen1000(b *testing.B) {
	root := b.TempDir()
	seed := filepath.Join(b.TempDir(), "seed")
	tinyRun(b, seed, nil)
	for i := range 1000 {
		copyDir(b, seed, filepath.Join(root, fmt.Sprintf("exp%02d", i/100), "runs", fmt.Sprintf("r%04d", i)))
	}
	var first, all time.Duration
	for b.Loop() {
		start := time.Now()
		s := newRunsScreen(testTheme(), root, "")
		s.SetSize(140, 40)
		_, next := s.Update(s.Init()())
		_ = s.View()
		first += time.Since(start)
		for next != nil {
			_, next = s.Update(next())
		}
		_ = s.View()
		all += time.Since(start)
	}
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-to-table")
	b.ReportMetric(float64(all.Milliseconds())/float64(b.N), "ms-all-read")
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	os.MkdirAll(dst, 0o755)
	list, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if b, err := os.ReadFile(filepath.Join(src, e.Name())); err == nil {
			os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
	}
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

// A row being evaluated shows dots until the first batch is done, then
// the share of tasks done.
func TestEvalJobText(t *testing.T) {
	var j evalJob
	if got := j.text(2); got != "evaluating.." {
		t.Errorf("before any batch: %q", got)
	}
	j.progress(750, 3000)
	if got := j.text(2); got != "evaluating 25%" {
		t.Errorf("a quarter done: %q", got)
	}
}
