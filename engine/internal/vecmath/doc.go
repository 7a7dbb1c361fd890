// Package vecmath holds the engine's four-lane float64 kernels other than
// the matrix product: Adam's update, Sincos for the random features, and
// the noise of every step, Bits (xoshiro256+ in four lanes) and Normals
// (Box–Muller on those bits), which together make 128k normals in a third
// of the time of rand's ziggurat.
//
// Each has an AVX2 path and a portable one that give the same bits on every
// machine and build (no fused multiply-add on either side), so a run's
// numbers do not depend on the CPU it ran on. They live apart from package
// dgemm because nothing here is a matrix product: they share its lane
// width and its rule of fixed-order arithmetic, not its code.
package vecmath
