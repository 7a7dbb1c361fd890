package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/ui"
)

// tuiDevices is the workbench's device chooser (ui.DeviceChooser, the
// picker's d key). A device opened stays open until the workbench ends
// (Close), since a model keeps the device it was built on, and one chosen
// again is taken from there, not opened twice. The device chosen is the
// process's (engine.UseDevice) and $MKBENCH_DEVICE's, so the sweep
// workers the workbench starts run there too.
type tuiDevices struct {
	value, label string
	opened       map[string]tuiDevice // by --device value
	env          func()               // puts $MKBENCH_DEVICE back; nil while untouched
}

type tuiDevice struct {
	label string
	dev   *opencl.Device // nil: the CPU
}

// newTUIDevices starts the chooser on sel: tui --device (or
// $MKBENCH_DEVICE), opened before the workbench shows, so that a device
// that cannot open is refused on the command line. forward passes sel to
// the sweep workers (it was given as --device).
func newTUIDevices(sel opencl.Selection, forward bool, stderr io.Writer) (*tuiDevices, error) {
	d := &tuiDevices{opened: map[string]tuiDevice{}}
	dev, err := openDevice("tui", sel, stderr)
	if err != nil {
		return nil, err
	}
	engine.UseDevice(dev)
	d.value, d.label = sel.String(), engine.DeviceLabel()
	d.opened[d.value] = tuiDevice{d.label, dev}
	if forward {
		d.env = forwardDevice(sel)
	}
	return d, nil
}

// Current is the device the runs start on.
func (d *tuiDevices) Current() (value, label string) { return d.value, d.label }

// Choices lists the CPU, each OpenCL device and auto. It loads OpenCL:
// the picker asks only when the user presses d.
func (d *tuiDevices) Choices() ([]ui.DeviceChoice, error) {
	devs, err := opencl.Devices()
	if err != nil {
		return nil, fmt.Errorf("%w; the runs stay on the CPU", err)
	}
	out := []ui.DeviceChoice{{Value: "cpu", Label: engine.CPU}}
	for _, info := range devs {
		out = append(out, ui.DeviceChoice{Value: fmt.Sprintf("opencl:%d", info.Index),
			Label: runfile.Printable(fmt.Sprintf("opencl:%d %s", info.Index, info.Name))})
	}
	return append(out, ui.DeviceChoice{Value: "auto", Label: "auto (a GPU, else the CPU)"}), nil
}

// Use makes value the device of the models built from now on. A device
// that cannot open is an error, and the one before stays.
func (d *tuiDevices) Use(value string) (label, note string, err error) {
	sel, err := opencl.ParseSelection(value)
	if err != nil {
		return "", "", err
	}
	o, ok := d.opened[sel.String()]
	if !ok {
		var says bytes.Buffer // auto's line: the picker shows it
		dev, err := openDevice("device", sel, &says)
		if err != nil {
			engine.UseDevice(d.opened[d.value].dev)
			return "", "", err
		}
		engine.UseDevice(dev)
		o = tuiDevice{engine.DeviceLabel(), dev}
		d.opened[sel.String()] = o
		note = strings.TrimPrefix(strings.TrimSpace(says.String()), "mkbench: note: ")
	}
	engine.UseDevice(o.dev)
	if d.env == nil {
		d.env = forwardDevice(sel)
	} else {
		os.Setenv(deviceEnv, sel.String())
	}
	d.value, d.label = sel.String(), o.label
	return o.label, note, nil
}

// Close puts the engine back on the CPU, closes every device opened and
// puts $MKBENCH_DEVICE back, once the workbench's runs have stopped.
func (d *tuiDevices) Close() {
	engine.UseDevice(nil)
	for _, o := range d.opened {
		if o.dev != nil {
			o.dev.Close()
		}
	}
	if d.env != nil {
		d.env()
	}
}
