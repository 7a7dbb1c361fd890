package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// ConvSpec describes a stack of convolutional blocks, the feature extractor
// ψ of the few-shot image presets (Conv-4 in the paper's appendix). Every
// block is
//
//	conv 3×3 (stride 1, SAME zero padding, Filters filters) + bias → ReLU →
//	dropout (training only) → max-pool 2×2 (stride 2, SAME)
//
// with no batch normalization. SAME pooling of an odd size pads one row at
// the bottom and one column at the right that never win the maximum
// (7×7 → 4×4), as TensorFlow does. Dropout is inverted: kept activations
// are scaled by 1/Keep, so evaluation runs the blocks unchanged.
//
// Layouts (all row-major):
//   - an image is channels-last, pixel (y, x) channel c at (y·Width + x)·Channels + c
//     (one grey value per pixel for Omniglot; interleaved RGB otherwise);
//   - the weights of block l are (Filters, Cin·9) with Cin = Channels for
//     the first block and Filters after it, element [f][c·9 + ky·3 + kx]
//     (PyTorch's (F, Cin, 3, 3) flattened), and the bias is (Filters);
//   - the output of an image is the last block's map flattened
//     channels-last, (y·W' + x)·Filters + f, as in the authors' TensorFlow
//     code (OutDim values).
type ConvSpec struct {
	Channels int     `json:"channels"`
	Height   int     `json:"height"`
	Width    int     `json:"width"`
	Blocks   int     `json:"blocks"`
	Filters  int     `json:"filters"`
	Keep     float64 `json:"keep"` // dropout keep probability in training; 1 = no dropout
	// FloorPool keeps only whole 2×2 pooling windows (an odd map loses its
	// last row or column), as the paper's miniImageNet table does
	// (84→42→21→10→5→2, 256-d); otherwise pooling is SAME (7→4 for
	// Omniglot).
	FloorPool bool `json:"floor_pool,omitempty"`
}

// Validate reports whether the spec describes a network the kernels run.
func (s ConvSpec) Validate() error {
	switch {
	case s.Channels < 1 || s.Height < 1 || s.Width < 1:
		return fmt.Errorf("conv: input %d×%d×%d, want every size ≥ 1", s.Height, s.Width, s.Channels)
	case s.Channels > maxConvSize || s.Height > maxConvSize || s.Width > maxConvSize:
		return fmt.Errorf("conv: input %d×%d×%d, want every size ≤ %d", s.Height, s.Width, s.Channels, maxConvSize)
	case s.Blocks < 1 || s.Blocks > maxConvBlocks:
		return fmt.Errorf("conv: %d blocks, want 1 to %d", s.Blocks, maxConvBlocks)
	case s.Filters < 1 || s.Filters > maxConvSize:
		return fmt.Errorf("conv: %d filters, want 1 to %d", s.Filters, maxConvSize)
	case !(s.Keep > 0 && s.Keep <= 1):
		return fmt.Errorf("conv: keep probability %g, want in (0, 1]", s.Keep)
	case s.FloorPool && s.OutDim() == 0:
		return fmt.Errorf("conv: %d blocks of floor pooling shrink %d×%d to nothing", s.Blocks, s.Height, s.Width)
	}
	return nil
}

// maxConvSize and maxConvBlocks bound a spec's sizes far above any real
// network's, so that sizes read from a file can neither overflow the
// products below nor keep OutDim looping.
const (
	maxConvSize   = 1 << 14
	maxConvBlocks = 64
)

// InDim is the length of one input image.
func (s ConvSpec) InDim() int { return s.Channels * s.Height * s.Width }

// OutDim is the length of one output feature vector: 256 for Conv-4 on
// 28×28 images with 64 filters (2×2×64).
func (s ConvSpec) OutDim() int {
	h, w := s.Height, s.Width
	for range s.Blocks {
		ph, pw := s.pooled(h), s.pooled(w)
		if ph == h && pw == w {
			break // a fixed point (1×1, or 0 with floor pooling): more blocks change nothing
		}
		h, w = ph, pw
	}
	return h * w * s.Filters
}

// pooled is the size a map side of n pools to.
func (s ConvSpec) pooled(n int) int {
	if s.FloorPool {
		return n / 2
	}
	return (n + 1) / 2
}

// FanIn is the number of inputs of one filter of block l.
func (s ConvSpec) FanIn(l int) int {
	if l == 0 {
		return 9 * s.Channels
	}
	return 9 * s.Filters
}

// convLayer is the geometry of one block and how it is computed.
type convLayer struct {
	cin, h, w int // input channels and size (the convolution keeps the size)
	ho, wo    int // pooled size, also the Winograd tiles (one per window)
	p, po     int // h·w and ho·wo
	k1        int // 9·cin taps plus a column of ones that carries the bias
	wino      bool
	group     int // images per product (see convGroupRows, convGroupTiles)
	part      int // length of the block's weight-gradient partial
}

// convGroupRows is the number of pixel rows that one im2col product should
// have at least: small maps (a 7×7 map has 49 pixels) are batched over
// images, so that the weight-gradient product runs in one pass over a depth
// of ~200 rather than re-reading its (9·cin+1)×F result for every image.
const convGroupRows = 240

func (s ConvSpec) layers() []convLayer {
	ls := make([]convLayer, s.Blocks)
	h, w, c := s.Height, s.Width, s.Channels
	for l := range ls {
		ly := convLayer{cin: c, h: h, w: w, ho: s.pooled(h), wo: s.pooled(w), p: h * w, k1: 9*c + 1}
		ly.po = ly.ho * ly.wo
		ls[l] = ly
		h, w, c = ly.ho, ly.wo, s.Filters
	}
	return ls
}

// convChunks is the fixed number of image chunks of a pass. A chunk runs
// on one goroutine and sums its own weight gradients, which are then added
// in chunk order, so results do not depend on the number of cores; 8
// chunks keep two cores balanced when another process takes a share of
// one.
const convChunks = 8

// InitConvParams fills the weights and biases of a spec's blocks as
// PyTorch initializes a Conv2d: every value uniform in ±1/√fanIn (its
// kaiming_uniform with a = √5 for the weights, the same bound for the
// biases).
func InitConvParams(spec ConvSpec, rng *rand.Rand, ws, bs [][]float64) {
	for l := range ws {
		bound := 1 / math.Sqrt(float64(spec.FanIn(l)))
		for i := range ws[l] {
			ws[l][i] = bound * (2*rng.Float64() - 1)
		}
		for i := range bs[l] {
			bs[l][i] = bound * (2*rng.Float64() - 1)
		}
	}
}
