package ops

import (
	"fmt"

	"github.com/mkbench/mkbench/internal/opencl"
)

// ConvResident is a ConvSpec network's parameters resident on its device
// (a ResidentStore, whose rules it follows): the weights and biases of
// every block, laid out as conv_dev.go keeps them, block by block: k1×F
// rows (row tap·cin + c, the bias last), the layout the weight gradients
// come out in. The host's parameters are packed into it on Upload and
// unpacked on Download; the float32 weights are each block's wt and,
// past block 0, its rotated filters wrot (res_pack).
type ConvResident struct {
	*ResidentStore
	spec   ConvSpec
	ls     []convLayer
	partOf []int // block l's first value
	wOff   []int // block l's wt in w (wrot follows for l ≥ 1)
}

// NewConvResident allocates the resident parameters of spec on dev. Its
// values are undefined until Upload.
func NewConvResident(dev *opencl.Device, spec ConvSpec) (*ConvResident, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	c := &ConvResident{spec: spec, ls: spec.layers()}
	nf, n, wLen := spec.Filters, 0, 0
	var lens []int
	var ranges [][2]int
	for l, ly := range c.ls {
		c.partOf = append(c.partOf, n)
		lens = append(lens, nf*spec.FanIn(l), nf)
		ranges = append(ranges, [2]int{n, (ly.k1 - 1) * nf}, [2]int{n + (ly.k1-1)*nf, nf})
		n += ly.k1 * nf
		c.wOff = append(c.wOff, wLen)
		wLen += ly.k1 * nf
		if l > 0 {
			wLen += 9 * nf * ly.cin
		}
	}
	var err error
	if c.ResidentStore, err = newResidentStore(dev, c, lens, ranges, n, wLen); err != nil {
		return nil, err
	}
	return c, nil
}

// SetResident makes every op the net has applied so far read its weights
// from c and leave its weight gradients there. Call it after the graph is
// built and before its first run; an op whose kernel is not on c's device
// is refused.
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
// c as a reader (ResidentStore.readerWeights).
func (n *ConvNet) ReadResident(c *ConvResident) error {
	for _, op := range n.ops {
		if err := c.attach(op.kern, true); err != nil {
			return fmt.Errorf("conv: op %d: %w", op.id, err)
		}
	}
	return nil
}

// attach registers k's device core with c, as a reader or a training
// core; once more does nothing.
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
	if k.dev.res == c.ResidentStore {
		return nil
	}
	c.register(&k.dev.residentCore, reader)
	return nil
}

// ReleaseResident undoes SetResident or ReadResident for the net's ops,
// whose graph is being dropped (ResidentStore.unregister).
func (n *ConvNet) ReleaseResident(c *ConvResident) {
	for _, op := range n.ops {
		if d := op.kern.dev; d != nil {
			c.unregister(&d.residentCore)
		}
	}
}

// pack writes the network's tensors ts (per block W[f][c·9 + tap], then
// the bias) into dst, the layout.
func (c *ConvResident) pack(dst []float64, ts [][]float64) {
	for l := range c.ls {
		nf, cin := c.spec.Filters, c.ls[l].cin
		w, b, o := ts[2*l], ts[2*l+1], dst[c.partOf[l]:]
		for f := 0; f < nf; f++ {
			for ch := 0; ch < cin; ch++ {
				for tap := 0; tap < 9; tap++ {
					o[(tap*cin+ch)*nf+f] = w[f*9*cin+ch*9+tap]
				}
			}
			o[9*cin*nf+f] = b[f]
		}
	}
}

func (c *ConvResident) unpack(src []float64, ts [][]float64) {
	for l := range c.ls {
		nf, cin := c.spec.Filters, c.ls[l].cin
		w, b, s := ts[2*l], ts[2*l+1], src[c.partOf[l]:]
		for f := 0; f < nf; f++ {
			for ch := 0; ch < cin; ch++ {
				for tap := 0; tap < 9; tap++ {
					w[f*9*cin+ch*9+tap] = s[(tap*cin+ch)*nf+f]
				}
			}
			b[f] = s[9*cin*nf+f]
		}
	}
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
		a.buf(c.r.p).int(c.partOf[l]).buf(c.r.w).int(c.wOff[l]).int(ly.k1).int(nf).int(ly.cin)
		if err := a.launch(n); err != nil {
			return err
		}
	}
	return nil
}
