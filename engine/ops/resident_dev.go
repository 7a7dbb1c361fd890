package ops

import (
	"fmt"
	"math"
	"runtime"

	"github.com/mkbench/mkbench/internal/opencl"
)

// residentStore is the part of a backbone's resident parameters that
// does not depend on the network: n master values, the optimizer's
// moments and the step's summed gradient on the device (`real`: double
// where the device compiled cl_khr_fp64, else float32), the fixed-order
// sum of the gradient's squares, and the optimizers' updates of ranges of
// them (cl/adam.cl). A network's resident parameters (ConvResident) lay
// their tensors out in it, pack the float32 weights its kernels read from
// the masters, and say which gradient sums a step adds.
type residentStore struct {
	dev  *opencl.Device
	fp64 bool
	n    int
	r    *resStoreRes

	// ahead says the masters were updated on the device since they last
	// crossed (Upload or Download): the host's copy is behind.
	ahead bool

	h64 [3][]float64 // staging: masters, first and second moments, in the device's layout
	h32 []float32
	sq  [1]float64
	sq4 [1]float32
}

// resStoreRes is what a residentStore holds on the device.
type resStoreRes struct {
	acc, part, final, adam, sgd *opencl.Kernel
	p, m, v, g, parts, out      *opencl.Buffer // real
}

func (r *resStoreRes) release() {
	for _, k := range [...]*opencl.Kernel{r.acc, r.part, r.final, r.adam, r.sgd} {
		k.Release()
	}
	for _, b := range [...]*opencl.Buffer{r.p, r.m, r.v, r.g, r.parts, r.out} {
		b.Release()
	}
}

// resSumChunk is how many values one item of the norm's first pass sums:
// fixed, so the order of the sum depends on the parameter count only.
const resSumChunk = 4096

