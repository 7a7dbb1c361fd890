package ops

// The ResNet's geometry and the loops its convolutions need beyond
// conv_math.go's: im2col and col2im of any kernel size and stride with
// TensorFlow's SAME padding, and the stem's 3×3 stride-2 max-pool.

// resConv is one convolution with how the kernel computes it.
type resConv struct {
	ResNetConv
	pt, pl int  // padding before the first row and column
	p, po  int  // input and output pixels
	kk     int  // im2col width K·K·In, tap-major (tap·In + c)
	group  int  // images per forward product
	direct bool // 1×1 stride 1: the input is its own im2col
	im3    bool // 3×3 stride 1: convIm2col's case
	uw     int  // im2col columns per weight-gradient unit
	wino   bool // 3×3 stride 1 by Winograd (resnet_wino.go)
	th, tw int  // its tiles: rows and columns of 2×2 output pixels
}

// resBlock holds the convolutions of one BasicBlock; proj is −1 for an
// identity shortcut.
type resBlock struct{ c1, c2, proj int }

// resGroupRows is the number of output pixels a forward product should
// have at least: small maps are batched over images (as convGroupRows).
const resGroupRows = 256

// resUnitRows is the depth of a weight-gradient product: rows of the
// batch's im2col taken at a time, whose float32 products are summed in
// float64.
const resUnitRows = 1024

func resLayers(s ResNetSpec) ([]resConv, []resBlock) {
	cs := s.Convs()
	cv := make([]resConv, len(cs))
	for l, c := range cs {
		_, pt := sameOut(c.Height, c.K, c.Stride)
		_, pl := sameOut(c.Width, c.K, c.Stride)
		rc := resConv{ResNetConv: c, pt: pt, pl: pl, p: c.Height * c.Width, po: c.OutHeight * c.OutWidth, kk: c.FanIn()}
		rc.direct = c.K == 1 && c.Stride == 1
		rc.im3 = c.K == 3 && c.Stride == 1
		rc.group = max(1, resGroupRows/rc.po)
		if rc.im3 {
			rc.winoGeom()
		}
		// Weight-gradient units of ~1/8 of the columns (16 to 128, a
		// multiple of 8): enough units for the cores, wide enough for the
		// product's kernel; whole taps where that is near (64 channels:
		// 64 columns, not 72), so that a unit's im2col copies one segment
		// per row. The width does not change the sums: every column's is
		// the same product over the same rows.
		rc.uw = min(rc.kk, min(128, max(16, (rc.kk/8+7)/8*8)))
		if c.In >= 16 && rc.uw > c.In && rc.uw < 2*c.In {
			rc.uw = c.In
		}
		cv[l] = rc
	}
	var bs []resBlock
	for i := 1; i < len(cv); {
		b := resBlock{c1: i, c2: i + 1, proj: -1}
		i += 2
		if i < len(cv) && cv[i].K == 1 {
			b.proj = i
			i++
		}
		bs = append(bs, b)
	}
	return cv, bs
}

// resIm2col writes, for the output pixels r0 … r1−1 of the batch (row r is
// pixel r mod po of image r / po), im2col columns c0 … c1−1 into dst (row
// stride ldd): per tap (ky, kx row-major) the In channels of the input
// pixel it reads, zeros where that is padding. The taps of one kernel row
// that fall inside the image are consecutive pixels of the input, so they
// are copied at once (the stem's seven 3-channel taps: one copy of 21
// values, not seven of 3); the image, pixel and tap are stepped rather
// than divided out per row and segment, which cost more than the copies.
func resIm2col[F float](dst []F, ldd int, src []F, cv *resConv, r0, r1, c0, c1 int) {
	cin, k := cv.In, cv.K
	t0, ch0 := c0/cin, c0%cin
	i, q := r0/cv.po, r0%cv.po
	oy, ox := q/cv.OutWidth, q%cv.OutWidth
	for r := r0; r < r1; r++ {
		y0, x0 := oy*cv.Stride-cv.pt, ox*cv.Stride-cv.pl
		img := src[i*cv.p*cin : (i+1)*cv.p*cin]
		row := dst[(r-r0)*ldd : (r-r0)*ldd+c1-c0]
		ky, kx, ch := t0/k, t0%k, ch0
		for j := c0; j < c1; {
			iy, ix := y0+ky, x0+kx
			// n values from tap (ky, kx), channel ch on: the rest of the
			// tap, and the later taps of its kernel row inside the image.
			n, inside := min(cin-ch, c1-j), iy >= 0 && iy < cv.Height && ix >= 0 && ix < cv.Width
			if inside {
				n = min(cin-ch+min(k-1-kx, cv.Width-1-ix)*cin, c1-j)
			}
			seg := row[j-c0 : j-c0+n]
			if !inside {
				clear(seg)
			} else if px := img[(iy*cv.Width+ix)*cin+ch:][:n]; n < 8 {
				// A few channels: a call to copy would cost more than the
				// values it moves.
				for e := range seg {
					seg[e] = px[e]
				}
			} else {
				copy(seg, px)
			}
			j += n
			// Past the last column a partial tap leaves the state unused.
			if kx += (ch + n) / cin; kx == k {
				kx, ky = 0, ky+1
			}
			ch = 0
		}
		if ox++; ox == cv.OutWidth {
			if ox, oy = 0, oy+1; oy == cv.OutHeight {
				oy, i = 0, i+1
			}
		}
	}
}

