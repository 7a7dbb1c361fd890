package testutil

import "testing"

// OpenCL ends a test that needs an OpenCL device when opening one failed
// (err from internal/opencl: no loader, no platform, no device): a skip
// with err's one line, or with CI=true a failure, so that CI cannot pass
// without running the device tests. A nil err lets the test go on.
//
// It takes the error rather than opening the device itself so that
// testutil stays free of internal/opencl (whose own tests use it).
func OpenCL(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		Need(tb, "needs an OpenCL device (PoCL will do: apt-get install pocl-opencl-icd ocl-icd-libopencl1 libclblast1): %v", err)
	}
}
