package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// fakeDevices is a DeviceChooser with two OpenCL devices, the second of
// which cannot open; it counts what the picker asked of it.
type fakeDevices struct {
	value, label string
	listed       int
	used         []string
	noOpenCL     bool
}

func (f *fakeDevices) Current() (string, string) { return f.value, f.label }

func (f *fakeDevices) Choices() ([]DeviceChoice, error) {
	f.listed++
	if f.noOpenCL {
		return nil, errors.New("no OpenCL loader (libOpenCL.so.1): install it with apt-get install ocl-icd-libopencl1 libclblast1, and the GPU's driver")
	}
	return []DeviceChoice{{"cpu", "cpu"}, {"opencl:0", "opencl:0 Fake GPU"}, {"opencl:1", "opencl:1 Broken"}, {"auto", "auto"}}, nil
}

func (f *fakeDevices) Use(v string) (string, string, error) {
	f.used = append(f.used, v)
	switch v {
	case "opencl:1":
		return "", "", errors.New("device opencl:1: no CLBlast (libclblast.so.1): install it with apt-get install libclblast1")
	case "auto":
		f.value, f.label = v, "opencl:0 Fake GPU (Fake Platform)"
		return f.label, "device auto: took the GPU opencl:0 Fake GPU", nil
	case "cpu":
		f.value, f.label = v, "cpu"
	default:
		f.value, f.label = v, v+" Fake GPU (Fake Platform)"
	}
	return f.label, "", nil
}

func devicePicker(t *testing.T, d DeviceChooser, w, h int) *picker {
	t.Helper()
	p, err := presets.Get("sine-5shot")
	if err != nil {
		t.Fatal(err)
	}
	pk := newPicker(testTheme(), newPickerKeys(), []presets.Preset{p}, nil)
	pk.dev.chooser = d
	pk.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return pk
}

// The picker's d cycles the device the runs train on: cpu, each OpenCL
// device, auto. OpenCL is listed only at the first d; a device that does
// not open is one message and the device before stays; nothing changes
// while runs train. Every frame is the terminal's size.
func TestPickerChoosesDevice(t *testing.T) {
	eachSize(t, func(t *testing.T, w, h int) {
		f := &fakeDevices{value: "cpu", label: "cpu"}
		p := devicePicker(t, f, w, h)
		view := func(what string, want ...string) {
			t.Helper()
			v := p.View()
			checkBlock(t, what, v, w, h)
			mustMatch(t, what, v, want...)
		}
		view("start", `runs train on cpu \(d\)`, `d device`)
		if f.listed != 0 {
			t.Fatal("the picker listed the OpenCL devices before d")
		}
		p.Update(keys("d"))
		view("opencl:0", `runs train on opencl:0 Fake GPU`)
		p.Update(keys("d")) // opencl:1 does not open
		view("refused", `runs train on opencl:0 Fake GPU`, `no CLBlast`, `the runs stay on opencl:0`)
		if firstHead := strings.Split(ansi.Strip(p.View()), "\n")[0]; !strings.Contains(firstHead, "opencl:0") {
			t.Errorf("the header after a refused device: %q", firstHead)
		}
		p.Update(keys("d"))
		view("auto", `runs train on opencl:0 Fake GPU`, `device auto: took the GPU`)
		p.Update(keys("d"))
		view("back to cpu", `runs train on cpu \(d\)`)
		if got := strings.Join(f.used, " "); got != "opencl:0 opencl:1 auto cpu" || f.listed != 1 {
			t.Errorf("used %q, listed %d times", got, f.listed)
		}

		p.busy = func() string { return "2 runs" }
		p.Update(keys("d"))
		view("busy", `the device cannot change now: 2 runs training on cpu`)
		if len(f.used) != 4 {
			t.Errorf("the device changed while runs trained: %v", f.used)
		}

		none := &fakeDevices{value: "cpu", label: "cpu", noOpenCL: true}
		p = devicePicker(t, none, w, h)
		p.Update(keys("d"))
		view("no OpenCL", `device: no OpenCL loader`, `runs train on cpu`)
		if len(none.used) != 0 {
			t.Errorf("without OpenCL the picker used %v", none.used)
		}

		// Without a chooser (a workbench given none) d is nothing.
		p = devicePicker(t, nil, w, h)
		p.Update(keys("d"))
		if v := ansi.Strip(p.View()); strings.Contains(v, "runs train on") || strings.Contains(v, "d device") {
			t.Errorf("a picker without a chooser shows a device:\n%s", v)
		}
	})
}

