package ops

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/mkbench/mkbench/internal/opencl"
)

// ConvResident keeps a ConvSpec network's parameters on its device for
// the whole of training: the master weights and biases, Adam's moments and
// the step's summed gradient (double where the device has cl_khr_fp64,
// else float32), and the float32 weights the conv kernels read. The ops of
// every graph of one model share it (ConvNet.SetResident): their forward
// passes read its weights instead of uploading the host's, and their
// backward passes leave their weight gradients on the device for
// GradNormSq and Adam, so that what crosses per step is the images, the
// features and their gradient, and the norm's one scalar.
//
// Everything is kept in conv_dev.go's layout, block by block: k1×F rows
// (row tap·cin + c, the bias last), the layout the weight gradients come
// out in. The host's parameters are packed into it on Upload and
// unpacked on Download. Methods are called from one goroutine (the
// model's); the ops' passes, which may run on two, only mark their
// gradients (graded).
type ConvResident struct {
	dev    *opencl.Device
	spec   ConvSpec
	ls     []convLayer
	fp64   bool
	n      int   // values, all blocks
	partOf []int // block l's first value
	wOff   []int // block l's wt in w (wrot follows for l ≥ 1)
	r      *convResRes

	mu     sync.Mutex
	cores  []*convDev // the registered ops' device cores, in registration order
	graded []bool     // whose gradient this step holds (set by backward)

	h64 [3][]float64 // staging: masters, M, V in the device layout
	h32 []float32
	sq  [1]float64
	sq4 [1]float32
}

// convResRes is what a ConvResident holds on the device.
type convResRes struct {
	acc, part, final, adam, pack *opencl.Kernel
	p, m, v, g, parts, out       *opencl.Buffer // real
	w                            *opencl.Buffer // float32
}

func (r *convResRes) release() {
	for _, k := range [...]*opencl.Kernel{r.acc, r.part, r.final, r.adam, r.pack} {
		k.Release()
	}
	for _, b := range [...]*opencl.Buffer{r.p, r.m, r.v, r.g, r.parts, r.out, r.w} {
		b.Release()
	}
}

// resSumChunk is how many values one item of the norm's first pass sums:
// fixed, so the order of the sum depends on the parameter count only.
const resSumChunk = 4096

