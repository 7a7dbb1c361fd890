package ops

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/mkbench/mkbench/internal/opencl"
)

// ResidentStore is a backbone's parameters kept on its device for the
// whole of training, whatever the network: n master values, the
// optimizer's moments and the step's summed gradient (`real`: double
// where the device compiled cl_khr_fp64, else float32), the float32
// weights the network's kernels read, the gradient sums its training ops
// leave after each backward pass, the fixed-order sum of the gradient's
// squares, and the optimizers' updates (cl/adam.cl). A network's resident
// parameters (ConvResident, ResNetResident) give it their layout: which
// tensors, where each lies, how the host's tensors pack into it and how
// the float32 weights are made from the masters.
//
// The ops of a model's training graphs register their device cores
// (register): their forward passes read the weights, their backward
// passes leave their weight gradients in a sum buffer the store keeps
// for them, and GradNormSq adds those, core by core in registration
// order. The ops of its evaluation graphs register as readers: a pass
// gives its host values to readerWeights, which sends them only when they
// differ from the ones the weights were made from. Methods are called
// from one goroutine (the model's); the ops' passes, which may run on
// two, take mu.
type ResidentStore struct {
	dev    *opencl.Device
	fp64   bool
	n      int
	lens   []int    // the tensors' lengths, in the model's order
	ranges [][2]int // where each tensor lies in the layout: first value, count
	lay    residentLayout
	r      *resStoreRes

	mu      sync.Mutex
	cores   []*residentCore // the training ops' cores, in registration order
	graded  []bool          // whose gradient this step holds (set by backward)
	readers []*residentCore // the evaluation ops' cores
	order   []*opencl.Buffer

	// ahead says the masters were updated on the device since they last
	// crossed (Upload or Download): the host's copy is behind.
	ahead bool
	// snap is the host's tensors whose float32 the weights hold, when
	// snapOK: what the masters were uploaded from or downloaded into, so
	// that an evaluation on unchanged host values sends nothing and one on
	// changed values (whoever changed them) sends them first.
	snap   [][]float64
	snapOK bool

	h64 [3][]float64 // staging: masters, first and second moments, in the layout
	h32 []float32
	sq  [1]float64
	sq4 [1]float32
}

// residentLayout is what a network's resident parameters add to the
// store: packing the host's tensors (the model's order) into the layout
// and back, and writing the float32 weights from the masters.
type residentLayout interface {
	pack(dst []float64, ts [][]float64)
	unpack(src []float64, ts [][]float64)
	packWeights() error
}

// residentCore is what a device core (convDev, resDev) keeps of its
// registration: the store, its place among the store's cores (or
// readers), and its passes and their images since the last Passes.
type residentCore struct {
	res                    *ResidentStore
	seq                    int
	reader                 bool
	fwds, bwds, fwdN, bwdN int
}

// resStoreRes is what a ResidentStore holds on the device.
type resStoreRes struct {
	acc, part, final, adam, sgd, pack *opencl.Kernel
	p, m, v, g, parts, out            *opencl.Buffer // real
	w                                 *opencl.Buffer // float32
	sums                              []*opencl.Buffer
}

func (r *resStoreRes) release() {
	for _, k := range [...]*opencl.Kernel{r.acc, r.part, r.final, r.adam, r.sgd, r.pack} {
		k.Release()
	}
	for _, b := range append([]*opencl.Buffer{r.p, r.m, r.v, r.g, r.parts, r.out, r.w}, r.sums...) {
		b.Release()
	}
}

// resSumChunk is how many values one item of the norm's first pass sums:
// fixed, so the order of the sum depends on the parameter count only.
const resSumChunk = 4096

