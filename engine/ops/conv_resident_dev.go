package ops

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/mkbench/mkbench/internal/opencl"
)

// ConvResident keeps a ConvSpec network's parameters on its device for
// the whole of training: the master weights and biases, the optimizer's
// moments and the step's summed gradient (a residentStore), and the
// float32 weights the conv kernels read. The ops of every training graph
// of one model share it (ConvNet.SetResident): their forward passes read
// its weights instead of uploading the host's, and their backward passes
// leave their weight gradients on the device for GradNormSq and the
// update (Adam or SGD), so that what crosses per step is the images, the
// features and their gradient, and the norm's one scalar. The ops of its
// evaluation graphs read the same weights (ConvNet.ReadResident) once
// the host's values are known to be theirs (readerWeights).
//
// Everything is kept in conv_dev.go's layout, block by block: k1×F rows
// (row tap·cin + c, the bias last), the layout the weight gradients come
// out in. The host's parameters are packed into it on Upload and
// unpacked on Download. Methods are called from one goroutine (the
// model's); the ops' passes, which may run on two, only mark their
// gradients (graded).
type ConvResident struct {
	*residentStore
	spec   ConvSpec
	ls     []convLayer
	lens   []int // the tensors' lengths, in the model's order
	partOf []int // block l's first value
	wOff   []int // block l's wt in w (wrot follows for l ≥ 1)
	conv   *convResRes

	mu      sync.Mutex
	cores   []*convDev // the training ops' device cores, in registration order
	graded  []bool     // whose gradient this step holds (set by backward)
	readers []*convDev // the evaluation ops' device cores
	order   []*opencl.Buffer

	// snap is the host's tensors (the model's order) whose float32 the
	// weights w hold, when snapOK: what the masters were uploaded from or
	// downloaded into, so that an evaluation on unchanged host values
	// sends nothing, and one on changed values (whoever changed them)
	// sends them first.
	snap   [][]float64
	snapOK bool
}

// convResRes is what a ConvResident holds on the device besides its
// store: the packing kernel, the float32 weights and the gradient sums of
// its cores (sums[i] is cores[i]'s; a released core's goes to the next
// core registered, so graphs made and dropped episode after episode
// allocate none).
type convResRes struct {
	pack *opencl.Kernel
	w    *opencl.Buffer // float32
	sums []*opencl.Buffer
}

func (r *convResRes) release() {
	r.pack.Release()
	r.w.Release()
	for _, b := range r.sums {
		b.Release()
	}
}

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
	c := &ConvResident{spec: spec, ls: spec.layers(), conv: &convResRes{}}
	runtime.AddCleanup(c, (*convResRes).release, c.conv)
	nf, n, wLen := spec.Filters, 0, 0
	for l, ly := range c.ls {
		c.partOf = append(c.partOf, n)
		n += ly.k1 * nf
		c.wOff = append(c.wOff, wLen)
		wLen += ly.k1 * nf
		if l > 0 {
			wLen += 9 * nf * ly.cin
		}
		c.lens = append(c.lens, nf*spec.FanIn(l), nf)
	}
	if c.conv.pack, err = prog.Kernel("res_pack"); err != nil {
		return nil, err
	}
	if c.residentStore, err = newResidentStore(dev, prog, n); err != nil {
		return nil, err
	}
	if err := convDevEnsure[float32](dev, &c.conv.w, wLen); err != nil {
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
		if err := c.attach(op.kern, false); err != nil {
			return fmt.Errorf("conv: op %d: %w", op.id, err)
		}
	}
	return nil
}

// ReadResident makes every op the net has applied so far, in a graph that
// takes no gradient (an evaluation's, a display's), read its weights from
// c: a forward pass checks that the host's values it is given are the
// ones c's weights were made from (readerWeights), and sends them first
// when they are not.
func (n *ConvNet) ReadResident(c *ConvResident) error {
	for _, op := range n.ops {
		if err := c.attach(op.kern, true); err != nil {
			return fmt.Errorf("conv: op %d: %w", op.id, err)
		}
	}
	return nil
}