// In the workbench, runs that train keep the device: d on the picker,
// left with esc while the dashboard trains, is refused; tui --device's
// device shows in the picker's header from the start.
func TestWorkbenchKeepsDeviceWhileTraining(t *testing.T) {
	f := &fakeDevices{value: "opencl:0", label: "opencl:0 Fake GPU (Fake Platform)"}
	tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Iters: 1_000_000, Overrides: tiny, Renderer: testTheme().r, Devices: f}),
		teatest.WithInitialTermSize(80, 24))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`runs train on opencl:0 Fake`)
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // sine-5shot
	scr.waitFor(training)
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	scr.waitFor(`the dashboard trains sine-5shot`)
	tm.Send(keys("d"))
	scr.waitFor(`the device cannot change now: 1 run training on opencl:0`)
	if len(f.used) != 0 || f.listed != 0 {
		t.Errorf("the device changed under a training run: used %v, listed %d", f.used, f.listed)
	}
	quitAndWait(t, tm)
}

// A unit's device is in its row of the sweep screen (the column shows
// when some unit is not on the CPU), and in the line on the unit under
// the cursor: where it ran once finished, what it was asked for before.
func TestSweepScreenShowsDevice(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sweep-dev")
	f := sweep.File{Presets: []string{"sine-5shot"}, Variants: []string{"rbf"}, Seeds: []uint64{1, 2}, Iters: 60, EvalTasks: 10, Device: "opencl"}
	if err := sweep.Create(dir, sweep.Manifest{File: f, Units: f.Units()}, nil); err != nil {
		t.Fatal(err)
	}
	m, _ := sweep.Load(dir)
	ud := filepath.Join(dir, m.Units[0].Dir)
	os.MkdirAll(ud, 0o755)
	sum := engine.Summary{Iters: 60, Device: "opencl:0 Fake GPU (Fake Platform)"}
	if err := runfile.WriteJSON(filepath.Join(ud, engine.FileSummary), sum, runfile.Shared); err != nil {
		t.Fatal(err)
	}
	eachSize(t, func(t *testing.T, w, h int) {
		s := newSweepScreen(testTheme(), root)
		s.SetSize(w, h)
		s.Update(s.watch(dir)())
		v := s.View()
		checkBlock(t, "sweep", v, w, h)
		mustMatch(t, "sweep", v, `sine-5shot-rbf-s1 · finished · ran on opencl:0 Fake GPU`)
		if w >= 140 { // at 80 columns the line on the unit under the cursor says it
			mustMatch(t, "sweep", v, `device`, `0 sine-5shot-rbf-s1\s+finished.*opencl:0 Fake GPU`, `1 sine-5shot-rbf-s2\s+pending.*opencl\b`)
		}
		press(s, "down")
		mustMatch(t, "sweep", s.View(), `sine-5shot-rbf-s2 · pending · on opencl`)
	})
	// A sweep on the CPU has no device column.
	cpu := newSweep(t, t.TempDir())
	s := newSweepScreen(testTheme(), root)
	s.SetSize(140, 40)
	s.Update(s.watch(cpu)())
	if v := ansi.Strip(s.View()); strings.Contains(v, "device") {
		t.Errorf("a CPU sweep shows a device:\n%s", v)
	}
}

// The runs screen's device column: where each run ran, shown when some
// run ran on another device than the CPU.
func TestRunsScreenShowsDevice(t *testing.T) {
	root := t.TempDir()
	for s := 1; s <= 2; s++ {
		tinyRun(t, filepath.Join(root, fmt.Sprintf("sine-s%d", s)), presets.Overrides{"seed": s})
	}
	setDevice := func(label string) {
		path := filepath.Join(root, "sine-s2", engine.FileSummary)
		var sum engine.Summary
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, &sum)
		}
		if err != nil {
			t.Fatal(err)
		}
		sum.Device = label
		if err := runfile.WriteJSON(path, sum, runfile.Shared); err != nil {
			t.Fatal(err)
		}
	}
	setDevice("opencl:0 Fake GPU (Fake Platform)")
	tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: monoTheme().r, Runs: root}), teatest.WithInitialTermSize(140, 40))
	scr := &termScreen{t: t, out: tm.Output()}
	scr.waitFor(`device\s+age`)
	scr.waitFor(`sine-s1\s.*finished.*\scpu\s`)
	scr.waitFor(`sine-s2\s.*finished.*opencl:0 Fake GPU`)
	tm.Send(keys("q"))
	tm.WaitFinished(t)
}
