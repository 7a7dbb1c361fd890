package sweep

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
)

// A sweep file's device: is one device for every unit, as --device takes
// it; it is no setting, so unit names and configs are the CPU's.
func TestParseFileDevice(t *testing.T) {
	cpu, err := ParseFile("c.yaml", []byte(smallSweep), nil)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"opencl": "opencl", "OpenCL:1": "opencl:1", "auto": "auto", "cpu": "cpu"} {
		f, err := ParseFile("d.yaml", []byte(smallSweep+"device: "+in+"\n"), nil)
		if err != nil {
			t.Fatalf("device: %s: %v", in, err)
		}
		if f.Device != want {
			t.Errorf("device: %s read as %q, want %q", in, f.Device, want)
		}
		u, c := f.Units()[0], cpu.Units()[0]
		if u.Device != want || u.Name != c.Name || strings.Join(u.Set, " ") != strings.Join(c.Set, " ") {
			t.Errorf("device: %s: unit %q %v on %q; the CPU's is %q %v", in, u.Name, u.Set, u.Device, c.Name, c.Set)
		}
	}
	if u := cpu.Units()[0]; u.Device != "" || u.OnDevice() {
		t.Errorf("a file without device: gave the unit device %q", u.Device)
	}
}

func TestParseFileBadDevice(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"device: gpu\n", `d.yaml:6: device: "gpu" is not a device: use cpu, opencl, opencl:N (N from mkbench devices) or auto`},
		{"device: opencl:x\n", `"opencl:x" is not a device`},
		{"device: \"\"\n", `"" is not a device`},
		{"device:\n", "is not a device"},
		{"device: [cpu, opencl]\n", "one device for the whole sweep, not a list"},
		{"device: {a: 1}\n", "is not a device"},
	} {
		_, err := ParseFile("d.yaml", []byte(smallSweep+c.in), nil)
		var de *DeviceError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrSweepFile) || !errors.As(err, &de) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", c.in, err, c.want)
		}
	}
}

// A unit on a device asks Slurm for a GPU, one on the CPU for none; the
// sweep's slurm.gres names it where a cluster names its GPUs, and a
// --gres among the extra lines (the way before device:) says it alone.
func TestScriptAsksForGPU(t *testing.T) {
	script := func(file string) string {
		f, err := ParseFile("s.yaml", []byte(file), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := Manifest{File: f, Units: f.Units(), Binary: "/opt/mkbench"}
		return Script(m, "/home/u/sw", []int{0})
	}
	gresLines := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "#SBATCH --gres") || strings.HasPrefix(l, "#SBATCH --gpus") {
				out = append(out, l)
			}
		}
		return out
	}
	for _, c := range []struct {
		file string
		want []string
	}{
		{smallSweep, nil},
		{smallSweep + "device: cpu\n", nil},
		{smallSweep + "device: cpu\nslurm: {gres: \"gpu:a100:1\"}\n", nil},
		{smallSweep + "device: opencl\n", []string{"#SBATCH --gres=gpu:1"}},
		{smallSweep + "device: opencl:0\n", []string{"#SBATCH --gres=gpu:1"}},
		{smallSweep + "device: auto\n", []string{"#SBATCH --gres=gpu:1"}},
		{smallSweep + "device: opencl\nslurm: {gres: \"gpu:a100:1\"}\n", []string{"#SBATCH --gres=gpu:a100:1"}},
		{smallSweep + "device: opencl\nslurm: {extra: [\"--gres=gpu:v100:2\"]}\n", []string{"#SBATCH --gres=gpu:v100:2"}},
		{smallSweep + "device: opencl\nslurm: {extra: [\"--gpus=1\"]}\n", []string{"#SBATCH --gpus=1"}},
	} {
		if got := gresLines(script(c.file)); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: the script asks %q, want %q", c.file, got, c.want)
		}
	}
	// The coordinator's --device, recorded in the units, is what counts.
	f, _ := ParseFile("s.yaml", []byte(smallSweep+"device: opencl\n"), nil)
	m := Manifest{File: f, Units: f.Units(), Binary: "/opt/mkbench"}
	WithDevice(m.Units, "cpu")
	if got := gresLines(Script(m, "/home/u/sw", []int{0})); len(got) != 0 {
		t.Errorf("units recorded on the CPU asked for %q", got)
	}
}

func TestSlurmGresChecked(t *testing.T) {
	for _, bad := range []string{"gres: \"gpu:1 --wrap=x\"", "gres: \"\"", "gres: [gpu]", "gres: \"gpu;1\""} {
		_, err := ParseFile("s.yaml", []byte(smallSweep+"slurm:\n  "+bad+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "slurm.gres") || !strings.Contains(err.Error(), "generic resource") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// sweep.json is read without the parser: a gres there is checked too.
	if err := (Slurm{Gres: "gpu:1\n#SBATCH --wrap=x"}).check(); err == nil {
		t.Error("a gres with a newline passed the manifest's check")
	}
}

// SetDevice records the device a sweep run again or resumed asks for;
// Create keeps a sweep whose units differ only in their device; Load
// refuses a unit's device that is none.
func TestSetDevice(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	other := m
	other.Units = append([]Unit(nil), m.Units...)
	WithDevice(other.Units, "opencl")
	if err := Create(dir, other, nil); err != nil {
		t.Fatalf("the same units on another device: %v", err)
	}
	if err := SetDevice(dir, "opencl:1"); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Units[0].Device != "opencl:1" {
		t.Errorf("the unit's device is %q after SetDevice", got.Units[0].Device)
	}
	st, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Units[0].DeviceText(); d != "opencl:1" {
		t.Errorf("a pending unit's row says %q, want its request", d)
	}
	// Once finished, the row says where it ran.
	sum := engine.Summary{Iters: 1, Device: "opencl:0 pthread-cpu (Portable Computing Language)"}
	unit := filepath.Join(dir, got.Units[0].Dir)
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sum)
	if err := os.WriteFile(filepath.Join(unit, engine.FileSummary), b, 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ = ReadStatus(dir)
	if d := st.Units[0].DeviceText(); d != sum.Device || st.Units[0].State != StateDone {
		t.Errorf("a finished unit's row says %q (%s), want %q", d, st.Units[0].State, sum.Device)
	}
	sum.Device = "" // a summary written before devices: the CPU
	b, _ = json.Marshal(sum)
	os.WriteFile(filepath.Join(unit, engine.FileSummary), b, 0o644)
	if st, _ = ReadStatus(dir); st.Units[0].DeviceText() != "cpu" {
		t.Errorf("a summary without a device reads as %q, want cpu", st.Units[0].DeviceText())
	}

	data, _ := os.ReadFile(filepath.Join(dir, FileManifest))
	bad := strings.Replace(string(data), `"device": "opencl:1"`, `"device": "gpu\u001b[2J"`, 1)
	if bad == string(data) {
		t.Fatal("sweep.json does not hold the unit's device")
	}
	os.WriteFile(filepath.Join(dir, FileManifest), []byte(bad), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("a unit device that is none: %v", err)
	}
}