// attach makes k's device core read c's weights, and, unless reader,
// leave its gradients to c; once more does nothing.
func (c *ConvResident) attach(k *ConvKernel, reader bool) error {
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
	defer c.mu.Unlock()
	k.dev.res, k.dev.reader = c, reader
	if reader {
		k.dev.seq = len(c.readers)
		c.readers = append(c.readers, k.dev)
		return nil
	}
	k.dev.seq = len(c.cores)
	c.cores = append(c.cores, k.dev)
	c.graded = append(c.graded, false)
	return nil
}

// ReleaseResident undoes SetResident or ReadResident for the net's ops,
// whose graph is being dropped (a varying episode's): c stops holding
// their device cores, the remaining ones keep their order, and a released
// training core's gradient sums go to the next core registered.
func (n *ConvNet) ReleaseResident(c *ConvResident) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range n.ops {
		d := op.kern.dev
		if d == nil || d.res != c {
			continue
		}
		i := d.seq
		if d.reader {
			c.readers = append(c.readers[:i], c.readers[i+1:]...)
			for j := i; j < len(c.readers); j++ {
				c.readers[j].seq = j
			}
			d.res, d.reader = nil, false
			continue
		}
		c.cores = append(c.cores[:i], c.cores[i+1:]...)
		c.graded = append(c.graded[:i], c.graded[i+1:]...)
		if i < len(c.conv.sums) {
			b := c.conv.sums[i]
			c.conv.sums = append(c.conv.sums[:i], c.conv.sums[i+1:]...)
			c.conv.sums = append(c.conv.sums, b)
		}
		for j := i; j < len(c.cores); j++ {
			c.cores[j].seq = j
		}
		d.res = nil
	}
}

// sumBuf is the buffer core seq leaves its gradient sums in until the
// step's GradNormSq: the c.n float32 values of conv_dev.go's layout.
func (c *ConvResident) sumBuf(seq int) (*opencl.Buffer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.conv.sums) <= seq {
		c.conv.sums = append(c.conv.sums, nil)
	}
	if err := convDevEnsure[float32](c.dev, &c.conv.sums[seq], c.n); err != nil {
		return nil, err
	}
	return c.conv.sums[seq], nil
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