// resCol2im adds the im2col-shaped gradient col (all kk columns, rows of
// output pixels r0 … r1−1) into the gradient dst of the input images. As
// in resIm2col, the taps of a kernel row inside the image are consecutive
// input pixels, added in one loop, and the pixel is stepped, not divided
// out; every input value still receives its rows' terms in row order.
func resCol2im[F float](dst, col []F, cv *resConv, r0, r1 int) {
	cin, k := cv.In, cv.K
	i, q := r0/cv.po, r0%cv.po
	oy, ox := q/cv.OutWidth, q%cv.OutWidth
	for r := r0; r < r1; r++ {
		y0, x0 := oy*cv.Stride-cv.pt, ox*cv.Stride-cv.pl
		img := dst[i*cv.p*cin : (i+1)*cv.p*cin]
		row := col[(r-r0)*cv.kk : (r-r0+1)*cv.kk]
		// The kernel columns kx0 … kx1−1 fall inside the image.
		kx0, kx1 := max(0, -x0), min(k, cv.Width-x0)
		for ky := range k {
			iy := y0 + ky
			if iy < 0 || iy >= cv.Height || kx0 >= kx1 {
				continue
			}
			n := (kx1 - kx0) * cin
			d := img[(iy*cv.Width+x0+kx0)*cin:][:n]
			for c, v := range row[(ky*k+kx0)*cin:][:n] {
				d[c] += v
			}
		}
		if ox++; ox == cv.OutWidth {
			if ox, oy = 0, oy+1; oy == cv.OutHeight {
				oy, i = 0, i+1
			}
		}
	}
}

// resPool is the stem's max-pool: 3×3 windows, stride 2, SAME.
type resPool struct {
	h, w, c  int // input
	ho, wo   int // output
	pt, pl   int
	pin, pou int // input and output values per image
}

func newResPool(stem ResNetConv) resPool {
	p := resPool{h: stem.OutHeight, w: stem.OutWidth, c: stem.Out}
	p.ho, p.pt = sameOut(p.h, 3, 2)
	p.wo, p.pl = sameOut(p.w, 3, 2)
	p.pin, p.pou = p.h*p.w*p.c, p.ho*p.wo*p.c
	return p
}

// forward pools one image, recording in arg which tap of each window won
// (the first of equal values).
func resPoolForward[F float](pl *resPool, out []F, arg []uint8, in []F) {
	c := pl.c
	for oy := range pl.ho {
		for ox := range pl.wo {
			o := out[(oy*pl.wo+ox)*c : (oy*pl.wo+ox+1)*c]
			a := arg[(oy*pl.wo+ox)*c : (oy*pl.wo+ox+1)*c]
			first := true
			for tap := range 9 {
				iy, ix := 2*oy-pl.pt+tap/3, 2*ox-pl.pl+tap%3
				if iy < 0 || iy >= pl.h || ix < 0 || ix >= pl.w {
					continue
				}
				v := in[(iy*pl.w+ix)*c : (iy*pl.w+ix+1)*c]
				if first {
					copy(o, v)
					for ch := range a {
						a[ch] = uint8(tap)
					}
					first = false
					continue
				}
				for ch, x := range v {
					if x > o[ch] {
						o[ch], a[ch] = x, uint8(tap)
					}
				}
			}
		}
	}
}

// resPoolBackward writes the gradient w.r.t. one image's pooling input:
// each window's gradient goes to its maximum, and only where that is
// positive, which is where the ReLU before the pool let it through.
func resPoolBackward[F float](pl *resPool, gin, gout, out []F, arg []uint8) {
	clear(gin)
	c := pl.c
	for oy := range pl.ho {
		for ox := range pl.wo {
			w := (oy*pl.wo + ox) * c
			for ch := range c {
				if out[w+ch] <= 0 {
					continue
				}
				tap := int(arg[w+ch])
				iy, ix := 2*oy-pl.pt+tap/3, 2*ox-pl.pl+tap%3
				gin[(iy*pl.w+ix)*c+ch] += gout[w+ch]
			}
		}
	}
}