// newResidentStore allocates the store of the tensors of lens, laid out
// at ranges (together n values), with wLen float32 weights, on dev. Its
// values are undefined until Upload.
func newResidentStore(dev *opencl.Device, lay residentLayout, lens []int, ranges [][2]int, n, wLen int) (*ResidentStore, error) {
	prog, err := deviceProgram(dev, "adam")
	if err != nil {
		return nil, err
	}
	s := &ResidentStore{dev: dev, n: n, lens: lens, ranges: ranges, lay: lay, r: &resStoreRes{}}
	runtime.AddCleanup(s, (*resStoreRes).release, s.r)
	for _, kk := range []struct {
		k    **opencl.Kernel
		name string
	}{{&s.r.acc, "res_acc"}, {&s.r.part, "res_sumsq_part"}, {&s.r.final, "res_sumsq_final"}, {&s.r.adam, "res_adam"}, {&s.r.sgd, "res_sgd"}, {&s.r.pack, "res_pack"}} {
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
	// The moments and the gradient wait for the first training step (an
	// evaluation's model needs the masters and the weights alone).
	if err := s.ensure(&s.r.p, n); err != nil {
		return nil, err
	}
	if err := convDevEnsure[float32](dev, &s.r.w, wLen); err != nil {
		return nil, err
	}
	return s, nil
}

// FP64 says whether the masters and moments are double (cl_khr_fp64)
// rather than float32.
func (s *ResidentStore) FP64() bool { return s.fp64 }

// Device is the device the parameters live on.
func (s *ResidentStore) Device() *opencl.Device { return s.dev }

// register adds a core to the store: a training op's (its gradient sums
// then count in GradNormSq) or, with reader, an evaluation op's.
func (s *ResidentStore) register(c *residentCore, reader bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.res, c.reader = s, reader
	if reader {
		c.seq = len(s.readers)
		s.readers = append(s.readers, c)
		return
	}
	c.seq = len(s.cores)
	s.cores = append(s.cores, c)
	s.graded = append(s.graded, false)
}

// unregister undoes register for a core whose graph is being dropped (a
// varying episode's): the remaining cores keep their order, and a
// training core's gradient-sum buffer goes to the next core registered,
// so graphs made and dropped episode after episode allocate none.
func (s *ResidentStore) unregister(c *residentCore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.res != s {
		return
	}
	i := c.seq
	if c.reader {
		s.readers = append(s.readers[:i], s.readers[i+1:]...)
		for j := i; j < len(s.readers); j++ {
			s.readers[j].seq = j
		}
	} else {
		s.cores = append(s.cores[:i], s.cores[i+1:]...)
		s.graded = append(s.graded[:i], s.graded[i+1:]...)
		if i < len(s.r.sums) {
			b := s.r.sums[i]
			s.r.sums = append(append(s.r.sums[:i], s.r.sums[i+1:]...), b)
		}
		for j := i; j < len(s.cores); j++ {
			s.cores[j].seq = j
		}
	}
	c.res, c.reader = nil, false
}

// sumBuf is the buffer core seq leaves its gradient sums in until the
// step's GradNormSq: the n float32 values of the layout.
func (s *ResidentStore) sumBuf(seq int) (*opencl.Buffer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.r.sums) <= seq {
		s.r.sums = append(s.r.sums, nil)
	}
	if err := convDevEnsure[float32](s.dev, &s.r.sums[seq], s.n); err != nil {
		return nil, err
	}
	return s.r.sums[seq], nil
}

// markGraded records that core seq's gradient sums are this step's.
func (s *ResidentStore) markGraded(seq int) {
	s.mu.Lock()
	s.graded[seq] = true
	s.mu.Unlock()
}

// ClearGrads forgets the gradients the ops have left (a step that failed
// before its update): the next GradNormSq sums only what runs after.
func (s *ResidentStore) ClearGrads() {
	s.mu.Lock()
	clear(s.graded)
	s.mu.Unlock()
}

// Passes is, over the registered cores (training and evaluation), the
// forward and backward passes and the images they took since the last
// call (a test's count of what had to cross), and zeroes them.
func (s *ResidentStore) Passes() (fwd, bwd, fwdImages, bwdImages int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cs := range [2][]*residentCore{s.cores, s.readers} {
		for _, d := range cs {
			fwd, bwd, fwdImages, bwdImages = fwd+d.fwds, bwd+d.bwds, fwdImages+d.fwdN, bwdImages+d.bwdN
			d.fwds, d.bwds, d.fwdN, d.bwdN = 0, 0, 0, 0
		}
	}
	return
}

// Upload replaces the device's masters and moments with the host's:
// params, m and v each hold the network's resident tensors in the model's
// order; m or v nil leaves that moment as it is (SGD has no second
// moment, an evaluation none). Without fp64 the values are rounded to
// float32. The float32 weights follow.
func (s *ResidentStore) Upload(params, m, v [][]float64) error {
	if params == nil {
		return fmt.Errorf("resident: no parameters to upload")
	}
	for i, src := range [3][][]float64{params, m, v} {
		if err := checkTensors(resTensorKind[i], src, s.lens); err != nil {
			return err
		}
	}
	s.snapOK = false
	for i, src := range [3][][]float64{params, m, v} {
		if src == nil {
			continue
		}
		if i > 0 {
			if err := s.training(); err != nil {
				return err
			}
		}
		s.h64[i] = grow64(s.h64[i], s.n)
		s.lay.pack(s.h64[i], src)
		if err := s.write(*s.buf(i), s.h64[i]); err != nil {
			return err
		}
	}
	s.ahead = false
	if err := s.lay.packWeights(); err != nil {
		return err
	}
	s.setSnap(params)
	return nil
}

var resTensorKind = [3]string{"parameter", "first-moment", "second-moment"}

// Download copies the device's masters and moments into params, m and v
// (Upload's order; m or v nil: not read): the host's copy for a
// checkpoint, an evaluation or an export.
func (s *ResidentStore) Download(params, m, v [][]float64) error {
	if params == nil {
		return fmt.Errorf("resident: no host tensors to download the parameters into")
	}
	for i, dst := range [3][][]float64{params, m, v} {
		if err := checkTensors(resTensorKind[i], dst, s.lens); err != nil {
			return err
		}
	}
	for i, dst := range [3][][]float64{params, m, v} {
		if dst == nil {
			continue
		}
		if *s.buf(i) == nil {
			return fmt.Errorf("resident: no %s values on the device: nothing trained there", resTensorKind[i])
		}
		s.h64[i] = grow64(s.h64[i], s.n)
		if err := s.read(*s.buf(i), s.h64[i]); err != nil {
			return err
		}
		s.lay.unpack(s.h64[i], dst)
	}
	s.ahead = false
	s.setSnap(params)
	return nil
}

