package ui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// The status bar names the device the backbones run on when it is not the
// CPU, at the workbench's sizes, and leaves the CPU (the default) unsaid.
func TestStatusBarDevice(t *testing.T) {
	th := testTheme()
	const dev = "opencl:0 NVIDIA H200 (NVIDIA CUDA)"
	for _, w := range []int{140, 80} {
		d := statusData{Preset: "omniglot-5w1s", Variants: []string{"metakernel"}, Variant: "metakernel",
			Iter: 10, Iters: 100, ItPerSec: 2, State: "running", Dir: "runs/omniglot-5w1s-metakernel-s1-20261129-0600"}
		cpu := ansi.Strip(statusBar(th, d, w))
		checkBlock(t, "status", cpu, w, 2)
		if strings.Contains(cpu, "opencl") || strings.Contains(cpu, "cpu") {
			t.Errorf("width %d: the CPU is named:\n%s", w, cpu)
		}
		d.Device = dev
		bar := ansi.Strip(statusBar(th, d, w))
		checkBlock(t, "status", bar, w, 2)
		line2 := strings.Split(bar, "\n")[1]
		if !strings.Contains(line2, "opencl:0") {
			t.Errorf("width %d: no device on the second line:\n%s", w, bar)
		}
		if !strings.Contains(line2, "0600") {
			t.Errorf("width %d: the directory's end is lost:\n%s", w, bar)
		}
	}
}
