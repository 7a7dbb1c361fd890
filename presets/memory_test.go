package presets

import (
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
)

// fakeDevice makes the models' device, for CheckMemory, one of mem bytes.
func fakeDevice(t *testing.T, mem uint64) string {
	t.Helper()
	const label = "opencl:0 Tiny GPU (Fake Platform)"
	old := deviceMemory
	deviceMemory = func() (string, uint64, bool) { return label, mem, true }
	t.Cleanup(func() { deviceMemory = old })
	return label
}

// A run that fits the host but not the device is refused before it
// starts, in one line naming the device, its memory and the sizes that
// would fit; each size named does fit. One that fits passes, and on the
// CPU the device is not asked.
func TestCheckMemoryRefusesWhatTheDeviceCannotHold(t *testing.T) {
	p, cfg, err := CheckedConfig(Spec{Preset: "omniglot-5w1s"})
	if err != nil {
		t.Fatal(err)
	}
	in, out := Dims(p.Source, cfg)
	train, eval := cfg.DeviceMemoryEstimate(in, out), cfg.EvalDeviceMemoryEstimate(in, out)
	if train == 0 || eval >= train {
		t.Fatalf("omniglot-5w1s: device estimates %d (training), %d (evaluation)", train, eval)
	}
	small := eval + (train-eval)/2 // evaluating fits, training does not
	label := fakeDevice(t, small)
	err = CheckMemory("the run", p.Source, cfg, engine.Config.MemoryEstimate, nil)
	if err == nil {
		t.Fatalf("a run needing %d bytes of the device passed on one of %d", train, small)
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"device memory", label, formatBytes(small), formatBytes(train), "the largest that fit", "meta_batch "} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("refusal %q is more than one line", msg)
	}
	_, sizes, _ := strings.Cut(msg, "one size at a time: ")
	for _, s := range strings.Split(sizes, ", ") {
		key, v, _ := strings.Cut(s, " ")
		if strings.HasPrefix(s, "image ") {
			continue // image sizes are the net's, not overrides
		}
		if _, fixed, err := CheckedConfig(Spec{Preset: "omniglot-5w1s", Overrides: Overrides{key: atoi(t, v)}}); err != nil {
			t.Errorf("%s, named as fitting: %v (device estimate %d)", s, err, fixed.DeviceMemoryEstimate(in, out))
		}
	}
	if err := CheckMemory("the evaluation", p.Source, cfg, engine.Config.EvalMemoryEstimate, nil); err != nil {
		t.Errorf("an evaluation needing %d bytes of a device of %d: %v", eval, small, err)
	}
	fakeDevice(t, train)
	if err := CheckMemory("the run", p.Source, cfg, engine.Config.MemoryEstimate, nil); err != nil {
		t.Errorf("a run that fits its device: %v", err)
	}
	deviceMemory = func() (string, uint64, bool) { return engine.CPU, 0, false }
	if err := CheckMemory("the run", p.Source, cfg, engine.Config.MemoryEstimate, nil); err != nil {
		t.Errorf("on the CPU: %v", err)
	}
}

// A ResNet run (Meta-Dataset's) too large for the device names the image
// size that fits, the one size its episodes' device memory grows with
// that a meta_batch of 1 leaves.
func TestCheckMemoryDeviceResNetImageSize(t *testing.T) {
	p, base, err := CheckedConfig(Spec{Preset: "metadataset"})
	if err != nil {
		t.Skipf("metadataset does not fit this machine's memory: %v", err)
	}
	if base.ResNet == nil {
		t.Fatal("metadataset has no ResNet")
	}
	in, out := Dims(p.Source, base)
	need := base.DeviceMemoryEstimate(in, out)
	fakeDevice(t, need/2)
	err = CheckMemory("the run", p.Source, base, engine.Config.MemoryEstimate, nil)
	if err == nil || !strings.Contains(err.Error(), "image height ") || !strings.Contains(err.Error(), "device memory") {
		t.Fatalf("a ResNet run needing %d bytes on a device of %d: %v, want the image size that fits", need, need/2, err)
	}
	t.Log(err)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}
