package engine

import (
	"fmt"
	"strings"
	"sync"

	"github.com/mkbench/mkbench/internal/opencl"
)

// The device is the process's, not a model's setting: the command line
// opens it once (--device) and every model built afterwards — a run's,
// an experiment's or sweep unit's, an evaluation's, the workbench's —
// runs its image backbones there. Config, config.json and the parameters
// are the same on either device, so nothing of a model records it; a
// checkpoint records the device that wrote it (Checkpoint.Device) and
// summary.json the device a run finished on.
var (
	deviceMu sync.Mutex
	device   *opencl.Device
)

// UseDevice makes the models built from now on in this process run their
// image backbones (Conv-4/5, ResNet-18) on dev; nil is the CPU, the
// default. Models built before keep the device they were built with. The
// caller owns dev and closes it after the last model built on it.
func UseDevice(dev *opencl.Device) {
	deviceMu.Lock()
	device = dev
	deviceMu.Unlock()
}

// currentDevice is the device UseDevice set, or nil.
func currentDevice() *opencl.Device {
	deviceMu.Lock()
	defer deviceMu.Unlock()
	return device
}

// CPU is the device label of the CPU engine.
const CPU = "cpu"

// DeviceLabel is the label of the device models built now use: "cpu", or
// "opencl:N NAME (PLATFORM)" (deviceLabel), as summary.json records it
// and a status line shows it.
func DeviceLabel() string { return deviceLabel(currentDevice()) }

func deviceLabel(dev *opencl.Device) string {
	if dev == nil {
		return CPU
	}
	return fmt.Sprintf("opencl:%d %s (%s)", dev.Info.Index, dev.Info.Name, dev.Info.PlatformName)
}

// Device is the label of the device the model's backbones run on
// (DeviceLabel's form).
func (m *Model) Device() string { return deviceLabel(m.pool.Device()) }

// sameDevice says whether two device labels name the same kind of device:
// the index is left out, as two equal GPUs give equal bytes, and "" (a
// checkpoint written before devices, or on the CPU) is the CPU.
func sameDevice(a, b string) bool {
	strip := func(s string) string {
		if s == "" {
			return CPU
		}
		if rest, ok := strings.CutPrefix(s, "opencl:"); ok {
			if _, name, ok := strings.Cut(rest, " "); ok {
				return "opencl " + name
			}
		}
		return s
	}
	return strip(a) == strip(b)
}

// DeviceChangeNote is the note of a run resumed at iteration iter on
// device now from a checkpoint written on device was ("" for the CPU, as
// in checkpoints written before devices): "" when they are the same.
// Devices sum in other orders, so the run's numbers, equal within
// tolerances, are no longer the bytes of an uninterrupted run on either.
func DeviceChangeNote(was, now string, iter int) string {
	if sameDevice(was, now) {
		return ""
	}
	if was == "" {
		was = CPU
	}
	return fmt.Sprintf("the checkpoint was written on %s and the run continues on %s: its numbers agree within tolerances, but its bytes differ from an uninterrupted run's from iteration %d on",
		was, now, iter)
}
