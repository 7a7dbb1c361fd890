package ui

import (
	"fmt"
	"slices"

	"github.com/mkbench/mkbench/experiments/runs"
)

// DeviceChooser chooses where the runs the workbench starts run their
// image backbones: the picker's d key cycles its choices. The device is
// the process's (engine.UseDevice), so the picker refuses to change it
// while runs or experiments train: every run that trains is then on the
// device the status pane names.
type DeviceChooser interface {
	// Current is the device runs start on now: its --device value
	// ("cpu", "opencl:0", "auto") and its label ("opencl:0 NAME
	// (PLATFORM)", engine.DeviceLabel's form).
	Current() (value, label string)
	// Choices lists what d cycles through: the CPU, each OpenCL device,
	// auto. It loads OpenCL, so the picker asks only when d is pressed;
	// an error says in one line why there is no device.
	Choices() ([]DeviceChoice, error)
	// Use makes the device of value the one models are built on from now
	// on, and returns its label and a note (auto's, which GPU it took or
	// why the CPU); on an error the device before stays.
	Use(value string) (label, note string, err error)
}

// DeviceChoice is one of DeviceChooser's choices.
type DeviceChoice struct {
	Value string // as --device takes it
	Label string // as the picker shows it
}

// deviceState is the picker's device: what d cycles and what it says.
type deviceState struct {
	chooser DeviceChooser
	choices []DeviceChoice // nil until the first d
	at      int            // the choice d last went to
	note    string         // auto's note, or why a choice was refused (err)
	err     bool
}

// busyFunc says what trains ("2 runs of sine-5shot"), "" when nothing.
type busyFunc func() string

// cycle moves to the next device, unless busy says something trains.
func (d *deviceState) cycle(busy busyFunc) {
	if d.chooser == nil {
		return
	}
	d.note, d.err = "", false
	if what := busy(); what != "" {
		label := runs.DeviceText(d.label())
		d.note, d.err = fmt.Sprintf("the device cannot change now: %s training on %s (their models are built there); it can once they have ended", what, label), true
		return
	}
	if d.choices == nil {
		cs, err := d.chooser.Choices()
		if err != nil {
			d.note, d.err = "device: "+firstLine(err.Error()), true
			return
		}
		d.choices = cs
		value, _ := d.chooser.Current()
		d.at = max(slices.IndexFunc(cs, func(c DeviceChoice) bool { return c.Value == value }), 0)
	}
	if len(d.choices) == 0 {
		return
	}
	d.at = (d.at + 1) % len(d.choices)
	next := d.choices[d.at]
	_, note, err := d.chooser.Use(next.Value)
	if err != nil {
		// The cursor stays on the refused choice, so d goes on to the next.
		d.note, d.err = fmt.Sprintf("%s; the runs stay on %s", firstLine(err.Error()), runs.DeviceText(d.label())), true
		return
	}
	d.note = note
}

// label is the device runs start on, for the picker's header.
func (d *deviceState) label() string {
	if d.chooser == nil {
		return ""
	}
	_, l := d.chooser.Current()
	return l
}
