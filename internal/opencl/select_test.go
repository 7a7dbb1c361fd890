package opencl

import (
	"strings"
	"testing"
)

func TestParseSelection(t *testing.T) {
	for in, want := range map[string]Selection{
		"": CPU, "cpu": CPU, " CPU ": CPU,
		"opencl":   {ModeOpenCL, -1},
		"opencl:0": {ModeOpenCL, 0},
		"OpenCL:3": {ModeOpenCL, 3},
		"auto":     {ModeAuto, -1},
	} {
		got, err := ParseSelection(in)
		if err != nil || got != want {
			t.Errorf("ParseSelection(%q) = %v, %v; want %v", in, got, err, want)
		}
		if err == nil {
			if back, err := ParseSelection(got.String()); err != nil || back != got {
				t.Errorf("ParseSelection(%q.String() = %q) = %v, %v", in, got.String(), back, err)
			}
		}
	}
	for _, in := range []string{"gpu", "opencl:", "opencl:-1", "opencl:x", "opencl:+1", "opencl:01", "cuda", "opencl:1:2"} {
		_, err := ParseSelection(in)
		if err == nil || !strings.Contains(err.Error(), "cpu, opencl, opencl:N") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSelection(%q): %v; want one line naming the accepted forms", in, err)
		}
	}
}

// TestChoose pins Open's rules on made-up device lists: auto takes a GPU
// and never a CPU device, opencl prefers a GPU but takes what there is,
// opencl:N takes device N.
func TestChoose(t *testing.T) {
	cpu := DeviceInfo{Index: 0, Type: TypeCPU, Name: "pthread"}
	gpu := DeviceInfo{Index: 1, Type: TypeGPU, Name: "H200"}
	acc := DeviceInfo{Index: 0, Type: TypeAccelerator}
	cases := []struct {
		sel  Selection
		devs []DeviceInfo
		want int
		why  string
	}{
		{Selection{ModeAuto, -1}, []DeviceInfo{cpu, gpu}, 1, ""},
		{Selection{ModeAuto, -1}, []DeviceInfo{cpu}, -1, "opencl:0 is a CPU; auto never picks a CPU device"},
		{Selection{ModeAuto, -1}, []DeviceInfo{acc}, -1, "opencl:0 is a accelerator"},
		{Selection{ModeOpenCL, -1}, []DeviceInfo{cpu, gpu}, 1, ""},
		{Selection{ModeOpenCL, -1}, []DeviceInfo{cpu}, 0, ""},
		{Selection{ModeOpenCL, 0}, []DeviceInfo{cpu, gpu}, 0, ""},
		{Selection{ModeOpenCL, 2}, []DeviceInfo{cpu, gpu}, -1, "no OpenCL device 2: this machine has 2 (opencl:0…opencl:1"},
	}
	for _, c := range cases {
		got, why := choose(c.sel, c.devs)
		if got != c.want || !strings.Contains(why, c.why) || (c.why == "") != (why == "") {
			t.Errorf("choose(%v, %d devices) = %d, %q; want %d, %q", c.sel, len(c.devs), got, why, c.want, c.why)
		}
	}
}

func TestOpenCPULoadsNothing(t *testing.T) {
	d, note, err := Open(CPU)
	if d != nil || note != "" || err != nil {
		t.Fatalf("Open(cpu) = %v, %q, %v; want nothing", d, note, err)
	}
}

func TestErrorNames(t *testing.T) {
	for st, want := range map[Status]string{
		-11: "CL_BUILD_PROGRAM_FAILURE (-11)", -1001: "CL_PLATFORM_NOT_FOUND_KHR (-1001)",
		-1011: "CLBlastInsufficientMemoryA (-1011)", -2041: "CLBlastDatabaseError (-2041)", -9999: "status -9999",
	} {
		if got := st.String(); got != want {
			t.Errorf("Status(%d) = %q, want %q", int32(st), got, want)
		}
	}
	e := &BuildError{Status: -11, Log: "<source>:2:3: error: use of undeclared identifier 'y'\n  y = 1;\n  ^\n\n1 error generated."}
	if got := e.Error(); strings.Contains(got, "\n") || !strings.Contains(got, "undeclared identifier 'y' | y = 1; | ^ | 1 error generated") {
		t.Errorf("BuildError = %q; want the log on one line", got)
	}
}

// FuzzParseSelection: any --device value is accepted as one of the four
// forms (and prints back as itself) or refused in one line.
func FuzzParseSelection(f *testing.F) {
	for _, s := range []string{"cpu", "opencl", "opencl:0", "opencl:12", "auto", "", "opencl:-1", "OPENCL:٣", "opencl:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelection(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || sel != CPU {
				t.Fatalf("ParseSelection(%q) = %v, %q", s, sel, err)
			}
			return
		}
		if back, err := ParseSelection(sel.String()); err != nil || back != sel || sel.Index < -1 || (sel.Mode != ModeOpenCL && sel.Index != -1) {
			t.Fatalf("ParseSelection(%q) = %v, which reads back as %v, %v", s, sel, back, err)
		}
	})
}
