// The ResNet-18 backbone's kernels (engine/ops/resnet_dev.go): im2col and
// a gathering col2im for any kernel size and stride with TensorFlow's SAME
// padding, batch norm's per-image sums and its forward and backward maps,
// the stem's 3×3/2 max-pool and the global pool's broadcast. Maps are
// channels-last (image, pixel, channel). Every sum runs in a fixed order
// in one work-item (no atomics): a device gives the same bytes run after
// run. A ReLU is `y < 0 ? 0 : y` and masks test `v <= 0`, so NaN passes.

// Work-item n of the im2col matrix of the rows (output pixels) of a batch:
// col[r][tap·In + c] is input channel c at tap (ky, kx) of output pixel r,
// 0 where that is padding.
__kernel void res_im2col(__global float *col, __global const float *src, const int n,
		const int in, const int k, const int stride, const int h, const int w,
		const int oh, const int ow, const int pt, const int pl) {
	int g = get_global_id(0);
	if (g >= n) return;
	int kk = k * k * in;
	int r = g / kk, j = g % kk;
	int po = oh * ow;
	int i = r / po, q = r % po;
	int tap = j / in, c = j % in;
	int iy = (q / ow) * stride - pt + tap / k, ix = (q % ow) * stride - pl + tap % k;
	float v = 0;
	if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = src[((i * h + iy) * w + ix) * in + c];
	col[g] = v;
}

// col2im as a gather: each input value sums the im2col entries that read
// it, in the order of their output pixels (as the CPU's scatter adds
// them), and is written (add 0) or added to dst.
__kernel void res_col2im(__global float *dst, __global const float *col, const int n,
		const int in, const int k, const int stride, const int h, const int w,
		const int oh, const int ow, const int pt, const int pl, const int add) {
	int g = get_global_id(0);
	if (g >= n) return;
	int c = g % in, p = g / in;
	int ix = p % w, iy = (p / w) % h, i = p / (w * h);
	int kk = k * k * in;
	float s = 0;
	for (int ky = k - 1; ky >= 0; ky--) {
		int ty = iy + pt - ky;
		if (ty < 0 || ty % stride != 0 || ty / stride >= oh) continue;
		int oy = ty / stride;
		for (int kx = k - 1; kx >= 0; kx--) {
			int tx = ix + pl - kx;
			if (tx < 0 || tx % stride != 0 || tx / stride >= ow) continue;
			int ox = tx / stride;
			s += col[(size_t)((i * oh + oy) * ow + ox) * kk + (ky * k + kx) * in + c];
		}
	}
	dst[g] = add ? dst[g] + s : s;
}

// Per image and channel (work-item i·C + c), the compensated sums over the
// image's p pixels of a and of a·a (forward statistics), or of a and a·b
// (the gradient's Σg, Σg·z), into s[g] and s[nc + g]. With mask set, a is
// first zeroed where mask is ≤ 0 (the ReLU the gradient came back
// through), in place.
__kernel void res_sums(__global float *a, __global const float *b, __global const float *mask,
		__global float *s, const int nc, const int p, const int cc, const int prod, const int masked) {
	int g = get_global_id(0);
	if (g >= nc) return;
	int i = g / cc, c = g % cc;
	float u = 0, uc = 0, v = 0, vc = 0;
	for (int q = 0; q < p; q++) {
		size_t o = (size_t)(i * p + q) * cc + c;
		float x = a[o];
		if (masked && mask[o] <= 0) {
			x = 0;
			a[o] = 0;
		}
		float y = x * (prod ? b[o] : x);
		float t = x - uc, s = u + t;
		uc = (s - u) - t;
		u = s;
		t = y - vc;
		s = v + t;
		vc = (s - v) - t;
		v = s;
	}
	s[g] = u;
	s[nc + g] = v;
}

