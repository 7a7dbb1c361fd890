package opencl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/testutil"
)

// childEnv marks the test binary run as a child by TestMissingRuntime:
// it loads OpenCL under the environment it was given and prints what
// Devices and Open(auto) say.
const childEnv = "MKBENCH_OPENCL_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		_, err := Devices()
		fmt.Printf("devices: %v\n", err)
		d, note, err := Open(Selection{Mode: ModeAuto, Index: -1})
		fmt.Printf("auto: %v %q %v\n", d != nil, note, err)
		_, _, err = Open(Selection{Mode: ModeOpenCL, Index: -1})
		fmt.Printf("opencl: %v\n", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMissingRuntime: no loader and no platform each give one line naming
// what is missing and how to install it; auto falls back with a note. The
// loader reads OCL_ICD_VENDORS when it loads, once a process: each case
// runs in a child process.
func TestMissingRuntime(t *testing.T) {
	if !supported {
		t.Skip("OpenCL is not supported on this system")
	}
	// The no-platform case needs the loader itself.
	_, err := Devices()
	testutil.OpenCL(t, err)
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{"no loader", []string{openCLEnv + "=/nonexistent/libOpenCL.so.1"},
			"no OpenCL loader (MKBENCH_OPENCL_LIB=/nonexistent/libOpenCL.so.1: "},
		{"no platform", []string{"OCL_ICD_VENDORS=" + t.TempDir()},
			"no OpenCL platform (clGetPlatformIDs: CL_PLATFORM_NOT_FOUND_KHR): install a vendor driver (NVIDIA: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), append(c.env, childEnv+"=1")...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 3 {
				t.Fatalf("child said:\n%s", out)
			}
			if !strings.HasPrefix(lines[0], "devices: "+c.want) {
				t.Errorf("Devices: %s\nwant it to start %s", lines[0], c.want)
			}
			if !strings.HasPrefix(lines[1], `auto: false "device auto: `+c.want) || !strings.HasSuffix(lines[1], `; running on the CPU" <nil>`) {
				t.Errorf("Open(auto): %s; want no device, a note and no error", lines[1])
			}
			if !strings.HasPrefix(lines[2], "opencl: device opencl: "+c.want) {
				t.Errorf("Open(opencl): %s", lines[2])
			}
			t.Log(lines[0])
		})
	}
}

func TestLoadErrors(t *testing.T) {
	if !supported {
		t.Skip("OpenCL is not supported on this system")
	}
	_, err := openOpenCL("/nonexistent/libOpenCL.so.1", "/nonexistent/libOpenCL.so.1")
	if !errors.Is(err, ErrNoLoader) || !strings.Contains(err.Error(), "apt-get install ocl-icd-libopencl1") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no loader: %v", err)
	}
	t.Setenv(clblastEnv, "/nonexistent/libclblast.so.1")
	_, err = openCLBlast(libFile(clblastEnv, clblastLib))
	if !errors.Is(err, ErrNoCLBlast) || !strings.HasPrefix(err.Error(), "no CLBlast (MKBENCH_CLBLAST_LIB=/nonexistent/libclblast.so.1: ") ||
		!strings.HasSuffix(err.Error(), ": apt-get install libclblast1 (or set MKBENCH_CLBLAST_LIB to the library's file)") {
		t.Errorf("no CLBlast: %v", err)
	}
	// A library that loads but is not CLBlast: the missing function named.
	_, err = openCLBlast("libc.so.6", "libc.so.6")
	if !errors.Is(err, ErrNoCLBlast) || !strings.Contains(err.Error(), "libc.so.6 has no CLBlastSgemm") {
		t.Errorf("not CLBlast: %v", err)
	}
}
