//go:build amd64 && !purego

#include "textflag.h"

// Element-wise kernels (see vec.go). n is a positive multiple of 8 and
// every loop handles 8 floats per iteration. The approximations are those
// of expf and tanhf, with FMA.

// Constants, each repeated over a 32-byte vector so that it can be a
// memory operand.
#define VEC8(off, v) \
	DATA c<>+(off)(SB)/4, v; DATA c<>+(off+4)(SB)/4, v; \
	DATA c<>+(off+8)(SB)/4, v; DATA c<>+(off+12)(SB)/4, v; \
	DATA c<>+(off+16)(SB)/4, v; DATA c<>+(off+20)(SB)/4, v; \
	DATA c<>+(off+24)(SB)/4, v; DATA c<>+(off+28)(SB)/4, v

VEC8(0, $0x42b00000)   // expHi = 88
VEC8(32, $0xc2aeac50)  // expLo = -87.33655
VEC8(64, $0x3fb8aa3b)  // log2e
VEC8(96, $0x4b400000)  // roundMag = 1.5·2²³
VEC8(128, $0x3f318000) // ln2Hi = 0.693359375
VEC8(160, $0xb95e8083) // ln2Lo = -2.1219444e-4
VEC8(192, $0x39506967) // expP0
VEC8(224, $0x3ab743ce) // expP1
VEC8(256, $0x3c088908) // expP2
VEC8(288, $0x3d2aa9c1) // expP3
VEC8(320, $0x3e2aaaaa) // expP4
VEC8(352, $0x3f000000) // expP5
VEC8(384, $0x3f800000) // 1
VEC8(416, $0x3f200000) // tanhCut = 0.625
VEC8(448, $0xbbbaf0ea) // tanhP0
VEC8(480, $0x3ca9134e) // tanhP1
VEC8(512, $0xbd5c1e2d) // tanhP2
VEC8(544, $0x3e088393) // tanhP3
VEC8(576, $0xbeaaaa99) // tanhP4
VEC8(608, $0x40000000) // 2
VEC8(640, $0x0000007f) // int32 127, the exponent bias
VEC8(672, $0x7fffffff) // |x| mask
VEC8(704, $0x80000000) // sign mask
GLOBL c<>(SB), RODATA|NOPTR, $736

#define C_expHi c<>+0(SB)
#define C_expLo c<>+32(SB)
#define C_log2e c<>+64(SB)
#define C_roundMag c<>+96(SB)
#define C_ln2Hi c<>+128(SB)
#define C_ln2Lo c<>+160(SB)
#define C_expP0 c<>+192(SB)
#define C_expP1 c<>+224(SB)
#define C_expP2 c<>+256(SB)
#define C_expP3 c<>+288(SB)
#define C_expP4 c<>+320(SB)
#define C_expP5 c<>+352(SB)
#define C_one c<>+384(SB)
#define C_tanhCut c<>+416(SB)
#define C_tanhP0 c<>+448(SB)
#define C_tanhP1 c<>+480(SB)
#define C_tanhP2 c<>+512(SB)
#define C_tanhP3 c<>+544(SB)
#define C_tanhP4 c<>+576(SB)
#define C_two c<>+608(SB)
#define C_bias127 c<>+640(SB)
#define C_abs c<>+672(SB)
#define C_sign c<>+704(SB)

// EXPCORE sets x = e^x for x already within [expLo, expHi] (or NaN),
// using n, r, p, t as scratch.
#define EXPCORE(x, n, r, p, t) \
	VMULPS C_log2e, x, n; \
	VADDPS C_roundMag, n, n; \
	VSUBPS C_roundMag, n, n; \
	VMOVAPS x, r; \
	VFNMADD231PS C_ln2Hi, n, r; \
	VFNMADD231PS C_ln2Lo, n, r; \
	VMOVUPS C_expP0, p; \
	VFMADD213PS C_expP1, r, p; \
	VFMADD213PS C_expP2, r, p; \
	VFMADD213PS C_expP3, r, p; \
	VFMADD213PS C_expP4, r, p; \
	VFMADD213PS C_expP5, r, p; \
	VMULPS r, r, t; \
	VFMADD213PS r, t, p; \
	VADDPS C_one, p, p; \
	VCVTPS2DQ n, n; \
	VPADDD C_bias127, n, n; \
	VPSLLD $23, n, n; \
	VMULPS n, p, x

