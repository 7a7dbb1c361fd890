// Kernels shared by the device backbones.
//
// Conversions between the host's float64 and the device's float32, for
// devices with cl_khr_fp64 (a device without it converts on the host:
// every program must build on every device). The cast rounds to nearest
// even, as Go's float32(x) does, so the bits equal the host's.
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void f64_to_f32(__global const double *src, __global float *dst, const int n) {
	int i = get_global_id(0);
	if (i < n) dst[i] = (float)src[i];
}

__kernel void f32_to_f64(__global const float *src, __global double *dst, const int n) {
	int i = get_global_id(0);
	if (i < n) dst[i] = (double)src[i];
}
#endif
