package ops

import (
	"embed"
	"fmt"
	"sync"

	"github.com/mkbench/mkbench/internal/opencl"
)

// SetDevice makes the kernels created from now on by ops of this pool run
// the image backbones (ConvKernel, ResNetKernel) on dev; nil keeps them on
// the CPU. Call it before the model's first graph is built: a kernel
// chooses where it runs when it is created. Only these move; every
// other op, the graphs, the gradients' float64 values and the optimizer
// stay where they are, so a model's parameters, checkpoints and config do
// not depend on the device (its numbers do: a device sums in another
// order than the CPU, so results agree within tolerances, not bytes).
func (p *Pool) SetDevice(dev *opencl.Device) { p.dev = dev }

// Device is the pool's OpenCL device, or nil for the CPU.
func (p *Pool) Device() *opencl.Device {
	if p == nil {
		return nil
	}
	return p.dev
}

// clSources are the OpenCL C programs of the device kernels, one file per
// piece (cl/conv.cl, cl/resnet.cl, …), compiled on first use.
//
//go:embed cl/*.cl
var clSources embed.FS

// clBuildOptions are the options every program is built with: strict IEEE
// arithmetic (never -cl-fast-relaxed-math: NaN must reach the loss, and
// sums must keep their order so a device gives equal bytes run after run).
const clBuildOptions = "-cl-std=CL1.2"

var (
	programsMu sync.Mutex
	programs   = map[programKey]*opencl.Program{}
)

type programKey struct {
	dev  *opencl.Device
	name string
}

// deviceProgram is program name (cl/NAME.cl) built for dev, once per
// device and process: PoCL and NVIDIA's compilers take from tens of
// milliseconds (cached) to seconds. Kernels are made from it per user
// (Program.Kernel), since setting a kernel's arguments is not safe from
// two goroutines at once.
func deviceProgram(dev *opencl.Device, name string) (*opencl.Program, error) {
	programsMu.Lock()
	defer programsMu.Unlock()
	k := programKey{dev, name}
	if p := programs[k]; p != nil {
		return p, nil
	}
	src, err := clSources.ReadFile("cl/" + name + ".cl")
	if err != nil {
		return nil, fmt.Errorf("device: no program %q: %w", name, err)
	}
	p, err := dev.Build(string(src), clBuildOptions)
	if err != nil {
		return nil, fmt.Errorf("device %s: building %s.cl: %w", dev.Info.Name, name, err)
	}
	programs[k] = p
	return p, nil
}
