// Kernels of the ConvSpec blocks on a device (engine/ops/conv_dev.go):
// conv 3×3 SAME + bias → ReLU → dropout → 2×2 max-pool, and its backward.
// The products are CLBlast's; these kernels move data around them and do
// the element-wise work, each item writing its own outputs, so that a
// device gives the same bytes run after run. Every layout is the CPU's
// (conv.go, conv_math.go): images channels-last, one row per pixel.

// conv_im2col writes, for pixel r (dimension 1) of n images of h×w×c at
// src + off, column j (dimension 0) of row r of dst (row stride ldd): tap
// j / c of the 3×3 neighbourhood (ky, kx row-major), channel j % c, zero
// outside the image; with ones, column 9c holds a 1, which carries the
// bias through the product (convIm2col).
__kernel void conv_im2col(__global const float *src, const int off, __global float *dst, const int ldd,
                          const int h, const int w, const int c, const int ones) {
	int j = get_global_id(0), r = get_global_id(1);
	int p = r % (h * w), img = r / (h * w);
	int y = p / w, x = p % w;
	float v = 1;
	if (j < 9 * c) {
		int tap = j / c, ch = j % c;
		int yy = y + tap / 3 - 1, xx = x + tap % 3 - 1;
		v = 0;
		if (yy >= 0 && yy < h && xx >= 0 && xx < w) {
			v = src[off + ((img * h + yy) * w + xx) * c + ch];
		}
	} else if (!ones) {
		return;
	}
	dst[(long)r * ldd + j] = v;
}

#define CONV_GAMMA 0x9e3779b97f4a7c15UL

// SplitMix64's output function (sgemm.SplitMix).
inline ulong conv_splitmix(ulong z) {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
	return z ^ (z >> 31);
}

// conv_mask writes the dropout masks (1 keep, 0 drop) of n images from
// image0 of the batch in one block, len values an image: value i of image
// b is sgemm.BernoulliMask's element i of the stream that starts at
// convMaskKey(seed, stream, b, block) = splitmix(seedMix ^ (hi | b << 8)),
// seedMix = splitmix(seed + γ) and hi = stream << 48 | block from the host.
__kernel void conv_mask(__global uchar *mask, const int len, const int image0,
                        const ulong seedMix, const ulong hi, const ulong thr) {
	int i = get_global_id(0), b = get_global_id(1);
	ulong key = conv_splitmix(seedMix ^ (hi | ((ulong)(image0 + b) << 8)));
	ulong z = conv_splitmix(key + (ulong)(i / 2 + 1) * CONV_GAMMA);
	ulong u = (i % 2 == 1) ? z >> 32 : z & 0xffffffffUL;
	mask[(long)b * len + i] = u < thr ? 1 : 0;
}

// conv_cell is cell q (0 (0,0) … 3 (1,1)) of window (oy, ox) of an h×w
// map: its pixel and, through *place, its place in the window. A cell cut
// off by the border is an earlier cell of its window, pixel and place, as
// convWindows gives them.
inline int conv_cell(int q, int oy, int ox, int h, int w, int *place) {
	int y0 = 2 * oy, x0 = 2 * ox, y1 = y0 + 1, x1 = x0 + 1;
	int c0 = y0 * w + x0;
	bool right = x1 < w, down = y1 < h;
	*place = 0;
	if (q == 1 || (q == 3 && !down)) {
		if (right) { *place = 1; return y0 * w + x1; }
		return c0;
	}
	if (q == 2 || q == 3) {
		if (q == 3 && right) { *place = 3; return y1 * w + x1; }
		if (down) { *place = 2; return y1 * w + x0; }
		return c0;
	}
	return c0;
}

// conv_pool pools filter f (dimension 0) of window wi (dimension 1) of
// image b (dimension 2) of a group: the four cells of z (rows of nf),
// each through ReLU (x < 0 ? 0 : x, which keeps NaN) and, with train, its
// dropout mask (a dropped cell counts as 0), then the largest, a NaN
// winning over any number, and the place of the first that holds it
// (sgemm.MaskedMaxPool4, MaxPool4). out and arg are the group's rows of
// the block's output and argmax (ho×wo×nf an image).
__kernel void conv_pool(__global const float *z, __global float *out, const int outOff,
                        __global uchar *arg, const int argOff, __global const uchar *mask,
                        const int h, const int w, const int ho, const int wo, const int nf, const int train) {
	int f = get_global_id(0), wi = get_global_id(1), b = get_global_id(2);
	int oy = wi / wo, ox = wi % wo;
	__global const float *zi = z + (long)b * h * w * nf;
	__global const uchar *mw = mask + ((long)b * ho * wo + wi) * 4 * nf;
	float m = 0;
	uchar k = 0;
	for (int q = 0; q < 4; q++) {
		int place;
		int cell = conv_cell(q, oy, ox, h, w, &place);
		float v = zi[cell * nf + f];
		v = v < 0 ? 0 : v;
		if (train && mw[place * nf + f] == 0) v = 0;
		if (q == 0) {
			m = v;
		} else if (v > m || isnan(v)) {
			m = v;
			k = (uchar)q;
		}
	}
	long o = ((long)b * ho * wo + wi) * nf + f;
	out[outOff + o] = m;
	arg[argOff + o] = k;
}

// conv_unpool writes the gradient w.r.t. the pre-pool activations of a
// group, filter f (dimension 0) of pixel p (dimension 1) of image b
// (dimension 2): alpha·g of its window where the pixel holds the window's
// maximum (arg names its place) and the pooled output is > 0, else 0; a
// pixel in no window (floor pooling) gets 0 (sgemm.Unpool4 read from the
// cell's side, so that each item writes one value). A cut cell never wins
// but through a NaN, whose output is not > 0, so the gather is exact.
__kernel void conv_unpool(__global float *dz, __global const float *g, const int gOff,
                          __global const float *out, const int outOff, __global const uchar *arg, const int argOff,
                          const int h, const int w, const int ho, const int wo, const int nf, const float alpha) {
	int f = get_global_id(0), p = get_global_id(1), b = get_global_id(2);
	int y = p / w, x = p % w;
	float v = 0;
	if (y / 2 < ho && x / 2 < wo) {
		long o = ((long)b * ho * wo + (y / 2) * wo + x / 2) * nf + f;
		if (arg[argOff + o] == (y % 2) * 2 + x % 2 && out[outOff + o] > 0) v = alpha * g[gOff + o];
	}
	dz[((long)b * h * w + p) * nf + f] = v;
}

// conv_reduce sums n partials of len values (consecutive in part) in
// order into sum: a fixed order, so equal bytes run after run.
__kernel void conv_reduce(__global const float *part, const int n, const int len, __global float *sum) {
	int i = get_global_id(0);
	float s = part[i];
	for (int c = 1; c < n; c++) s += part[(long)c * len + i];
	sum[i] = s;
}