// EXP sets x = e^x, clamping x first; the clamps return their second
// source, x, when it is NaN, so NaN passes through.
#define EXP(x, n, r, p, t) \
	VMOVUPS C_expHi, t; \
	VMINPS x, t, x; \
	VMOVUPS C_expLo, t; \
	VMAXPS x, t, x; \
	EXPCORE(x, n, r, p, t)

// TANH sets x = tanh(x) with scratch Y1-Y9: the odd polynomial below
// tanhCut, 1 - 2/(e^2|x| + 1) with the sign of x above it, blended.
#define TANH(x) \
	VANDPS C_abs, x, Y1; \
	VMULPS x, x, Y2; \
	VMOVUPS C_tanhP0, Y3; \
	VFMADD213PS C_tanhP1, Y2, Y3; \
	VFMADD213PS C_tanhP2, Y2, Y3; \
	VFMADD213PS C_tanhP3, Y2, Y3; \
	VFMADD213PS C_tanhP4, Y2, Y3; \
	VMULPS Y2, Y3, Y3; \
	VFMADD213PS x, x, Y3; \
	VADDPS Y1, Y1, Y4; \
	EXP(Y4, Y5, Y6, Y7, Y8); \
	VADDPS C_one, Y4, Y4; \
	VMOVUPS C_two, Y5; \
	VDIVPS Y4, Y5, Y5; \
	VMOVUPS C_one, Y6; \
	VSUBPS Y5, Y6, Y6; \
	VANDPS C_sign, x, Y9; \
	VORPS Y9, Y6, Y6; \
	VCMPPS $0x11, C_tanhCut, Y1, Y9; \
	VBLENDVPS Y9, Y3, Y6, x

// func expAVX(dst, src *float32, n int)
TEXT ·expAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ AX, AX

exploop:
	VMOVUPS (SI)(AX*1), Y0
	EXP(Y0, Y1, Y2, Y3, Y4)
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, CX
	JLT     exploop
	VZEROUPPER
	RET

// func tanhAVX(dst, src *float32, n int)
TEXT ·tanhAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ AX, AX

tanhloop:
	VMOVUPS (SI)(AX*1), Y0
	TANH(Y0)
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, CX
	JLT     tanhloop
	VZEROUPPER
	RET