// Batch norm's forward map: dst = z·scale + shift (+ add) of the image's
// episode e = ep[i], through a ReLU if relu is set. dst may be add.
__kernel void res_bn_apply(__global float *dst, __global const float *z, __global const float *add,
		__global const float *cf, const int scaleOff, const int shiftOff, __global const int *ep,
		const int n, const int pc, const int cc, const int hasAdd, const int relu) {
	int g = get_global_id(0);
	if (g >= n) return;
	int c = g % cc, e = ep[g / pc];
	float y = z[g] * cf[scaleOff + e * cc + c] + cf[shiftOff + e * cc + c];
	if (hasAdd) y += add[g];
	dst[g] = relu ? (y < 0 ? 0 : y) : y;
}

// Batch norm's backward map, in place of z: dz = k1·g, plus k2 + k3·z for
// images whose values entered the statistics (ep[images + i]; ep[i] is
// image i's episode).
__kernel void res_bn_grad(__global float *z, __global const float *gr, __global const float *cf,
		const int k1Off, const int k2Off, const int k3Off, __global const int *ep, const int images,
		const int n, const int pc, const int cc) {
	int g = get_global_id(0);
	if (g >= n) return;
	int i = g / pc, c = g % cc, e = ep[i] * cc + c;
	float d = cf[k1Off + e] * gr[g];
	if (ep[images + i]) d = d + cf[k2Off + e] + cf[k3Off + e] * z[g];
	z[g] = d;
}

// The stem's max-pool, 3×3 windows of stride 2 (SAME): the first of equal
// values wins, and arg records its tap.
__kernel void res_pool(__global float *out, __global uchar *arg, __global const float *in,
		const int n, const int h, const int w, const int cc, const int ho, const int wo,
		const int pt, const int pl) {
	int g = get_global_id(0);
	if (g >= n) return;
	int c = g % cc, p = g / cc;
	int ox = p % wo, oy = (p / wo) % ho, i = p / (wo * ho);
	float m = 0;
	uchar a = 0;
	int first = 1;
	for (int tap = 0; tap < 9; tap++) {
		int iy = 2 * oy - pt + tap / 3, ix = 2 * ox - pl + tap % 3;
		if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
		float x = in[((i * h + iy) * w + ix) * cc + c];
		if (first || x > m) {
			m = x;
			a = (uchar)tap;
			first = 0;
		}
	}
	out[g] = m;
	arg[g] = a;
}

// The max-pool's backward as a gather: each input value sums the
// gradients of the windows it won whose maximum is positive (where the
// ReLU before the pool let the gradient through), in window order.
__kernel void res_unpool(__global float *gin, __global const float *gout, __global const float *out,
		__global const uchar *arg, const int n, const int h, const int w, const int cc,
		const int ho, const int wo, const int pt, const int pl) {
	int g = get_global_id(0);
	if (g >= n) return;
	int c = g % cc, p = g / cc;
	int ix = p % w, iy = (p / w) % h, i = p / (w * h);
	float s = 0;
	for (int ty = 2; ty >= 0; ty--) {
		int y2 = iy + pt - ty;
		if (y2 < 0 || y2 % 2 != 0 || y2 / 2 >= ho) continue;
		int oy = y2 / 2;
		for (int tx = 2; tx >= 0; tx--) {
			int x2 = ix + pl - tx;
			if (x2 < 0 || x2 % 2 != 0 || x2 / 2 >= wo) continue;
			int o = ((i * ho + oy) * wo + x2 / 2) * cc + c;
			if (out[o] <= 0 || arg[o] != ty * 3 + tx) continue;
			s += gout[o];
		}
	}
	gin[g] = s;
}

// The global pool's backward: every pixel of image i gets gf[i][c].
__kernel void res_bcast(__global float *dst, __global const float *gf, const int n, const int pc, const int cc) {
	int g = get_global_id(0);
	if (g >= n) return;
	dst[g] = gf[(g / pc) * cc + g % cc];
}

// A weight gradient from the products of its row blocks: dst[off + j] is
// the sum of part[b·n + j] over the blocks b in order.
__kernel void res_add_parts(__global float *dst, const int off, __global const float *part, const int n, const int parts) {
	int g = get_global_id(0);
	if (g >= n) return;
	float s = part[g];
	for (int b = 1; b < parts; b++) s += part[(size_t)b * n + g];
	dst[off + g] = s;
}