// NewConvResident allocates the resident parameters of spec on dev. Its
// values are undefined until Upload.
func NewConvResident(dev *opencl.Device, spec ConvSpec) (*ConvResident, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	prog, err := deviceProgram(dev, "adam")
	if err != nil {
		return nil, err
	}
	c := &ConvResident{dev: dev, spec: spec, ls: spec.layers(), r: &convResRes{}}
	runtime.AddCleanup(c, (*convResRes).release, c.r)
	nf, wLen := spec.Filters, 0
	for l, ly := range c.ls {
		c.partOf = append(c.partOf, c.n)
		c.n += ly.k1 * nf
		c.wOff = append(c.wOff, wLen)
		wLen += ly.k1 * nf
		if l > 0 {
			wLen += 9 * nf * ly.cin
		}
	}
	for _, kk := range []struct {
		k    **opencl.Kernel
		name string
	}{{&c.r.acc, "res_acc"}, {&c.r.part, "res_sumsq_part"}, {&c.r.final, "res_sumsq_final"}, {&c.r.adam, "res_adam"}, {&c.r.pack, "res_pack"}} {
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
	c.fp64 = got[0] == 8
	np := (c.n + resSumChunk - 1) / resSumChunk
	for _, b := range []struct {
		b **opencl.Buffer
		n int
	}{{&c.r.p, c.n}, {&c.r.m, c.n}, {&c.r.v, c.n}, {&c.r.g, c.n}, {&c.r.parts, np}, {&c.r.out, 1}} {
		if c.fp64 {
			err = convDevEnsure[float64](dev, b.b, b.n)
		} else {
			err = convDevEnsure[float32](dev, b.b, b.n)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := convDevEnsure[float32](dev, &c.r.w, wLen); err != nil {
		return nil, err
	}
	return c, nil
}

// FP64 says whether the masters and moments are double (cl_khr_fp64)
// rather than float32.
func (c *ConvResident) FP64() bool { return c.fp64 }

// Device is the device the parameters live on.
func (c *ConvResident) Device() *opencl.Device { return c.dev }

// SetResident makes every op the net has applied so far read its weights
// from c and leave its weight gradients there (ConvResident). Call it
// after the graph is built and before its first run; ops whose kernel is
// not on c's device stay as they are (and are reported).
func (n *ConvNet) SetResident(c *ConvResident) error {
	for _, op := range n.ops {
		if err := c.attach(op.kern); err != nil {
			return fmt.Errorf("conv: op %d: %w", op.id, err)
		}
	}
	return nil
}

// attach makes k's device core read c's weights and leave its gradients
// to c; once more does nothing.
func (c *ConvResident) attach(k *ConvKernel) error {
	if k.spec != c.spec {
		return fmt.Errorf("resident parameters of another network")
	}
	if k.device != c.dev || k.f64 || k.path != convPathAuto {
		return fmt.Errorf("the kernel does not run on %s: its parameters cannot be resident there", c.dev.Info.Name)
	}
	if k.dev == nil {
		d, err := newConvDev(k.device, k.spec)
		if err != nil {
			return err
		}
		k.dev = d
	}
	if k.dev.res == c {
		return nil
	}
	c.mu.Lock()
	k.dev.res, k.dev.seq = c, len(c.cores)
	c.cores = append(c.cores, k.dev)
	c.graded = append(c.graded, false)
	c.mu.Unlock()
	return nil
}

// ReleaseResident undoes SetResident for the net's ops, whose graph is
// being dropped (a varying episode's): c stops holding their device cores,
// and the remaining ops keep their order.
func (n *ConvNet) ReleaseResident(c *ConvResident) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range n.ops {
		d := op.kern.dev
		if d == nil || d.res != c {
			continue
		}
		i := d.seq
		c.cores = append(c.cores[:i], c.cores[i+1:]...)
		c.graded = append(c.graded[:i], c.graded[i+1:]...)
		for j := i; j < len(c.cores); j++ {
			c.cores[j].seq = j
		}
		d.res = nil
	}
}

// markGraded records that core seq's gradient sums are this step's.
func (c *ConvResident) markGraded(seq int) {
	c.mu.Lock()
	c.graded[seq] = true
	c.mu.Unlock()
}

// ClearGrads forgets the gradients the ops have left (a step that failed
// before its update): the next GradNormSq sums only what runs after.
func (c *ConvResident) ClearGrads() {
	c.mu.Lock()
	clear(c.graded)
	c.mu.Unlock()
}

// Passes is, over the registered ops, the forward and backward passes and
// the images they took since the last call (a test's count of what had
// to cross), and zeroes them.
func (c *ConvResident) Passes() (fwd, bwd, fwdImages, bwdImages int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.cores {
		fwd, bwd, fwdImages, bwdImages = fwd+d.fwds, bwd+d.bwds, fwdImages+d.fwdN, bwdImages+d.bwdN
		d.fwds, d.bwds, d.fwdN, d.bwdN = 0, 0, 0, 0
	}
	return
}

// packPart writes block l's weights w (Filters × FanIn, W[f][c·9 + tap])
// and bias b into dst, the block's k1×F rows.
func (c *ConvResident) packPart(dst, w, b []float64, l int) {
	nf, cin := c.spec.Filters, c.ls[l].cin
	for f := 0; f < nf; f++ {
		for ch := 0; ch < cin; ch++ {
			for tap := 0; tap < 9; tap++ {
				dst[(tap*cin+ch)*nf+f] = w[f*9*cin+ch*9+tap]
			}
		}
		dst[9*cin*nf+f] = b[f]
	}
}

func (c *ConvResident) unpackPart(src, w, b []float64, l int) {
	nf, cin := c.spec.Filters, c.ls[l].cin
	for f := 0; f < nf; f++ {
		for ch := 0; ch < cin; ch++ {
			for tap := 0; tap < 9; tap++ {
				w[f*9*cin+ch*9+tap] = src[(tap*cin+ch)*nf+f]
			}
		}
		b[f] = src[9*cin*nf+f]
	}
}

// Upload replaces the device's masters and moments with the host's:
// params, m and v each hold the network's tensors in the model's order
// (block 0's weights, its bias, block 1's weights, …). Without fp64 the
// values are rounded to float32. The float32 weights follow.
func (c *ConvResident) Upload(params, m, v [][]float64) error {
	L := len(c.ls)
	for i, src := range [3][][]float64{params, m, v} {
		if len(src) != 2*L {
			return fmt.Errorf("conv: %d resident tensors, want %d", len(src), 2*L)
		}
		c.h64[i] = grow64(c.h64[i], c.n)
		for l := range L {
			if len(src[2*l]) != c.spec.Filters*c.spec.FanIn(l) || len(src[2*l+1]) != c.spec.Filters {
				return fmt.Errorf("conv: resident block %d has %d weights and %d biases, want %d and %d",
					l, len(src[2*l]), len(src[2*l+1]), c.spec.Filters*c.spec.FanIn(l), c.spec.Filters)
			}
			c.packPart(c.h64[i][c.partOf[l]:], src[2*l], src[2*l+1], l)
		}
		if err := c.write([3]*opencl.Buffer{c.r.p, c.r.m, c.r.v}[i], c.h64[i]); err != nil {
			return err
		}
	}
	return c.packWeights()
}

func grow64(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func (c *ConvResident) write(b *opencl.Buffer, src []float64) error {
	if c.fp64 {
		return opencl.Write(b, 0, src)
	}
	if cap(c.h32) < len(src) {
		c.h32 = make([]float32, len(src))
	}
	h := c.h32[:len(src)]
	for i, x := range src {
		h[i] = float32(x)
	}
	return opencl.Write(b, 0, h)
}

func (c *ConvResident) read(b *opencl.Buffer, dst []float64) error {
	if c.fp64 {
		return opencl.Read(b, 0, dst)
	}
	if cap(c.h32) < len(dst) {
		c.h32 = make([]float32, len(dst))
	}
	h := c.h32[:len(dst)]
	if err := opencl.Read(b, 0, h); err != nil {
		return err
	}
	for i, x := range h {
		dst[i] = float64(x)
	}
	return nil
}

// Download copies the device's masters and moments into params, m and v
// (Upload's order): the host's copy for a checkpoint, an evaluation or an
// export.
func (c *ConvResident) Download(params, m, v [][]float64) error {
	L := len(c.ls)
	for i, dst := range [3][][]float64{params, m, v} {
		if len(dst) != 2*L {
			return fmt.Errorf("conv: %d resident tensors, want %d", len(dst), 2*L)
		}
		c.h64[i] = grow64(c.h64[i], c.n)
		if err := c.read([3]*opencl.Buffer{c.r.p, c.r.m, c.r.v}[i], c.h64[i]); err != nil {
			return err
		}
		for l := range L {
			c.unpackPart(c.h64[i][c.partOf[l]:], dst[2*l], dst[2*l+1], l)
		}
	}
	return nil
}

// GradNormSq sums the gradients the ops left this step, op by op in
// registration order, into the step's gradient, and returns its sum of
// squares (fixed order: chunks of resSumChunk, then the chunks). An op
// that ran no backward adds nothing; with none, the gradient is zero. The
// scalar is the only value that comes down.
func (c *ConvResident) GradNormSq() (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := true
	for i, d := range c.cores {
		if !c.graded[i] {
			continue
		}
		c.graded[i] = false
		a := convArgs{k: c.r.acc}
		a.buf(c.r.g)
		a.buf(d.r.sum)
		a.int(c.n)
		a.int(convBool(first))
		if err := a.launch(c.n); err != nil {
			return 0, err
		}
		first = false
	}
	if first {
		if err := c.r.g.Zero(); err != nil {
			return 0, err
		}
	}
	np := c.r.parts.Len()
	a := convArgs{k: c.r.part}
	a.buf(c.r.g)
	a.int(c.n)
	a.int(resSumChunk)
	a.buf(c.r.parts)
	if err := a.launch(np); err != nil {
		return 0, err
	}
	a = convArgs{k: c.r.final}
	a.buf(c.r.parts)
	a.int(np)
	a.buf(c.r.out)
	if err := a.launch(1); err != nil {
		return 0, err
	}
	if c.fp64 {
		err := opencl.Read(c.r.out, 0, c.sq[:])
		return c.sq[0], err
	}
	err := opencl.Read(c.r.out, 0, c.sq4[:])
	return float64(c.sq4[0]), err
}

// AdamStep is the update of one resident tensor: the gradient's clipping
// scale, the step (learning rate × scale × bias corrections, as
// Optimizer.Step gives adamUpdate), Adam's β₁, β₂ and ε, and the decoupled
// decay's factor 1 − lr·λ when Decay.
type AdamStep struct {
	Scale, Step, B1, B2, Eps, Factor float64
	Decay                            bool
}

// Adam updates every resident tensor (steps in Upload's order) with the
// gradient GradNormSq summed, then writes the float32 weights the next
// passes read. Nothing comes back.
func (c *ConvResident) Adam(steps []AdamStep) error {
	L, nf := len(c.ls), c.spec.Filters
	if len(steps) != 2*L {
		return fmt.Errorf("conv: %d Adam steps for %d resident tensors", len(steps), 2*L)
	}
	for i, s := range steps {
		l := i / 2
		off, n := c.partOf[l], (c.ls[l].k1-1)*nf
		if i%2 == 1 {
			off, n = off+n, nf
		}
		a := convArgs{k: c.r.adam}
		a.buf(c.r.p)
		a.buf(c.r.g)
		a.buf(c.r.m)
		a.buf(c.r.v)
		a.int(off)
		for _, x := range [...]float64{s.Scale, s.Step, s.B1, s.B2, s.Eps, s.Factor} {
			a.u64(c.bits(x))
		}
		a.int(convBool(s.Decay))
		if err := a.launch(n); err != nil {
			return err
		}
	}
	return c.packWeights()
}

// bits is a host scalar as the kernels' SCALAR reads it.
func (c *ConvResident) bits(x float64) uint64 {
	if c.fp64 {
		return math.Float64bits(x)
	}
	return uint64(math.Float32bits(float32(x)))
}

// packWeights writes the float32 weights (wt, and wrot past block 0) of
// every block from the masters.
func (c *ConvResident) packWeights() error {
	nf := c.spec.Filters
	for l, ly := range c.ls {
		n := ly.k1 * nf
		if l > 0 {
			n += 9 * nf * ly.cin
		}
		a := convArgs{k: c.r.pack}
		a.buf(c.r.p)
		a.int(c.partOf[l])
		a.buf(c.r.w)
		a.int(c.wOff[l])
		a.int(ly.k1)
		a.int(nf)
		a.int(ly.cin)
		if err := a.launch(n); err != nil {
			return err
		}
	}
	return nil
}
