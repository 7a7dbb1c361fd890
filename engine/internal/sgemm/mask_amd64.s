//go:build amd64 && !purego

#include "textflag.h"

// SplitMix64 in AVX2, four 64-bit lanes per register. AVX2 has no 64-bit
// multiply: MUL64 builds the low 64 bits of z·c from 32-bit products,
// lo(z)·lo(c) + (hi(z)·lo(c) + lo(z)·hi(c))·2³², with ch holding hi(c) in
// the low half of each lane.
#define MUL64(z, c, ch, t1, t2) \
	VPSRLQ   $32, z, t1; \
	VPMULUDQ c, t1, t1; \
	VPMULUDQ ch, z, t2; \
	VPADDQ   t2, t1, t1; \
	VPSLLQ   $32, t1, t1; \
	VPMULUDQ c, z, z; \
	VPADDQ   t1, z, z

#define XORSHR(z, s, t) VPSRLQ $s, z, t; VPXOR t, z, z

#define MIX(z, t1, t2) \
	XORSHR(z, 30, t1); \
	MUL64(z, Y2, Y3, t1, t2); \
	XORSHR(z, 27, t1); \
	MUL64(z, Y4, Y5, t1, t2); \
	XORSHR(z, 31, t1)

// gammas holds j·γ for j = 1…8: added to the key, the states of outputs
// 1…8.
DATA gammas<>+0(SB)/8, $0x9e3779b97f4a7c15
DATA gammas<>+8(SB)/8, $0x3c6ef372fe94f82a
DATA gammas<>+16(SB)/8, $0xdaa66d2c7ddf743f
DATA gammas<>+24(SB)/8, $0x78dde6e5fd29f054
DATA gammas<>+32(SB)/8, $0x1715609f7c746c69
DATA gammas<>+40(SB)/8, $0xb54cda58fbbee87e
DATA gammas<>+48(SB)/8, $0x538454127b096493
DATA gammas<>+56(SB)/8, $0xf1bbcdcbfa53e0a8
GLOBL gammas<>(SB), RODATA|NOPTR, $64

// func bernoulliAVX(m *float32, key uint64, thr uint32, n int)
//
// n is a positive multiple of 16.
// Registers: Y0, Y1 the states of 8 outputs (16 elements), Y2/Y3 and
// Y4/Y5 the two multipliers (low, high halves), Y6 the step 8γ, Y7 the
// threshold and Y8 the sign bit (unsigned compare as signed, both
// flipped), Y9 1.0.
TEXT ·bernoulliAVX(SB), NOSPLIT, $0-32
	MOVQ m+0(FP), DI
	MOVQ n+24(FP), CX
	MOVQ key+8(FP), AX
	MOVQ AX, X0
	VPBROADCASTQ X0, Y1
	VPADDQ  gammas<>+0(SB), Y1, Y0
	VPADDQ  gammas<>+32(SB), Y1, Y1
	MOVQ    $0xbf58476d1ce4e5b9, AX
	MOVQ    AX, X2
	VPBROADCASTQ X2, Y2
	VPSRLQ  $32, Y2, Y3
	MOVQ    $0x94d049bb133111eb, AX
	MOVQ    AX, X4
	VPBROADCASTQ X4, Y4
	VPSRLQ  $32, Y4, Y5
	MOVQ    $0xf1bbcdcbfa53e0a8, AX // 8γ mod 2⁶⁴
	MOVQ    AX, X6
	VPBROADCASTQ X6, Y6
	MOVL    $0x80000000, AX
	MOVQ    AX, X8
	VPBROADCASTD X8, Y8
	MOVL    thr+16(FP), AX
	MOVQ    AX, X7
	VPBROADCASTD X7, Y7
	VPXOR   Y8, Y7, Y7
	MOVL    $0x3f800000, AX
	MOVQ    AX, X9
	VPBROADCASTD X9, Y9

bernloop:
	VMOVDQA Y0, Y10
	VMOVDQA Y1, Y11
	MIX(Y10, Y12, Y13)
	MIX(Y11, Y14, Y15)
	VPXOR    Y8, Y10, Y10
	VPXOR    Y8, Y11, Y11
	VPCMPGTD Y10, Y7, Y10
	VPCMPGTD Y11, Y7, Y11
	VPAND    Y9, Y10, Y10
	VPAND    Y9, Y11, Y11
	VMOVDQU  Y10, (DI)
	VMOVDQU  Y11, 32(DI)
	VPADDQ   Y6, Y0, Y0
	VPADDQ   Y6, Y1, Y1
	ADDQ     $64, DI
	SUBQ     $16, CX
	JNZ      bernloop
	VZEROUPPER
	RET
