// Kernels of the conditional coupling flow on a device (engine/ops/flow_dev.go).
// The products are CLBlast's; these kernels move data around them and do
// the element-wise work. Matrices are feature-major over all tasks: row j
// of an ω holds feature j of the T·D samples (task t's in columns t·D…),
// so every product runs along the long sample axis, and a coupling half's
// rows are a plain strided view (row0 + j·step). Each work-item writes its
// own outputs and sums in a fixed order: equal bytes run after run.
//
// tanh and exp are OpenCL's, under strict IEEE arithmetic: NaN passes
// through both, tanh saturates at ±1 and exp is only ever taken of
// s = tanh(o) ∈ [-1, 1], so the CPU's clamps (sgemm's expf) never act on a
// number there either; results agree with the CPU's approximations to a
// few ulps.

// flow_load writes column j of row r of the sample-major src (row stride
// lds) into row j, column r of the feature-major dst + dstOff (rows of n
// values): ω₀ or an output gradient coming up from the host.
__kernel void flow_load(__global const float *src, const int lds, __global float *dst, const int dstOff, const int n) {
	int r = get_global_id(0), j = get_global_id(1);
	dst[dstOff + j * n + r] = src[r * lds + j];
}

// flow_store is flow_load's inverse: row j, column r of src + srcOff (rows
// of n values) becomes column j of row r of dst (row stride ldd).
__kernel void flow_store(__global const float *src, const int srcOff, const int n, __global float *dst, const int ldd) {
	int j = get_global_id(0), r = get_global_id(1);
	dst[r * ldd + j] = src[srcOff + j * n + r];
}

// flow_bias_relu finishes a coupling network's hidden layer in place: hid
// (H rows of n = T·D values, from hidOff) += ctx[t][q·H + u] + b1[u] for
// sample column c of task t = c / D, then the CPU's ReLU, x < 0 ? 0 : x,
// which keeps NaN and -0 (gemmcore's FlagReLU).
__kernel void flow_bias_relu(__global float *hid, const int hidOff, const int n, const int D,
                             __global const float *ctx, const int ctxOff, const int ldctx,
                             __global const float *th, const int b1) {
	int c = get_global_id(0), u = get_global_id(1);
	int i = hidOff + u * n + c;
	float v = hid[i] + (ctx[(c / D) * ldctx + ctxOff + u] + th[b1 + u]);
	hid[i] = v < 0 ? 0 : v;
}

// flow_coupling applies a coupling half to sample column c: for target j
// < m, with o and t rows j and m + j of out plus b2 (the network's output
// bias), s = tanh(o), y = x·exp(s) + t where x and y are row row0 + j·step
// of the ω at xOff and yOff, s is kept at sOff + j·n, and the log-det
// ld[c] += s in the order of j (sgemm.AffineCoupling's).
__kernel void flow_coupling(__global const float *out, __global const float *th, const int b2, const int m,
                            __global float *w, const int xOff, const int yOff, const int row0, const int step,
                            __global float *s, const int sOff, const int ldOff, const int n) {
	int c = get_global_id(0);
	float ld = w[ldOff + c];
	for (int j = 0; j < m; j++) {
		float sv = tanh(out[j * n + c] + th[b2 + j]);
		float tv = out[(m + j) * n + c] + th[b2 + m + j];
		int r = (row0 + j * step) * n + c;
		s[sOff + j * n + c] = sv;
		w[yOff + r] = w[xOff + r] * exp(sv) + tv;
		ld += sv;
	}
	w[ldOff + c] = ld;
}

// flow_coupling_grad back-propagates flow_coupling for sample column c
// (sgemm.AffineCouplingGrad): with g row row0 + j·step of gw (the
// gradient w.r.t. y), gl = gw's row glRow (the log-det's gradient), x the
// half's input row and s its cached scale, e = exp(s): the o gradient (g·e·x
// + gl)(1 − s²) and the t gradient g go to rows j and m + j of gout, and g
// becomes g·e, the gradient w.r.t. x.
__kernel void flow_coupling_grad(__global float *gout, const int m, __global float *gw, const int glRow,
                                 __global const float *w, const int xOff, const int row0, const int step,
                                 __global const float *s, const int sOff, const int n) {
	int c = get_global_id(0);
	float gl = gw[glRow * n + c];
	for (int j = 0; j < m; j++) {
		int r = (row0 + j * step) * n + c;
		float gv = gw[r], sv = s[sOff + j * n + c];
		float ge = gv * exp(sv);
		gout[j * n + c] = (ge * w[xOff + r] + gl) * (1 - sv * sv);
		gout[(m + j) * n + c] = gv;
		gw[r] = ge;
	}
}

// flow_mask keeps the hidden gradient where the ReLU was active: g = 0
// unless hid > 0 (gemmcore's FlagMask: a NaN activation masks too).
__kernel void flow_mask(__global float *g, __global const float *hid, const int hidOff) {
	int i = get_global_id(0);
	if (!(hid[hidOff + i] > 0)) g[i] = 0;
}

// flow_task_sums writes, for row i of src (rows of n = T·D values) and
// task t, the sum of the task's D values in order into dst[t·ldd + dstOff
// + i]: the per-task output-bias and context gradients, summed over tasks
// later in task order (conv_reduce).
__kernel void flow_task_sums(__global const float *src, const int n, const int D,
                             __global float *dst, const int dstOff, const int ldd) {
	int i = get_global_id(0), t = get_global_id(1);
	__global const float *p = src + i * n + t * D;
	float v = 0;
	for (int r = 0; r < D; r++) v += p[r];
	dst[t * ldd + dstOff + i] = v;
}
