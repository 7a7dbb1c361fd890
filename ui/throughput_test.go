package ui

import (
	"context"
	"io"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// TestTUIThroughput measures what the open workbench costs training:
// sine-5shot metakernel for N iterations headless (engine.Run with an
// observer, as `mkbench run` does) against the same run inside the real
// program (bubbletea at 20 frames/s on a 160×48 screen, all four panes
// live), alternating so that load from elsewhere hits both alike. The
// workbench must keep ≥ 95% of the headless rate.
//
// It also compares the CPU time the process spends on each: the rates
// move with whatever else the machine runs, the CPU time much less.
// Opt-in, it takes minutes, and wants a quiet machine:
//
//	MKBENCH_THROUGHPUT=400 go test ./ui -run TUIThroughput -v
func TestTUIThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MKBENCH_THROUGHPUT"))
	if n <= 0 {
		t.Skip("set MKBENCH_THROUGHPUT=iterations to measure")
	}
	rounds := 3
	if r, _ := strconv.Atoi(os.Getenv("MKBENCH_THROUGHPUT_ROUNDS")); r > 0 {
		rounds = r
	}
	shrink := presets.Overrides{"eval_tasks": 25} // the final evaluation is not measured
	var head, tui, ratio, busy, cpu []float64
	for r := 0; r < rounds; r++ {
		c0 := cpuTime()
		h := headlessRate(t, n, shrink)
		c1 := cpuTime()
		w, b := tuiRate(t, n, shrink)
		c2 := cpuTime()
		extra := (c2-c1)/(c1-c0) - 1
		head, tui, ratio, busy, cpu = append(head, h), append(tui, w), append(ratio, w/h), append(busy, b), append(cpu, extra)
		t.Logf("round %d: headless %.2f it/s, workbench %.2f it/s (%.1f%%); CPU %.2fs vs %.2fs (%+.1f%%); UI in Update/View %.2f%% of the wall time",
			r+1, h, w, 100*w/h, c1-c0, c2-c1, 100*extra, 100*b)
	}
	mr, mc := median(ratio), median(cpu)
	t.Logf("median: headless %.2f it/s, workbench %.2f it/s, ratio %.1f%%; extra CPU %+.1f%%; UI in Update/View %.2f%% of the wall time",
		median(head), median(tui), 100*mr, 100*mc, 100*median(busy))
	if mr < 0.95 {
		t.Errorf("the workbench keeps %.1f%% of the headless rate, want ≥ 95%%", 100*mr)
	}
	// The rates move with whatever else the machine runs; the CPU time
	// this process spends per run does not, and what the workbench adds
	// to it is what it can take from training.
	if mc > 0.05 {
		t.Errorf("the workbench adds %.1f%% CPU time to a run, want ≤ 5%%", 100*mc)
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// timed is the root model with a stopwatch on Update and View: the time
// the UI takes from training, whatever the noise on the rates.
type timed struct {
	Model
	busy *time.Duration
}

func (m timed) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	t0 := time.Now()
	next, cmd := m.Model.Update(msg)
	*m.busy += time.Since(t0)
	return timed{next.(Model), m.busy}, cmd
}

func (m timed) View() string {
	t0 := time.Now()
	v := m.Model.View()
	*m.busy += time.Since(t0)
	return v
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func headlessRate(t *testing.T, n int, shrink presets.Overrides) float64 {
	p, cfg, err := presets.Spec{Preset: "sine-5shot", Overrides: shrink.With("iters", n)}.Config()
	if err != nil {
		t.Fatal(err)
	}
	src, _ := presets.NewSource(p.Source)
	var last time.Time
	obs := engine.ObserverFunc(func(s engine.Snapshot) error {
		if time.Since(last) >= 2*time.Second { // mkbench run's progress line
			last = time.Now()
			io.WriteString(io.Discard, strconv.Itoa(s.Iter))
		}
		return nil
	})
	res, err := engine.Run(context.Background(), cfg, src, engine.RunOptions{Preset: p.Name, Dir: t.TempDir()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	return 1000 / res.MsPerIter
}

// tuiRate returns the run's rate inside the workbench and the fraction
// of the wall time the UI spent in Update and View.
func tuiRate(t *testing.T, n int, shrink presets.Overrides) (float64, float64) {
	m := New(Options{Preset: "sine-5shot", Iters: n, Seed: -1, Root: t.TempDir(), Overrides: shrink, Renderer: testTheme().r})
	var busy time.Duration
	t0 := time.Now()
	p := tea.NewProgram(timed{m, &busy}, tea.WithInput(nil), tea.WithOutput(io.Discard), tea.WithFPS(20), tea.WithoutSignals())
	done := make(chan error, 1)
	go func() {
		_, err := p.Run()
		done <- err
	}()
	p.Send(tea.WindowSizeMsg{Width: 160, Height: 48})
	sess := m.Session()
	for deadline := time.Now().Add(30 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if runs := sess.Runs(); len(runs) == 1 {
			if o, ended := runs[0].Outcome(); ended {
				if o.Err != nil {
					t.Fatal(o.Err)
				}
				p.Quit()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return 1000 / o.Result.MsPerIter, busy.Seconds() / time.Since(t0).Seconds()
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish")
		}
	}
}