// newResidentStore allocates n resident values on dev, from prog (the
// "adam" program). Its values are undefined until uploaded.
func newResidentStore(dev *opencl.Device, prog *opencl.Program, n int) (*residentStore, error) {
	s := &residentStore{dev: dev, n: n, r: &resStoreRes{}}
	runtime.AddCleanup(s, (*resStoreRes).release, s.r)
	var err error
	for _, kk := range []struct {
		k    **opencl.Kernel
		name string
	}{{&s.r.acc, "res_acc"}, {&s.r.part, "res_sumsq_part"}, {&s.r.final, "res_sumsq_final"}, {&s.r.adam, "res_adam"}, {&s.r.sgd, "res_sgd"}} {
		if *kk.k, err = prog.Kernel(kk.name); err != nil {
			return nil, err
		}
	}
	// Which real the program compiled decides the buffers' type: the
	// compiler's cl_khr_fp64, not the host's reading of the extensions.
	size, err := prog.Kernel("res_real_size")
	if err != nil {
		return nil, err
	}
	defer size.Release()
	sb, err := opencl.Alloc[int32](dev, 1)
	if err != nil {
		return nil, err
	}
	defer sb.Release()
	var got [1]int32
	if err = size.SetBuffer(0, sb); err == nil {
		if err = size.Launch([]int{1}, nil); err == nil {
			err = opencl.Read(sb, 0, got[:])
		}
	}
	if err != nil {
		return nil, err
	}
	s.fp64 = got[0] == 8
	np := (n + resSumChunk - 1) / resSumChunk
	for _, b := range []struct {
		b **opencl.Buffer
		n int
	}{{&s.r.p, n}, {&s.r.m, n}, {&s.r.v, n}, {&s.r.g, n}, {&s.r.parts, np}, {&s.r.out, 1}} {
		if s.fp64 {
			err = convDevEnsure[float64](dev, b.b, b.n)
		} else {
			err = convDevEnsure[float32](dev, b.b, b.n)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// buf is the device buffer of staging slot i: masters, M, V.
func (s *residentStore) buf(i int) *opencl.Buffer {
	return [3]*opencl.Buffer{s.r.p, s.r.m, s.r.v}[i]
}

func grow64(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func (s *residentStore) write(b *opencl.Buffer, src []float64) error {
	if s.fp64 {
		return opencl.Write(b, 0, src)
	}
	if cap(s.h32) < len(src) {
		s.h32 = make([]float32, len(src))
	}
	h := s.h32[:len(src)]
	for i, x := range src {
		h[i] = float32(x)
	}
	return opencl.Write(b, 0, h)
}

func (s *residentStore) read(b *opencl.Buffer, dst []float64) error {
	if s.fp64 {
		return opencl.Read(b, 0, dst)
	}
	if cap(s.h32) < len(dst) {
		s.h32 = make([]float32, len(dst))
	}
	h := s.h32[:len(dst)]
	if err := opencl.Read(b, 0, h); err != nil {
		return err
	}
	for i, x := range h {
		dst[i] = float64(x)
	}
	return nil
}

// gradNormSq sums the gradient sums of a step, in the order given, into
// the step's gradient, and returns its sum of squares (fixed order:
// chunks of resSumChunk, then the chunks). With none the gradient is
// zero. The scalar is the only value that comes down.
func (s *residentStore) gradNormSq(sums []*opencl.Buffer) (float64, error) {
	for i, b := range sums {
		a := convArgs{k: s.r.acc}
		a.buf(s.r.g).buf(b).int(s.n).flag(i == 0)
		if err := a.launch(s.n); err != nil {
			return 0, err
		}
	}
	if len(sums) == 0 {
		if err := s.r.g.Zero(); err != nil {
			return 0, err
		}
	}
	np := s.r.parts.Len()
	a := convArgs{k: s.r.part}
	a.buf(s.r.g).int(s.n).int(resSumChunk).buf(s.r.parts)
	if err := a.launch(np); err != nil {
		return 0, err
	}
	a = convArgs{k: s.r.final}
	a.buf(s.r.parts).int(np).buf(s.r.out)
	if err := a.launch(1); err != nil {
		return 0, err
	}
	if s.fp64 {
		err := opencl.Read(s.r.out, 0, s.sq[:])
		return s.sq[0], err
	}
	err := opencl.Read(s.r.out, 0, s.sq4[:])
	return float64(s.sq4[0]), err
}

// AdamStep is the update of one resident tensor: the gradient's clipping
// scale, the step (learning rate × scale × bias corrections, as
// Optimizer.Step gives adamUpdate), Adam's β₁, β₂ and ε, and the decoupled
// decay's factor 1 − lr·λ when Decay.
type AdamStep struct {
	Scale, Step, B1, B2, Eps, Factor float64
	Decay                            bool
}

// SGDStep is the update of one resident tensor by SGD with momentum, as
// Optimizer.Step gives sgdUpdate: the gradient's clipping scale, the
// learning rate (× the tensor's scale), the momentum, and the decoupled
// decay's factor when Decay.
type SGDStep struct {
	Scale, LR, Momentum, Factor float64
	Decay                       bool
}

// adam updates the n values from off with the step's gradient.
func (s *residentStore) adam(off, n int, st AdamStep) error {
	a := convArgs{k: s.r.adam}
	a.buf(s.r.p).buf(s.r.g).buf(s.r.m).buf(s.r.v).int(off)
	for _, x := range [...]float64{st.Scale, st.Step, st.B1, st.B2, st.Eps, st.Factor} {
		a.u64(s.bits(x))
	}
	a.flag(st.Decay)
	s.ahead = true
	return a.launch(n)
}

// sgd updates the n values from off with the step's gradient.
func (s *residentStore) sgd(off, n int, st SGDStep) error {
	a := convArgs{k: s.r.sgd}
	a.buf(s.r.p).buf(s.r.g).buf(s.r.m).int(off)
	for _, x := range [...]float64{st.Scale, st.LR, st.Momentum, st.Factor} {
		a.u64(s.bits(x))
	}
	a.flag(st.Decay)
	s.ahead = true
	return a.launch(n)
}

// bits is a host scalar as the kernels' SCALAR reads it.
func (s *residentStore) bits(x float64) uint64 {
	if s.fp64 {
		return math.Float64bits(x)
	}
	return uint64(math.Float32bits(float32(x)))
}

// checkTensors checks that ts (nil: not given) holds the tensors of
// lens.
func checkTensors(what string, ts [][]float64, lens []int) error {
	if ts == nil {
		return nil
	}
	if len(ts) != len(lens) {
		return fmt.Errorf("%d resident %s tensors, want %d", len(ts), what, len(lens))
	}
	for i, t := range ts {
		if len(t) != lens[i] {
			return fmt.Errorf("resident %s tensor %d has %d values, want %d", what, i, len(t), lens[i])
		}
	}
	return nil
}
