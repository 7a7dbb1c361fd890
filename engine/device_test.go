package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Device labels compare without their index (two equal GPUs give equal
// bytes), and a checkpoint without a device is the CPU's.
func TestDeviceChangeNote(t *testing.T) {
	gpu := "opencl:0 NVIDIA H200 (NVIDIA CUDA)"
	cases := []struct {
		was, now string
		note     bool
	}{
		{"", CPU, false},
		{CPU, CPU, false},
		{gpu, gpu, false},
		{gpu, "opencl:1 NVIDIA H200 (NVIDIA CUDA)", false},
		{"", gpu, true},
		{gpu, CPU, true},
		{gpu, "opencl:0 pthread-EPYC (Portable Computing Language)", true},
	}
	for _, c := range cases {
		n := DeviceChangeNote(c.was, c.now, 7)
		if (n != "") != c.note {
			t.Errorf("DeviceChangeNote(%q, %q) = %q, want a note: %v", c.was, c.now, n, c.note)
		}
		if c.note && (!strings.Contains(n, "from iteration 7 on") || !strings.Contains(n, " on "+c.now)) {
			t.Errorf("DeviceChangeNote(%q, %q) = %q: want the device and the iteration", c.was, c.now, n)
		}
	}
}

// A run whose checkpoint another device wrote says so when resumed on the
// CPU, once; its next checkpoint records the CPU (no device), and a CPU
// run's checkpoint never names one.
func TestResumeOnAnotherDeviceNotes(t *testing.T) {
	cfg := tinyConfig("vrf", 6)
	dir := filepath.Join(t.TempDir(), "run")
	stopped, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir},
		ObserverFunc(func(s Snapshot) error {
			if s.Iter >= 3 {
				return ErrStopped
			}
			return nil
		}))
	if !stopped.Interrupted {
		t.Fatalf("want a stopped run, got %v", err)
	}
	path := filepath.Join(dir, FileCheckpoint)
	ck, err := LoadCheckpoint(path)
	if err != nil || ck.Device != "" {
		t.Fatalf("a CPU run's checkpoint: device %q, %v", ck.Device, err)
	}
	if m, _ := ck.Model(sineLike{}); m == nil || m.Device() != CPU {
		t.Fatalf("a model built without a device is not on the CPU")
	}
	ck.Device = "opencl:0 Some GPU (Some Platform)"
	if err := ck.Save(path); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir, Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := DeviceChangeNote(ck.Device, CPU, ck.Iter)
	if n := strings.Count(strings.Join(res.Notes, "\n"), want); n != 1 {
		t.Errorf("notes %q: want %q once", res.Notes, want)
	}
	if ck, err := LoadCheckpoint(path); err != nil || ck.Device != "" {
		t.Errorf("the checkpoint after the CPU's part: device %q, %v", ck.Device, err)
	}
	if sum, err := ReadSummary(dir); err != nil || sum.Device != CPU {
		t.Errorf("summary.json device %q (%v), want cpu", sum.Device, err)
	}
}
