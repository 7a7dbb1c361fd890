package ui

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"
)

// updating reports -update: the flag is x/exp/golden's (teatest brings
// it in); defining our own would clash with it.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// golden compares s, escapes stripped, with testdata/name.golden.
func golden(t *testing.T, name, s string) {
	t.Helper()
	got := ansi.Strip(s) + "\n"
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./ui -run %s -update rewrites it):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// checkBlock fails unless s is exactly h lines of w columns.
func checkBlock(t *testing.T, what, s string, w, h int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if len(lines) != h {
		t.Fatalf("%s: %d lines, want %d", what, len(lines), h)
	}
	for i, l := range lines {
		if lw := ansi.StringWidth(l); lw != w {
			t.Fatalf("%s: line %d is %d wide, want %d: %q", what, i, lw, w, ansi.Strip(l))
		}
	}
}

var sizes = [][2]int{{80, 24}, {140, 40}, {160, 48}}

// fakeDashboard is a dashboard in mid-training without a session: two
// runs with curves, the selected one with a display and an evaluation.
func fakeDashboard(t Theme, w, h int) *dashboard {
	p, err := presets.Get("sine-5shot")
	if err != nil {
		panic(err)
	}
	d := newDashboard(t, newDashKeys(), nil, p)
	mk := d.views[5]
	mk.run = &session.Run{Variant: "metakernel", Dir: "runs/sine-5shot-metakernel-s1-20260301-120000", Config: p.Config}
	mk.state, mk.curve = "running", fakeCurve("metakernel", 500, 1200, 1)
	mk.last = &engine.Snapshot{Iter: 1200, Iters: 20000, ItersPerSec: 38.2, Loss: 0.0812}
	mk.display = fakeDisplay(5)
	mk.eval = &engine.EvalResult{Metric: "mse", Mean: 0.0741, CI95: 0.0151, Tasks: 200}
	rff := d.views[1]
	rff.run = &session.Run{Variant: "rff", Dir: "runs/sine-5shot-rff-s1-20260301-120010", Config: p.Config}
	rff.state, rff.curve = "running", fakeCurve("rff", 600, 1500, 1.6)
	rff.last = &engine.Snapshot{Iter: 1500, Iters: 20000, ItersPerSec: 61.3, Loss: 1.234}
	d.setMsg("started rff → runs/sine-5shot-rff-s1-20260301-120010")
	d.w, d.h = w, h
	d.render()
	return d
}

// Each pane is a pure function of its data and size: golden at the size
// the dashboard gives it on an 80×24 (tabs) and a 160×48 (grid) terminal.
func TestPaneGoldens(t *testing.T) {
	th := testTheme()
	for _, sz := range sizes {
		d := fakeDashboard(th, sz[0], sz[1])
		for p := range numPanes {
			d.focus = p
			_, ps := d.layout()
			w, h := ps[p][0]-2, ps[p][1]-3 // inside the border, under the title
			body := d.paneBody(p, w, h)
			name := fmt.Sprintf("%s-%dx%d", strings.ToLower(d.tab(p)), sz[0], sz[1])
			if p == paneOmega {
				name = fmt.Sprintf("omega-%dx%d", sz[0], sz[1])
			}
			t.Run(name, func(t *testing.T) {
				checkBlock(t, name, body, w, h)
				golden(t, "pane-"+name, body)
			})
		}
		name := fmt.Sprintf("runs-table-%dx%d", sz[0], sz[1])
		t.Run(name, func(t *testing.T) {
			_, ps := d.layout()
			w, h := ps[paneRuns][0]-2, ps[paneRuns][1]-3
			if w < 0 { // tab mode: every pane gets the whole body
				w, h = sz[0]-2, sz[1]-6
			}
			s := runsPane(th, fakeRows(), w, h)
			checkBlock(t, name, s, w, h)
			golden(t, name, s)
		})
		name = fmt.Sprintf("status-%dx%d", sz[0], sz[1])
		t.Run(name, func(t *testing.T) {
			s := statusBar(th, d.status(), sz[0])
			checkBlock(t, name, s, sz[0], 2)
			golden(t, name, s)
		})
	}
}

