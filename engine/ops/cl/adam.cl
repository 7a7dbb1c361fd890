// Resident parameters (engine/ops/resident_dev.go, conv_resident_dev.go):
// a backbone's master weights, the optimizer's moments and its summed
// gradient live on the device as `real`, double where the device has
// cl_khr_fp64, else float.
// Host scalars arrive as the bits of a double (ulong), or of a float in
// the low 32 bits without fp64.
//
// No contraction: each product is rounded before the sum, as the host's
// vecmath.Adam rounds it, so with double masters an update has the
// host's bits (sqrt and division are correctly rounded in double).
#pragma OPENCL FP_CONTRACT OFF

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real;
#define SCALAR(b) as_double(b)
#else
typedef float real;
#define SCALAR(b) as_float((uint)(b))
#endif

// res_real_size tells the host which `real` this device compiled.
__kernel void res_real_size(__global int *out) { out[0] = (int)sizeof(real); }

// res_acc adds one op's float32 gradient sums into grad (first: sets it).
// The host calls it per op in a fixed order: equal bytes run after run.
__kernel void res_acc(__global real *grad, __global const float *src, const int n, const int first) {
	int i = get_global_id(0);
	if (i >= n) return;
	real v = (real)src[i];
	grad[i] = first ? v : grad[i] + v;
}

// res_sumsq_part sums the squares of chunk values from item·chunk in
// order; res_sumsq_final sums the n partials in order.
__kernel void res_sumsq_part(__global const real *g, const int n, const int chunk, __global real *part) {
	int i = get_global_id(0);
	int lo = i * chunk, hi = min(n, lo + chunk);
	real s = 0;
	for (int j = lo; j < hi; j++) s += g[j] * g[j];
	part[i] = s;
}

__kernel void res_sumsq_final(__global const real *part, const int n, __global real *out) {
	real s = 0;
	for (int j = 0; j < n; j++) s += part[j];
	out[0] = s;
}

// res_adam is engine/optim.go's update of one parameter's n values from
// off: the decoupled decay p·factor first (floats.Scale), then
// vecmath.Adam's formula in its order of operations.
__kernel void res_adam(__global real *p, __global const real *g, __global real *m, __global real *v,
                       const int off, const ulong scaleB, const ulong stepB, const ulong b1B, const ulong b2B,
                       const ulong epsB, const ulong factorB, const int decay) {
	int i = off + get_global_id(0);
	real scale = SCALAR(scaleB), step = SCALAR(stepB), b1 = SCALAR(b1B), b2 = SCALAR(b2B), eps = SCALAR(epsB);
	real c1 = 1 - b1, c2 = 1 - b2;
	real pi = p[i];
	if (decay) pi = pi * SCALAR(factorB);
	real gj = g[i] * scale;
	real mi = b1 * m[i] + c1 * gj;
	real vi = b2 * v[i] + c2 * gj * gj;
	m[i] = mi;
	v[i] = vi;
	p[i] = pi - step * mi / (sqrt(vi) + eps);
}

// res_sgd is engine/optim.go's SGD with momentum on n values from off:
// the decoupled decay p·factor first, then sgdUpdate's m = mom·m + g·scale
// and p − lr·m, each product rounded before its sum.
__kernel void res_sgd(__global real *p, __global const real *g, __global real *m, const int off,
                      const ulong scaleB, const ulong lrB, const ulong momB, const ulong factorB, const int decay) {
	int i = off + get_global_id(0);
	real pi = p[i];
	if (decay) pi = pi * SCALAR(factorB);
	real mi = SCALAR(momB) * m[i] + g[i] * SCALAR(scaleB);
	m[i] = mi;
	p[i] = pi - SCALAR(lrB) * mi;
}

// res_pack writes one conv block's float32 weights from its masters (the
// k1×nf layout of conv_dev.go, bias last): wt, the masters converted (to
// nearest even, as Go's float32()), then with rot the rotated filters
// wrot[(tap·nf + f)·cin + c] = wt[((8 − tap)·cin + c)·nf + f] that the
// input gradient's product reads.
__kernel void res_pack(__global const real *p, const int poff, __global float *w, const int woff,
                       const int k1, const int nf, const int cin) {
	int j = get_global_id(0);
	int nt = k1 * nf;
	if (j < nt) {
		w[woff + j] = (float)p[poff + j];
		return;
	}
	int r = j - nt;
	int c = r % cin, t = r / cin;
	int f = t % nf, tap = t / nf;
	w[woff + j] = (float)p[poff + ((8 - tap) * cin + c) * nf + f];
}