// Passes is, over the registered ops (training and evaluation), the
// forward and backward passes and the images they took since the last
// call (a test's count of what had to cross), and zeroes them.
func (c *ConvResident) Passes() (fwd, bwd, fwdImages, bwdImages int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range append(c.cores[:len(c.cores):len(c.cores)], c.readers...) {
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
// (block 0's weights, its bias, block 1's weights, …); m or v nil leaves
// that moment as it is (SGD has no second moment, an evaluation none).
// Without fp64 the values are rounded to float32. The float32 weights
// follow.
func (c *ConvResident) Upload(params, m, v [][]float64) error {
	if params == nil {
		return fmt.Errorf("conv: no resident parameters to upload")
	}
	for i, src := range [3][][]float64{params, m, v} {
		if err := checkTensors([3]string{"parameter", "first-moment", "second-moment"}[i], src, c.lens); err != nil {
			return fmt.Errorf("conv: %w", err)
		}
	}
	for i, src := range [3][][]float64{params, m, v} {
		if src == nil {
			continue
		}
		c.h64[i] = grow64(c.h64[i], c.n)
		for l := range c.ls {
			c.packPart(c.h64[i][c.partOf[l]:], src[2*l], src[2*l+1], l)
		}
		if err := c.write(c.buf(i), c.h64[i]); err != nil {
			c.snapOK = false
			return err
		}
	}
	c.ahead = false
	if err := c.packWeights(); err != nil {
		c.snapOK = false
		return err
	}
	c.setSnap(params)
	return nil
}

// Download copies the device's masters and moments into params, m and v
// (Upload's order; m or v nil: not read): the host's copy for a
// checkpoint, an evaluation or an export.
func (c *ConvResident) Download(params, m, v [][]float64) error {
	if params == nil {
		return fmt.Errorf("conv: no host tensors to download the resident parameters into")
	}
	for i, dst := range [3][][]float64{params, m, v} {
		if err := checkTensors([3]string{"parameter", "first-moment", "second-moment"}[i], dst, c.lens); err != nil {
			return fmt.Errorf("conv: %w", err)
		}
	}
	for i, dst := range [3][][]float64{params, m, v} {
		if dst == nil {
			continue
		}
		c.h64[i] = grow64(c.h64[i], c.n)
		if err := c.read(c.buf(i), c.h64[i]); err != nil {
			return err
		}
		for l := range c.ls {
			c.unpackPart(c.h64[i][c.partOf[l]:], dst[2*l], dst[2*l+1], l)
		}
	}
	c.ahead = false
	c.setSnap(params)
	return nil
}

// setSnap records ts as the host's values the weights hold.
func (c *ConvResident) setSnap(ts [][]float64) {
	if len(c.snap) != len(ts) {
		c.snap = make([][]float64, len(ts))
	}
	for i, t := range ts {
		c.snap[i] = append(c.snap[i][:0], t...)
	}
	c.snapOK = true
}

// readerWeights makes the float32 weights float32() of ws and bs, the
// host's values an evaluation pass was given: nothing crosses when they
// are, bit for bit, the values the weights were made from; otherwise they
// go up as the masters (the host's are the truth: the next training step
// uploads the moments with them). With the masters ahead of the host's
// (updated on the device since they last came down) the host's values
// are stale, and the pass is refused rather than run on them.
func (c *ConvResident) readerWeights(ws, bs [][]float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ahead {
		return fmt.Errorf("conv: an evaluation on the host's parameters while the device's are ahead of them: the model's SyncHost must come first")
	}
	if c.snapOK && len(ws) == len(c.ls) && len(bs) == len(c.ls) {
		same := true
		for l := range c.ls {
			if !sameBits(ws[l], c.snap[2*l]) || !sameBits(bs[l], c.snap[2*l+1]) {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	ts := make([][]float64, 0, 2*len(ws))
	for l := range ws {
		ts = append(ts, ws[l])
		if l < len(bs) {
			ts = append(ts, bs[l])
		}
	}
	return c.Upload(ts, nil, nil)
}

// GradNormSq sums the gradients the ops left this step, op by op in
// registration order, into the step's gradient, and returns its sum of
// squares (residentStore.gradNormSq: a fixed order). An op that ran no
// backward adds nothing; with none, the gradient is zero.
func (c *ConvResident) GradNormSq() (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order = c.order[:0]
	for i := range c.cores {
		if c.graded[i] {
			c.graded[i] = false
			c.order = append(c.order, c.conv.sums[i])
		}
	}
	return c.gradNormSq(c.order)
}

// tensorRange is where tensor i (Upload's order) lies in the store.
func (c *ConvResident) tensorRange(i int) (off, n int) {
	l, nf := i/2, c.spec.Filters
	off, n = c.partOf[l], (c.ls[l].k1-1)*nf
	if i%2 == 1 {
		off, n = off+n, nf
	}
	return off, n
}

// Adam updates every resident tensor (steps in Upload's order) with the
// gradient GradNormSq summed, then writes the float32 weights the next
// passes read. Nothing comes back.
func (c *ConvResident) Adam(steps []AdamStep) error {
	if len(steps) != len(c.lens) {
		return fmt.Errorf("conv: %d Adam steps for %d resident tensors", len(steps), len(c.lens))
	}
	c.snapOK = false
	for i, s := range steps {
		off, n := c.tensorRange(i)
		if err := c.adam(off, n, s); err != nil {
			return err
		}
	}
	return c.packWeights()
}

// SGD is Adam's twin for SGD with momentum (the first moment being the
// velocity).
func (c *ConvResident) SGD(steps []SGDStep) error {
	if len(steps) != len(c.lens) {
		return fmt.Errorf("conv: %d SGD steps for %d resident tensors", len(steps), len(c.lens))
	}
	c.snapOK = false
	for i, s := range steps {
		off, n := c.tensorRange(i)
		if err := c.sgd(off, n, s); err != nil {
			return err
		}
	}
	return c.packWeights()
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
		a := convArgs{k: c.conv.pack}
		a.buf(c.r.p).int(c.partOf[l]).buf(c.conv.w).int(c.wOff[l]).int(ly.k1).int(nf).int(ly.cin)
		if err := a.launch(n); err != nil {
			return err
		}
	}
	return nil
}
