package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// ResNetSpec describes the ResNet-18 feature extractor ψ of the paper's
// Meta-Dataset experiments ("a ResNet-18 ... to be consistent with
// [Triantafillou et al.]; the dimension of all feature vectors is 256"),
// laid out as the Meta-Dataset reference's `resnet` backbone
// (meta_dataset/models/functional_backbones.py, _resnet and bottleneck):
//
//	stem:    conv 7×7 stride 2 (Widths[0] filters) → BN → ReLU → max-pool 3×3 stride 2
//	stage s: two BasicBlocks of Widths[s] filters, the first of stages 2–4 with stride 2:
//	         conv 3×3 (stride) → BN → ReLU → conv 3×3 → BN, plus the shortcut,
//	         → ReLU; the shortcut of each stage's first block is a 1×1 conv
//	         (stride) → BN, of the second the identity
//	head:    global average pooling → linear Widths[3] → Out (with bias)
//
// Every convolution and pooling pads as TensorFlow's SAME does (output
// ⌈n/stride⌉, the odd padding row at the bottom and column at the right),
// and no convolution has a bias (batch norm's β takes its place). As in the
// reference, the first block of every stage projects its shortcut, also
// in the first stage where widths and size match (use_project = i == 0).
// The reference's embedding is its 512 channels; the paper's features are
// 256-d, so a linear layer maps the pooled 512 to Out = 256 (the stage
// widths stay ResNet-18's 64, 128, 256, 512).
//
// The reference first resizes 84×84 images bilinearly to 97×97 ("DeepLab
// alignment", so that every stride-2 SAME step pads symmetrically); that is
// input preprocessing, not done here: 84×84 maps go 42 → 21 → 21 → 11 → 6 → 3.
//
// Layouts (row-major, as ConvSpec): images channels-last; the weight of a
// k×k convolution (Out, In·k·k), element [f][c·k² + ky·k + kx]; the linear
// layer's weight (Out, Widths[3]), PyTorch's Linear. Batch normalization:
// see BNMode and BNLayout.
type ResNetSpec struct {
	Channels int    `json:"channels"`
	Height   int    `json:"height"`
	Width    int    `json:"width"`
	Widths   [4]int `json:"widths"` // filters of the four stages (the stem has Widths[0])
	Out      int    `json:"out"`    // feature dimension
}

// ResNet18 returns the paper's Meta-Dataset backbone for h×w×c images:
// ResNet-18's widths and 256-d features.
func ResNet18(c, h, w int) ResNetSpec {
	return ResNetSpec{Channels: c, Height: h, Width: w, Widths: [4]int{64, 128, 256, 512}, Out: 256}
}

// Validate reports whether the spec describes a network the kernels run.
func (s ResNetSpec) Validate() error {
	switch {
	case s.Channels < 1 || s.Height < 1 || s.Width < 1:
		return fmt.Errorf("resnet: input %d×%d×%d, want every size ≥ 1", s.Height, s.Width, s.Channels)
	case s.Channels > maxConvSize || s.Height > maxConvSize || s.Width > maxConvSize:
		return fmt.Errorf("resnet: input %d×%d×%d, want every size ≤ %d", s.Height, s.Width, s.Channels, maxConvSize)
	case s.Out < 1 || s.Out > maxConvSize:
		return fmt.Errorf("resnet: %d output features, want 1 to %d", s.Out, maxConvSize)
	}
	for i, w := range s.Widths {
		if w < 1 || w > maxConvSize {
			return fmt.Errorf("resnet: stage %d has %d filters, want 1 to %d", i+1, w, maxConvSize)
		}
	}
	return nil
}

// InDim is the length of one input image.
func (s ResNetSpec) InDim() int { return s.Channels * s.Height * s.Width }

// OutDim is the length of one feature vector.
func (s ResNetSpec) OutDim() int { return s.Out }

// ResNetConv is one convolution of the network with its batch norm.
type ResNetConv struct {
	Name                string // "stem", "s1b0.c1", "s1b0.proj", …
	In, Out, K          int    // channels in and out, kernel size
	Stride              int
	Height, Width       int // input map
	OutHeight, OutWidth int // output map
}

// FanIn is the number of inputs of one filter.
func (c ResNetConv) FanIn() int { return c.In * c.K * c.K }

