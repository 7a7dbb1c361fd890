package runs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
)

// A run's device: summary.json's once finished ("cpu" for a summary
// written before devices), a sweep unit's request (its sweep.json) before,
// and not known for a run of its own that has not finished.
func TestScanDevices(t *testing.T) {
	root := t.TempDir()
	done := filepath.Join(root, "done")
	train(t, done, 1)
	old := filepath.Join(root, "old")
	copyRun(t, done, old)
	setSummaryDevice(t, old, "")
	gpu := filepath.Join(root, "gpu")
	copyRun(t, done, gpu)
	setSummaryDevice(t, gpu, "opencl:0 Fake GPU (Fake Platform)")
	stopped := filepath.Join(root, "stopped")
	copyRun(t, done, stopped)
	os.Remove(filepath.Join(stopped, engine.FileSummary))

	sw := filepath.Join(root, "sw")
	f := sweep.File{Presets: []string{"sine-5shot"}, Seeds: []uint64{1}, Device: "opencl:1"}
	if err := sweep.Create(sw, sweep.Manifest{File: f, Units: f.Units()}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := sweep.Load(sw)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(sw, m.Units[0].Dir)
	copyRun(t, done, unit)
	os.Remove(filepath.Join(unit, engine.FileSummary))

	rs, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"done": "cpu", "old": "cpu", "gpu": "opencl:0 Fake GPU (Fake Platform)", "stopped": "", m.Units[0].Dir: "opencl:1"}
	for _, r := range rs {
		rel, _ := filepath.Rel(r.Group, r.Rel)
		if w, ok := want[rel]; !ok || r.Device != w {
			t.Errorf("%s (group %q): device %q, want %q", r.Rel, r.Group, r.Device, w)
		}
	}
	if got := DeviceText("opencl:0 Fake GPU (Fake Platform)"); got != "opencl:0 Fake GPU" {
		t.Errorf("DeviceText = %q", got)
	}
	if got := Filter(rs, "opencl:1"); len(got) != 1 || got[0].Group != "sw" {
		t.Errorf("filter by device: %d runs", len(got))
	}
}

func setSummaryDevice(t *testing.T, dir, device string) {
	t.Helper()
	path := filepath.Join(dir, engine.FileSummary)
	var sum map[string]any
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &sum)
	}
	if err != nil {
		t.Fatal(err)
	}
	if device == "" {
		delete(sum, "device")
	} else {
		sum["device"] = device
	}
	data, _ = json.Marshal(sum)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