// The accuracy curve that classification presets show instead of the
// sine fit.
func TestAccuracyPaneGolden(t *testing.T) {
	th := testTheme()
	var runs []accuracyRun
	for k, v := range []string{"rff", "metakernel"} {
		r := accuracyRun{Variant: v}
		for i := 1; i <= 12; i++ {
			acc := 0.2 + 0.75*(1-math.Exp(-float64(i)/(3+2*float64(1-k)))) - 0.02*math.Sin(float64(i))
			r.Vals = append(r.Vals, session.ValPoint{Iter: 500 * i, Eval: engine.EvalResult{Metric: "accuracy", Mean: acc, Tasks: 500}})
		}
		runs = append(runs, r)
	}
	d := accuracyData{Runs: runs, Selected: 1, Every: 500, Tasks: 500}
	for _, sz := range [][2]int{{78, 18}, {78, 19}} {
		s := accuracyPane(th, d, sz[0], sz[1])
		checkBlock(t, "accuracy", s, sz[0], sz[1])
		golden(t, fmt.Sprintf("pane-accuracy-%dx%d", sz[0], sz[1]), s)
	}
	dash := newDashboard(th, newDashKeys(), nil, mustPreset(t, "omniglot-5w1s"))
	dash.w, dash.h = 160, 48
	dash.render()
	for _, want := range []string{"Validation accuracy", "waiting for the first display snapshot", "[Curves]  Accuracy"} {
		if !strings.Contains(ansi.Strip(dash.View()), want) {
			t.Errorf("classification dashboard lacks %q", want)
		}
	}
}

// Whole screens: the dashboard (grid or tabs), the picker, the help.
func TestScreenGoldens(t *testing.T) {
	th := testTheme()
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		t.Run(fmt.Sprintf("dashboard-%dx%d", w, h), func(t *testing.T) {
			d := fakeDashboard(th, w, h)
			checkBlock(t, "dashboard", d.View(), w, h)
			golden(t, fmt.Sprintf("dashboard-%dx%d", w, h), d.View())
		})
		t.Run(fmt.Sprintf("picker-%dx%d", w, h), func(t *testing.T) {
			// A fixed list: the golden shows the picker, not today's presets.
			var all []presets.Preset
			for _, n := range []string{"sine-10shot", "sine-3shot", "sine-5shot"} {
				p, err := presets.Get(n)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, p)
			}
			p := newPicker(th, newPickerKeys(), all, nil)
			p.Update(tea.WindowSizeMsg{Width: w, Height: h})
			checkBlock(t, "picker", p.View(), w, h)
			golden(t, fmt.Sprintf("picker-%dx%d", w, h), p.View())
		})
		t.Run(fmt.Sprintf("help-%dx%d", w, h), func(t *testing.T) {
			v := helpView(th, newDashKeys().groups(), newHelpOverlay(th).close, w, h, 0)
			checkBlock(t, "help", v, w, h)
			golden(t, fmt.Sprintf("help-%dx%d", w, h), v)
		})
	}
}

// Special states draw something sensible, not garbage.
func TestPaneEdgeCases(t *testing.T) {
	th := testTheme()
	noFlows := fakeDisplay(1)
	nan := fakeDisplay(5)
	nan.PredMean[3], nan.PredSD[7], nan.OmegaSteps[2][5] = math.NaN(), math.Inf(1), math.NaN()
	nanCurve := fakeCurve("vrf", 50, 100, 1)
	nanCurve.ELBO[10], nanCurve.KL[11], nanCurve.Data[12] = math.NaN(), math.Inf(1), math.Inf(-1)
	cases := []struct {
		name string
		view string
		want string
	}{
		{"no-display", omegaPane(th, omegaData{Variant: "metakernel"}, 78, 18), "waiting for the first display"},
		{"rbf", omegaPane(th, omegaData{Variant: "rbf", Display: &engine.Display{Iter: 5, GridX: []float64{0}}}, 78, 18), "no bases"},
		{"no-flows", omegaPane(th, omegaData{Variant: "vrf", Display: noFlows}, 78, 18), "step 0 only"},
		{"nan-display", fitPane(th, fitData{Variant: "metakernel", Display: nan}, 78, 18), "MSE"},
		{"nan-omega", omegaPane(th, omegaData{Variant: "metakernel", Display: nan}, 78, 18), "after each flow step"},
		{"nan-curve", curvesPane(th, curvesData{Curves: []curve{nanCurve}, DataName: "MSE"}, 78, 18), "ELBO"},
		{"log-nonpositive", curvesPane(th, curvesData{Curves: []curve{nanCurve}, DataName: "MSE", LogY: true, EMA: true}, 78, 18), "−ELBO (log)"},
		{"one-point", curvesPane(th, curvesData{Curves: []curve{fakeCurve("rff", 1, 10, 1)}, DataName: "MSE"}, 78, 18), "ELBO"},
		{"no-runs", curvesPane(th, curvesData{DataName: "MSE"}, 78, 18), "waiting for the first iterations"},
		{"tiny", curvesPane(th, fakeCurves(), 20, 6), "ELBO"},
		{"narrow-omega", omegaPane(th, omegaData{Variant: "metakernel", Display: nan}, 50, 20), "×"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(ansi.Strip(c.view), c.want) {
				t.Fatalf("want %q in:\n%s", c.want, ansi.Strip(c.view))
			}
		})
	}
}
