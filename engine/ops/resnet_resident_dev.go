package ops

import (
	"fmt"

	"github.com/mkbench/mkbench/internal/opencl"
)

// ResNetResident is a ResNetSpec network's convolution weights resident
// on its device (a ResidentStore, whose rules it follows), laid out as
// resnet_dev.go keeps them: per convolution kk×Out, row tap·In + c, the
// layout its weight gradients come out in, so the float32 weights are the
// masters converted. Batch norm's γ and β and the linear layer stay on the
// host, which reads them every pass (the statistics and the head run
// there, resnet_dev.go).
type ResNetResident struct {
	*ResidentStore
	spec ResNetSpec
	cv   []resConv
	wOff []int
}

// NewResNetResident allocates the resident weights of spec on dev. Its
// values are undefined until Upload.
func NewResNetResident(dev *opencl.Device, spec ResNetSpec) (*ResNetResident, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	c := &ResNetResident{spec: spec}
	c.cv, _ = resLayers(spec)
	n := 0
	var lens []int
	var ranges [][2]int
	for _, cv := range c.cv {
		c.wOff = append(c.wOff, n)
		lens = append(lens, cv.kk*cv.Out)
		ranges = append(ranges, [2]int{n, cv.kk * cv.Out})
		n += cv.kk * cv.Out
	}
	var err error
	if c.ResidentStore, err = newResidentStore(dev, c, lens, ranges, n, n); err != nil {
		return nil, err
	}
	return c, nil
}

// SetResident makes every op the net has applied so far read its
// convolution weights from c and leave their gradients there (see
// ConvNet.SetResident).
func (n *ResNet) SetResident(c *ResNetResident) error {
	for _, op := range n.ops {
		if err := c.attach(op.kern, false); err != nil {
			return fmt.Errorf("resnet: op %d: %w", op.id, err)
		}
	}
	return nil
}

// ReadResident makes every op the net has applied so far, in a graph that
// takes no gradient, read its convolution weights from c as a reader.
func (n *ResNet) ReadResident(c *ResNetResident) error {
	for _, op := range n.ops {
		if err := c.attach(op.kern, true); err != nil {
			return fmt.Errorf("resnet: op %d: %w", op.id, err)
		}
	}
	return nil
}

// ReleaseResident undoes SetResident or ReadResident for the net's ops,
// whose graph is being dropped.
func (n *ResNet) ReleaseResident(c *ResNetResident) {
	for _, op := range n.ops {
		if d := op.kern.cdev; d != nil {
			c.unregister(&d.residentCore)
		}
	}
}

func (c *ResNetResident) attach(k *ResNetKernel, reader bool) error {
	if k.spec != c.spec {
		return fmt.Errorf("resident parameters of another network")
	}
	if k.dev != c.dev || k.f64 {
		return fmt.Errorf("the kernel does not run on %s: its parameters cannot be resident there", c.dev.Info.Name)
	}
	if k.cdev == nil {
		d, err := newResDev(k.dev, k.spec)
		if err != nil {
			return err
		}
		k.cdev = d
	}
	if k.cdev.res == c.ResidentStore {
		return nil
	}
	c.register(&k.cdev.residentCore, reader)
	return nil
}

// pack writes the convolution weights ts (W[f][c·K² + tap]) into dst.
func (c *ResNetResident) pack(dst []float64, ts [][]float64) {
	for l, cv := range c.cv {
		w, o, kk2 := ts[l], dst[c.wOff[l]:], cv.K*cv.K
		for f := range cv.Out {
			for ch := range cv.In {
				for tap := range kk2 {
					o[(tap*cv.In+ch)*cv.Out+f] = w[f*cv.kk+ch*kk2+tap]
				}
			}
		}
	}
}

func (c *ResNetResident) unpack(src []float64, ts [][]float64) {
	for l, cv := range c.cv {
		w, s, kk2 := ts[l], src[c.wOff[l]:], cv.K*cv.K
		for f := range cv.Out {
			for ch := range cv.In {
				for tap := range kk2 {
					w[f*cv.kk+ch*kk2+tap] = s[(tap*cv.In+ch)*cv.Out+f]
				}
			}
		}
	}
}

// packWeights converts the masters into the float32 weights: the same
// layout, so res_pack's first case over all of them.
func (c *ResNetResident) packWeights() error {
	a := convArgs{k: c.r.pack}
	a.buf(c.r.p).int(0).buf(c.r.w).int(0).int(c.n).int(1).int(1)
	return a.launch(c.n)
}
