package opencl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// DeviceType is an OpenCL device's kind (CL_DEVICE_TYPE bits).
type DeviceType uint64

// The kinds Devices reports.
const (
	TypeCPU         DeviceType = 1 << 1 // CL_DEVICE_TYPE_CPU
	TypeGPU         DeviceType = 1 << 2 // CL_DEVICE_TYPE_GPU
	TypeAccelerator DeviceType = 1 << 3 // CL_DEVICE_TYPE_ACCELERATOR
)

func (t DeviceType) String() string {
	switch {
	case t&TypeGPU != 0:
		return "GPU"
	case t&TypeCPU != 0:
		return "CPU"
	case t&TypeAccelerator != 0:
		return "accelerator"
	}
	return "other"
}

// DeviceInfo is one OpenCL device as Devices lists it.
type DeviceInfo struct {
	Index int // position in Devices' list: the N of opencl:N

	Platform        int // the platform's index in clGetPlatformIDs' order
	PlatformName    string
	PlatformVendor  string
	PlatformVersion string

	Device        int // the device's index within its platform
	Name          string
	Vendor        string
	Type          DeviceType
	GlobalMem     uint64 // bytes (CL_DEVICE_GLOBAL_MEM_SIZE)
	MaxAlloc      uint64 // the largest single buffer, bytes (CL_DEVICE_MAX_MEM_ALLOC_SIZE)
	LocalMem      uint64 // bytes of local memory a work-group has
	ComputeUnits  int
	MaxWorkGroup  int    // work-items in one work-group at most
	Version       string // CL_DEVICE_VERSION, "OpenCL 3.0 …"
	OpenCLC       string // CL_DEVICE_OPENCL_C_VERSION, "OpenCL C 1.2 …"
	FP64          bool   // cl_khr_fp64, or a double-precision configuration
	DriverVersion string
}

// String is the device in one line, as a note saying which device a run
// uses gives it.
func (d DeviceInfo) String() string {
	return fmt.Sprintf("opencl:%d %s (%s, %s; %s, %d compute units)",
		d.Index, d.Name, d.Type, d.PlatformName, size(d.GlobalMem), d.ComputeUnits)
}

// WriteTable writes devs as the table `mkbench devices` prints: one row a
// device, with the selection that picks it.
func WriteTable(w io.Writer, devs []DeviceInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tTYPE\tNAME\tPLATFORM\tMEMORY\tMAX BUFFER\tUNITS\tWG\tOPENCL C\tFP64\tDRIVER")
	for _, d := range devs {
		fp64 := "no"
		if d.FP64 {
			fp64 = "yes"
		}
		fmt.Fprintf(tw, "opencl:%d\t%s\t%s\t%s (%s)\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n",
			d.Index, d.Type, d.Name, d.PlatformName, shortVersion(d.PlatformVersion), size(d.GlobalMem), size(d.MaxAlloc),
			d.ComputeUnits, d.MaxWorkGroup, strings.TrimPrefix(d.OpenCLC, "OpenCL C "), fp64, d.DriverVersion)
	}
	return tw.Flush()
}

// shortVersion is "OpenCL 3.0" of "OpenCL 3.0 PoCL 3.1+debian Linux, …":
// the vendor's build details would make the table's widest column.
func shortVersion(v string) string {
	if f := strings.Fields(v); len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return v
}

// Mode is what a device selection asks for.
type Mode int

const (
	ModeCPU    Mode = iota // the CPU engine; nothing is loaded
	ModeOpenCL             // an OpenCL device, required: a missing one is an error
	ModeAuto               // an OpenCL GPU when there is one, else the CPU
)

// Selection is a parsed --device value.
type Selection struct {
	Mode Mode
	// Index is the N of opencl:N (Devices' order); -1 for plain opencl.
	Index int
}

// CPU is the default selection.
var CPU = Selection{Mode: ModeCPU, Index: -1}

// selectionForms names what ParseSelection accepts, for its refusals.
const selectionForms = "cpu, opencl, opencl:N (N from mkbench devices) or auto"

// ParseSelection reads a --device value (or MKBENCH_DEVICE): cpu, opencl,
// opencl:N or auto; an empty string is cpu.
func ParseSelection(s string) (Selection, error) {
	switch t := strings.ToLower(strings.TrimSpace(s)); t {
	case "", "cpu":
		return CPU, nil
	case "opencl":
		return Selection{Mode: ModeOpenCL, Index: -1}, nil
	case "auto":
		return Selection{Mode: ModeAuto, Index: -1}, nil
	default:
		if rest, ok := strings.CutPrefix(t, "opencl:"); ok {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 || rest != strconv.Itoa(n) {
				return CPU, fmt.Errorf("device %q: %q is not a device number (a whole number ≥ 0); use %s", s, rest, selectionForms)
			}
			return Selection{Mode: ModeOpenCL, Index: n}, nil
		}
	}
	return CPU, fmt.Errorf("device %q is not known: use %s", s, selectionForms)
}

// String is the selection as ParseSelection reads it.
func (s Selection) String() string {
	switch s.Mode {
	case ModeOpenCL:
		if s.Index >= 0 {
			return "opencl:" + strconv.Itoa(s.Index)
		}
		return "opencl"
	case ModeAuto:
		return "auto"
	}
	return "cpu"
}

// choose is Open's rule, on the devices found: the index of the device
// sel takes, or -1 with the reason none is (for auto, a note; for opencl,
// an error).
func choose(sel Selection, devs []DeviceInfo) (int, string) {
	switch {
	case sel.Mode == ModeOpenCL && sel.Index >= 0:
		if sel.Index >= len(devs) {
			return -1, fmt.Sprintf("no OpenCL device %d: this machine has %d (opencl:0…opencl:%d; mkbench devices lists them)", sel.Index, len(devs), len(devs)-1)
		}
		return sel.Index, ""
	case sel.Mode == ModeOpenCL:
		for i, d := range devs {
			if d.Type&TypeGPU != 0 {
				return i, ""
			}
		}
		return 0, "" // Devices never returns an empty list without an error
	}
	for i, d := range devs {
		if d.Type&TypeGPU != 0 {
			return i, ""
		}
	}
	var kinds []string
	for _, d := range devs {
		kinds = append(kinds, fmt.Sprintf("opencl:%d is a %s", d.Index, d.Type))
	}
	return -1, "no OpenCL GPU (" + strings.Join(kinds, ", ") + "; auto never picks a CPU device, opencl:N does)"
}