// sameOut is the output size and leading padding of TensorFlow's SAME
// padding for a window of k with the given stride over n.
func sameOut(n, k, stride int) (out, pad int) {
	out = (n + stride - 1) / stride
	return out, max((out-1)*stride+k-n, 0) / 2
}

// Convs lists the convolutions in the order of Params: the stem, then per
// block its first and second convolution and, in a stage's first block,
// the projection.
func (s ResNetSpec) Convs() []ResNetConv {
	mk := func(name string, in, out, k, stride, h, w int) ResNetConv {
		ho, _ := sameOut(h, k, stride)
		wo, _ := sameOut(w, k, stride)
		return ResNetConv{Name: name, In: in, Out: out, K: k, Stride: stride, Height: h, Width: w, OutHeight: ho, OutWidth: wo}
	}
	stem := mk("stem", s.Channels, s.Widths[0], 7, 2, s.Height, s.Width)
	cs := []ResNetConv{stem}
	h, _ := sameOut(stem.OutHeight, 3, 2) // the max-pool
	w, _ := sameOut(stem.OutWidth, 3, 2)
	c := s.Widths[0]
	for st, wd := range s.Widths {
		for b := range 2 {
			stride := 1
			if st > 0 && b == 0 {
				stride = 2
			}
			name := fmt.Sprintf("s%db%d.", st+1, b)
			c1 := mk(name+"c1", c, wd, 3, stride, h, w)
			cs = append(cs, c1, mk(name+"c2", wd, wd, 3, 1, c1.OutHeight, c1.OutWidth))
			if b == 0 {
				cs = append(cs, mk(name+"proj", c, wd, 1, stride, h, w))
			}
			h, w, c = c1.OutHeight, c1.OutWidth, wd
		}
	}
	return cs
}

// ResNetParam names a parameter and gives its shape.
type ResNetParam struct {
	Name  string
	Shape []int
}

// Params lists the parameters in the order the kernel and op take them:
// per convolution (Convs order) its weight, batch norm scale γ and shift
// β, then the linear layer's weight and bias.
func (s ResNetSpec) Params() []ResNetParam {
	var ps []ResNetParam
	for _, c := range s.Convs() {
		ps = append(ps, ResNetParam{c.Name + ".w", []int{c.Out, c.FanIn()}},
			ResNetParam{c.Name + ".bn.gamma", []int{c.Out}}, ResNetParam{c.Name + ".bn.beta", []int{c.Out}})
	}
	return append(ps, ResNetParam{"fc.w", []int{s.Out, s.Widths[3]}}, ResNetParam{"fc.b", []int{s.Out}})
}

// NumParams is the number of trainable values.
func (s ResNetSpec) NumParams() int {
	n := 0
	for _, p := range s.Params() {
		size := 1
		for _, d := range p.Shape {
			size *= d
		}
		n += size
	}
	return n
}

// InitResNetParams fills params (in Params order): convolution weights He
// normal (variance 2/fanIn: each is followed by a batch norm and a ReLU),
// γ = 1 and β = 0 as the reference starts them, and the linear layer
// uniform in ±1/√fanIn (PyTorch's Linear: no ReLU follows it, and the
// features' scale is what the random Fourier features see).
func InitResNetParams(spec ResNetSpec, rng *rand.Rand, params [][]float64) {
	cs := spec.Convs()
	for l, c := range cs {
		sd := math.Sqrt(2 / float64(c.FanIn()))
		for i := range params[3*l] {
			params[3*l][i] = sd * rng.NormFloat64()
		}
		for i := range params[3*l+1] {
			params[3*l+1][i], params[3*l+2][i] = 1, 0
		}
	}
	bound := 1 / math.Sqrt(float64(spec.Widths[3]))
	for _, p := range params[3*len(cs):] {
		for i := range p {
			p[i] = bound * (2*rng.Float64() - 1)
		}
	}
}

// NewResNetStats returns the running statistics of a spec's batch norms,
// one per convolution in Convs order, at their starting values (mean 0,
// variance 1).
func NewResNetStats(spec ResNetSpec) []BNStats {
	cs := spec.Convs()
	st := make([]BNStats, len(cs))
	for l, c := range cs {
		st[l] = NewBNStats(c.Out)
	}
	return st
}