// func couplingAVX(y, x, o, t, s, ld *float32, n int)
TEXT ·couplingAVX(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ o+16(FP), R8
	MOVQ t+24(FP), R9
	MOVQ s+32(FP), R10
	MOVQ ld+40(FP), R12
	MOVQ n+48(FP), CX
	SHLQ $2, CX
	XORQ AX, AX

couploop:
	VMOVUPS (R8)(AX*1), Y0
	TANH(Y0)
	VMOVUPS Y0, (R10)(AX*1)
	VADDPS  (R12)(AX*1), Y0, Y1
	VMOVUPS Y1, (R12)(AX*1)
	// |s| < 1: exp needs no clamping.
	EXPCORE(Y0, Y1, Y2, Y3, Y4)
	VMOVUPS (R9)(AX*1), Y1
	VFMADD231PS (SI)(AX*1), Y0, Y1
	VMOVUPS Y1, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, CX
	JLT     couploop
	VZEROUPPER
	RET

// func couplingGradAVX(gs, gt, gy, x, s, gl *float32, n int)
// (g is the goroutine register to the assembler: the gradient is gy.)
// e = exp(s) is recomputed exactly as couplingAVX computed it.
TEXT ·couplingGradAVX(SB), NOSPLIT, $0-56
	MOVQ gs+0(FP), DI
	MOVQ gt+8(FP), SI
	MOVQ gy+16(FP), R8
	MOVQ x+24(FP), R9
	MOVQ s+32(FP), R10
	MOVQ gl+40(FP), R12
	MOVQ n+48(FP), CX
	SHLQ $2, CX
	XORQ AX, AX
	VMOVUPS C_one, Y15

gradloop:
	VMOVUPS (R10)(AX*1), Y5 // s
	VMOVAPS Y5, Y6
	EXPCORE(Y6, Y1, Y2, Y3, Y4) // e
	VMOVUPS (R8)(AX*1), Y0
	VMOVUPS Y0, (SI)(AX*1)
	VMULPS  Y6, Y0, Y1 // g·e
	VMOVUPS Y1, (R8)(AX*1)
	VMOVUPS (R12)(AX*1), Y2
	VFMADD231PS (R9)(AX*1), Y1, Y2 // g·e·x + gl
	VMOVAPS Y15, Y4
	VFNMADD231PS Y5, Y5, Y4 // 1 - s²
	VMULPS  Y4, Y2, Y2
	VMOVUPS Y2, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, CX
	JLT     gradloop
	VZEROUPPER
	RET

// func rowSumsAVX(dst, src *float32, rows, cols, ld int)
//
// dst[i] += the sum of row i: four interleaved vector sums over blocks of
// 32 floats, the remaining blocks of 8 into the first, then
// (s0+s1)+(s2+s3) reduced across lanes.
TEXT ·rowSumsAVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ cols+24(FP), CX
	SHLQ $2, CX
	MOVQ ld+32(FP), R8
	SHLQ $2, R8
	MOVQ CX, R9
	ANDQ $-128, R9 // bytes covered by blocks of 32

rowloop:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX
	CMPQ   AX, R9
	JGE    tail

wide:
	VADDPS (SI)(AX*1), Y0, Y0
	VADDPS 32(SI)(AX*1), Y1, Y1
	VADDPS 64(SI)(AX*1), Y2, Y2
	VADDPS 96(SI)(AX*1), Y3, Y3
	ADDQ   $128, AX
	CMPQ   AX, R9
	JLT    wide

tail:
	CMPQ AX, CX
	JGE  reduce
	VADDPS (SI)(AX*1), Y0, Y0
	ADDQ   $32, AX
	JMP    tail

reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VADDSS       (DI), X0, X0
	VMOVSS       X0, (DI)
	ADDQ         $4, DI
	ADDQ         R8, SI
	DECQ         DX
	JNZ          rowloop
	VZEROUPPER
	RET

// func toFloat32AVX(dst *float32, ldd int, src *float64, lds, rows, cols int)
//
// Converts rows ≥ 1 rows of cols floats: four per instruction, then one at
// a time.
TEXT ·toFloat32AVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $3, R9
	MOVQ rows+32(FP), DX
	MOVQ cols+40(FP), CX
	MOVQ CX, R10
	ANDQ $-4, R10

f32row:
	XORQ AX, AX

f32vec:
	CMPQ       AX, R10
	JGE        f32tail
	VCVTPD2PSY (SI)(AX*8), X0
	VMOVUPS    X0, (DI)(AX*4)
	ADDQ       $4, AX
	JMP        f32vec

f32tail:
	CMPQ      AX, CX
	JGE       f32next
	VCVTSD2SS (SI)(AX*8), X0, X0
	VMOVSS    X0, (DI)(AX*4)
	INCQ      AX
	JMP       f32tail

f32next:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ DX
	JNZ  f32row
	VZEROUPPER
	RET

// func toFloat64AVX(dst *float64, ldd int, src *float32, lds, rows, cols int)
TEXT ·toFloat64AVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $3, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), DX
	MOVQ cols+40(FP), CX
	MOVQ CX, R10
	ANDQ $-4, R10

f64row:
	XORQ AX, AX

f64vec:
	CMPQ      AX, R10
	JGE       f64tail
	VCVTPS2PD (SI)(AX*4), Y0
	VMOVUPD   Y0, (DI)(AX*8)
	ADDQ      $4, AX
	JMP       f64vec

f64tail:
	CMPQ      AX, CX
	JGE       f64next
	VCVTSS2SD (SI)(AX*4), X0, X0
	VMOVSD    X0, (DI)(AX*8)
	INCQ      AX
	JMP       f64tail

f64next:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ DX
	JNZ  f64row
	VZEROUPPER
	RET

// func addToFloat64AVX(dst *float64, src *float32, n int)
//
// n is a positive multiple of 8.
TEXT ·addToFloat64AVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

addf64loop:
	VCVTPS2PD (SI)(AX*4), Y0
	VCVTPS2PD 16(SI)(AX*4), Y1
	VADDPD    (DI)(AX*8), Y0, Y0
	VADDPD    32(DI)(AX*8), Y1, Y1
	VMOVUPD   Y0, (DI)(AX*8)
	VMOVUPD   Y1, 32(DI)(AX*8)
	ADDQ      $8, AX
	CMPQ      AX, CX
	JLT       addf64loop
	VZEROUPPER
	RET
