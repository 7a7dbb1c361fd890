package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/opencl"
)

// deviceEnv is the environment variable --device defaults to. The sweep
// engines' workers get the coordinator's --device through it.
const deviceEnv = "MKBENCH_DEVICE"

// deviceHelp is the --device flag's help.
const deviceHelp = "where the image backbones run: cpu (loads nothing), opencl (the first GPU, else the first OpenCL device), " +
	"opencl:N (mkbench devices lists N) or auto (a GPU when there is one, else the CPU, saying why); " +
	"not a setting: the run's config is the same on either (default $" + deviceEnv + ", else cpu)"

// deviceWords are the values --device takes besides opencl:N, for
// did-you-mean and completion.
var deviceWords = []string{"cpu", "opencl", "auto"}

// gpuWords are what a user asking for a GPU may type; the nearest device
// word to "gpu" by spelling is cpu, the opposite of what they want.
var gpuWords = []string{"gpu", "cuda", "nvidia", "amd", "rocm", "cl"}

// deviceHint is what a refused device value ends with: the nearest
// device word, or for a GPU's name the values that reach one; "" when
// nothing is near.
func deviceHint(value string) string {
	word, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(value)), ":")
	if slices.Contains(gpuWords, word) {
		return "; for a GPU use opencl (or auto)"
	}
	if near := suggest(word, deviceWords); near != "" && near != word {
		return fmt.Sprintf("; did you mean %s?", near)
	}
	return ""
}

// deviceFlag adds --device to fs.
func deviceFlag(fs *flagSet) *string { return fs.String("device", "", deviceHelp) }

// deviceSelection is the device cmd was asked for: --device when given
// (set), else $MKBENCH_DEVICE, else the CPU. A bad value is one line
// naming where it came from, the forms taken and the nearest one.
func deviceSelection(cmd string, set map[string]bool, value string) (opencl.Selection, error) {
	from := "--device"
	if !set["device"] {
		value, from = os.Getenv(deviceEnv), "$"+deviceEnv
	}
	sel, err := opencl.ParseSelection(value)
	if err != nil {
		return sel, errors.New(fmt.Sprintf("%s: %s %s", cmd, from, strings.TrimPrefix(err.Error(), "device ")) + deviceHint(value))
	}
	return sel, nil
}

// useDevice opens the device sel asks for and makes it the one the
// engine builds models on, before anything of cmd's is read or written;
// release closes it and puts the engine back on the CPU. cpu loads
// nothing. An explicit opencl that cannot open, or has no CLBlast (its
// matrix products), is an error naming what is missing and how to
// install it. auto says in one line on stderr which GPU it took, or that
// it runs on the CPU and why. label is the device used (engine's
// DeviceLabel).
func useDevice(cmd string, sel opencl.Selection, stderr io.Writer) (label string, release func(), err error) {
	dev, err := openDevice(cmd, sel, stderr)
	if err != nil {
		return "", func() {}, err
	}
	engine.UseDevice(dev)
	return engine.DeviceLabel(), func() {
		engine.UseDevice(nil)
		if dev != nil {
			dev.Close()
		}
	}, nil
}

// openDevice opens the device sel asks for, as useDevice says, without
// making it the engine's: nil for the CPU (cpu, or auto without a GPU).
func openDevice(cmd string, sel opencl.Selection, stderr io.Writer) (*opencl.Device, error) {
	if sel.Mode == opencl.ModeCPU {
		return nil, nil
	}
	dev, note, err := opencl.Open(sel)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	if dev != nil {
		if err := opencl.LoadCLBlast(); err != nil {
			dev.Close()
			if sel.Mode != opencl.ModeAuto {
				return nil, fmt.Errorf("%s: device %v: %w", cmd, sel, err)
			}
			dev, note = nil, "device auto: "+err.Error()+"; running on the CPU"
		}
	}
	if sel.Mode == opencl.ModeAuto {
		say(stderr, "note: %s", note)
	}
	return dev, nil
}