// setSnap records ts as the host's values the weights hold.
func (s *ResidentStore) setSnap(ts [][]float64) {
	if len(s.snap) != len(ts) {
		s.snap = make([][]float64, len(ts))
	}
	for i, t := range ts {
		s.snap[i] = append(s.snap[i][:0], t...)
	}
	s.snapOK = true
}

// readerWeights makes the float32 weights float32() of ts, the host's
// values an evaluation pass was given (the resident tensors, the model's
// order): nothing crosses when they are, bit for bit, the values the
// weights were made from; otherwise they go up as the masters (the host's
// are the truth: the next training step uploads the moments with them).
// With the masters ahead of the host's (updated on the device since they
// last came down) the host's values are stale, and the pass is refused
// rather than run on them.
func (s *ResidentStore) readerWeights(ts [][]float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ahead {
		return fmt.Errorf("resident: an evaluation on the host's parameters while the device's are ahead of them: the model's SyncHost must come first")
	}
	if s.snapOK && len(ts) == len(s.snap) {
		same := true
		for i, t := range ts {
			if !sameBits(t, s.snap[i]) {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	return s.Upload(ts, nil, nil)
}

// GradNormSq sums the gradients the ops left this step, core by core in
// registration order, into the step's gradient, and returns its sum of
// squares (gradNormSq: a fixed order). A core that ran no backward adds
// nothing; with none, the gradient is zero.
func (s *ResidentStore) GradNormSq() (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = s.order[:0]
	for i := range s.cores {
		if s.graded[i] {
			s.graded[i] = false
			s.order = append(s.order, s.r.sums[i])
		}
	}
	return s.gradNormSq(s.order)
}

// Adam updates every resident tensor (steps in Upload's order) with the
// gradient GradNormSq summed, then writes the float32 weights the next
// passes read. Nothing comes back.
func (s *ResidentStore) Adam(steps []AdamStep) error {
	return s.updateAll("Adam", len(steps), func(i, off, n int) error { return s.adam(off, n, steps[i]) })
}

// SGD is Adam's twin for SGD with momentum (the first moment being the
// velocity).
func (s *ResidentStore) SGD(steps []SGDStep) error {
	return s.updateAll("SGD", len(steps), func(i, off, n int) error { return s.sgd(off, n, steps[i]) })
}

// updateAll runs update on each resident tensor i (its values off…off+n)
// for an optimizer given steps steps, then writes the float32 weights.
func (s *ResidentStore) updateAll(what string, steps int, update func(i, off, n int) error) error {
	if steps != len(s.lens) {
		return fmt.Errorf("resident: %d %s steps for %d tensors", steps, what, len(s.lens))
	}
	s.snapOK = false
	for i, r := range s.ranges {
		if err := update(i, r[0], r[1]); err != nil {
			return err
		}
	}
	return s.lay.packWeights()
}

// buf is the device buffer of staging slot i: masters, M, V.
func (s *ResidentStore) buf(i int) **opencl.Buffer {
	return [3]**opencl.Buffer{&s.r.p, &s.r.m, &s.r.v}[i]
}

// ensure makes *b a buffer of n reals (once: the sizes never change).
func (s *ResidentStore) ensure(b **opencl.Buffer, n int) error {
	if s.fp64 {
		return convDevEnsure[float64](s.dev, b, n)
	}
	return convDevEnsure[float32](s.dev, b, n)
}

// training makes the buffers of the training steps: the moments, the
// gradient and the norm's partial sums.
func (s *ResidentStore) training() error {
	for _, b := range []struct {
		b **opencl.Buffer
		n int
	}{{&s.r.m, s.n}, {&s.r.v, s.n}, {&s.r.g, s.n}, {&s.r.parts, (s.n + resSumChunk - 1) / resSumChunk}, {&s.r.out, 1}} {
		if err := s.ensure(b.b, b.n); err != nil {
			return err
		}
	}
	return nil
}

func grow64(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func (s *ResidentStore) write(b *opencl.Buffer, src []float64) error {
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

func (s *ResidentStore) read(b *opencl.Buffer, dst []float64) error {
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
func (s *ResidentStore) gradNormSq(sums []*opencl.Buffer) (float64, error) {
	if err := s.training(); err != nil {
		return 0, err
	}
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
func (s *ResidentStore) adam(off, n int, st AdamStep) error {
	if s.r.g == nil || s.r.m == nil || s.r.v == nil {
		return fmt.Errorf("resident: an Adam update before any gradient or second moment")
	}
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
func (s *ResidentStore) sgd(off, n int, st SGDStep) error {
	if s.r.g == nil || s.r.m == nil {
		return fmt.Errorf("resident: an update before any gradient")
	}
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
func (s *ResidentStore) bits(x float64) uint64 {
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