// forwardDevice sets $MKBENCH_DEVICE to sel for the sweep workers this
// process starts (the local engine's inherit its environment; sbatch
// passes the submitting one on by default), and returns what puts it
// back: the command line's --device, given to a coordinator, reaches the
// units that way, as a worker takes it without a flag.
func forwardDevice(sel opencl.Selection) (restore func()) {
	old, had := os.LookupEnv(deviceEnv)
	os.Setenv(deviceEnv, sel.String())
	return func() {
		if had {
			os.Setenv(deviceEnv, old)
		} else {
			os.Unsetenv(deviceEnv)
		}
	}
}

// workersDevice settles the device of the units a sweep coordinator
// (sweep run, sweep resume) starts: --device, else recorded (the sweep
// file's device:, or the one the units recorded), else $MKBENCH_DEVICE,
// else the CPU; it returns it as the units record it (sweep.Unit.Device),
// and the workers read it from sweep.json. On the local engine the
// workers run on this machine, so the device is opened once here, and
// closed, to refuse one that cannot open before any unit starts; a Slurm
// node's devices are the cluster's, so there it is only parsed, and each
// worker refuses for itself.
func workersDevice(cmd string, set map[string]bool, value, recorded, engineName string, stderr io.Writer) (string, error) {
	sel, err := deviceSelection(cmd, set, value)
	if !set["device"] && recorded != "" {
		sel, err = opencl.ParseSelection(recorded) // checked when the file or sweep.json was read
	}
	if err != nil {
		return "", err
	}
	if engineName == "local" && sel.Mode != opencl.ModeCPU {
		_, release, err := useDevice(cmd, sel, stderr)
		if err != nil {
			return "", err
		}
		release()
	}
	return sel.String(), nil
}

// onDevice is " on LABEL" for a device other than the CPU, for the line
// a command starts or ends with; "" on the CPU, whose lines are as they
// were before devices.
func onDevice(label string) string {
	if label == "" || label == engine.CPU {
		return ""
	}
	return " on " + label
}

// cmdDevices lists the OpenCL platforms' devices. Without a loader, a
// platform or a device it says which is missing and how to install it,
// and exits 1, so that a script can test for a device with its status;
// --json then prints an empty list first.
func cmdDevices(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("devices")
	asJSON := fs.Bool("json", false, "print the devices as JSON (an empty list when there is none)")
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	devs, err := opencl.Devices()
	if *asJSON {
		rows := make([]deviceRow, len(devs))
		for i, d := range devs {
			rows[i] = deviceRow{Device: fmt.Sprintf("opencl:%d", d.Index), Type: d.Type.String(), Name: d.Name, Vendor: d.Vendor,
				Platform: d.PlatformName, PlatformVersion: d.PlatformVersion, Memory: d.GlobalMem, MaxBuffer: d.MaxAlloc,
				LocalMemory: d.LocalMem, ComputeUnits: d.ComputeUnits, MaxWorkGroup: d.MaxWorkGroup, Version: d.Version,
				OpenCLC: d.OpenCLC, FP64: d.FP64, Driver: d.DriverVersion}
		}
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintln(stdout, string(b))
	}
	if err != nil {
		return fail(stderr, fmt.Errorf("devices: %w; mkbench runs on the CPU (--device cpu)", err))
	}
	if !*asJSON {
		if err := opencl.WriteTable(stdout, devs); err != nil {
			return fail(stderr, err)
		}
	}
	return 0
}

// deviceRow is a device as devices --json prints it (sizes in bytes).
type deviceRow struct {
	Device          string `json:"device"` // what --device takes to pick it
	Type            string `json:"type"`   // GPU, CPU, accelerator or other
	Name            string `json:"name"`
	Vendor          string `json:"vendor"`
	Platform        string `json:"platform"`
	PlatformVersion string `json:"platform_version"`
	Memory          uint64 `json:"memory"`
	MaxBuffer       uint64 `json:"max_buffer"`
	LocalMemory     uint64 `json:"local_memory"`
	ComputeUnits    int    `json:"compute_units"`
	MaxWorkGroup    int    `json:"max_work_group"`
	Version         string `json:"version"`
	OpenCLC         string `json:"opencl_c"`
	FP64            bool   `json:"fp64"`
	Driver          string `json:"driver"`
}
