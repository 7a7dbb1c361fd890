//go:build amd64 && !purego

#include "textflag.h"

// Micro-kernels implementing gemmcore.Kernel (see gemmcore.go) for AVX2
// and FMA3. dgemm's float64 kernels are generated from this file (see
// ELEM below); column counts here are float32's, float64 has half as many.
//
// Element (p, i) of A is at a + p·sa + i·ra: with ra = 1 that is a packed
// panel or a stored Aᵀ, with sa = 1 a stored A read in place, so A is never
// packed. Row p of B is at b + p·sb.
//
// One call computes nt row tiles of one column panel, tile t with base
// rows plus one if t < extra, at consecutive rows of A, C, bias and mask;
// the running pointers and the tile index live in the frame.
//
// Register use in the k loops:
//	DX rows, CX k counter, R8 sa and R13 ra (bytes), R9 sb (bytes),
//	SI &A[p][0] and BX &A[p][3] (rows 0-2 and 3-5 are base, base+ra,
//	base+2ra), DI row p of B;
//	16 columns: row i of the tile accumulates in Y(2i) (columns 0-7) and
//	Y(2i+1) (columns 8-15); Y12, Y13 hold row p of B, Y14 (Y15) a
//	broadcast element of A; two k steps per iteration, the second
//	addressing A through R10, R11 (A at p+1) and B at DI+R9.
//	8 columns: two k steps per iteration, even p into Y(2i) and odd p into
//	Y(2i+1) (so that 12 FMA chains hide the FMA latency), summed at the
//	end; R10, R11 address A at p+1, Y13 holds row p+1 of B and Y15 its
//	broadcast.
// Epilogue: BX flags, R10 C, R11 C stride, R12 mask stride (bytes), AX
// the row pointer being walked, Y12 alpha, Y13 beta, Y14 zero, Y15 scratch.
// Flag bits: 1 beta, 2 alpha, 4 bias, 8 ReLU, 16 mask.

// ELEM is the size of an element in bytes, 1<<ELEMSHIFT. dgemm/gen makes
// dgemm's kernel_amd64.s from this file: packed-single arithmetic becomes
// packed-double, ELEM and ELEMSHIFT become 8 and 3, argument offsets
// follow the float64 signatures and each kernel is named by its halved
// panel width. So element sizes are written with these two, never as
// numbers.
#define ELEM 4
#define ELEMSHIFT 2

#define ZERO12 \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; VXORPS Y9, Y9, Y9; VXORPS Y10, Y10, Y10; VXORPS Y11, Y11, Y11

#define ARGS \
	MOVQ a+32(FP), AX; \
	MOVQ AX, acur-8(SP); \
	MOVQ c+72(FP), AX; \
	MOVQ AX, ccur-16(SP); \
	MOVQ bias+104(FP), AX; \
	MOVQ AX, bcur-24(SP); \
	MOVQ mask+112(FP), AX; \
	MOVQ AX, mcur-32(SP); \
	MOVQ $0, tile-40(SP)

// TILE loads the state of the next row tile: DX its rows (base, plus one
// for the first extra tiles), SI/BX its A, DI the B panel, CX = kc.
#define TILE \
	MOVQ base+8(FP), DX; \
	LEAQ 1(DX), AX; \
	MOVQ tile-40(SP), R12; \
	CMPQ R12, extra+16(FP); \
	CMOVQLT AX, DX; \
	MOVQ kc+24(FP), CX; \
	MOVQ acur-8(SP), SI; \
	MOVQ sa+40(FP), R8; \
	SHLQ $ELEMSHIFT, R8; \
	MOVQ ra+48(FP), R13; \
	SHLQ $ELEMSHIFT, R13; \
	LEAQ (R13)(R13*2), BX; \
	ADDQ SI, BX; \
	MOVQ b+56(FP), DI; \
	MOVQ sb+64(FP), R9; \
	SHLQ $ELEMSHIFT, R9

// NEXTTILE advances the tile state by DX rows and loops to label top while
// tiles remain.
#define NEXTTILE(top) \
	MOVQ ra+48(FP), AX; \
	IMULQ DX, AX; \
	SHLQ $ELEMSHIFT, AX; \
	ADDQ AX, acur-8(SP); \
	MOVQ ldc+80(FP), AX; \
	IMULQ DX, AX; \
	SHLQ $ELEMSHIFT, AX; \
	ADDQ AX, ccur-16(SP); \
	LEAQ (DX*ELEM), AX; \
	ADDQ AX, bcur-24(SP); \
	MOVQ ldm+120(FP), AX; \
	IMULQ DX, AX; \
	SHLQ $ELEMSHIFT, AX; \
	ADDQ AX, mcur-32(SP); \
	MOVQ tile-40(SP), AX; \
	INCQ AX; \
	MOVQ AX, tile-40(SP); \
	CMPQ AX, nt+0(FP); \
	JLT top

#define NEXTK ADDQ R8, SI; ADDQ R8, BX; ADDQ R9, DI; DECQ CX

#define FMA16(addr, x0, x1) VBROADCASTSS addr, Y14; VFMADD231PS Y12, Y14, x0; VFMADD231PS Y13, Y14, x1
#define FMA16B(addr, x0, x1) VBROADCASTSS addr, Y15; VFMADD231PS Y12, Y15, x0; VFMADD231PS Y13, Y15, x1
#define FMA8(addr, x0) VBROADCASTSS addr, Y14; VFMADD231PS Y12, Y14, x0
#define FMA8B(addr, x1) VBROADCASTSS addr, Y15; VFMADD231PS Y13, Y15, x1

// Epilogue steps for one row; AX points at the row's C, bias or mask.
#define SCALE16(x0, x1) VMULPS Y12, x0, x0; VMULPS Y12, x1, x1
#define BETA16(x0, x1) VFMADD231PS (AX), Y13, x0; VFMADD231PS 32(AX), Y13, x1
#define BIAS16(row, x0, x1) VBROADCASTSS (row*ELEM)(AX), Y15; VADDPS Y15, x0, x0; VADDPS Y15, x1, x1
// max(0, x) returning x itself when x is NaN or ±0 (the second source).
#define RELU16(x0, x1) VMAXPS x0, Y14, x0; VMAXPS x1, Y14, x1
// Keep x where 0 < mask (ordered: a NaN mask clears).
#define MASK16(x0, x1) VCMPPS $0x11, (AX), Y14, Y15; VANDPS Y15, x0, x0; VCMPPS $0x11, 32(AX), Y14, Y15; VANDPS Y15, x1, x1
#define STORE16(x0, x1) VMOVUPS x0, (AX); VMOVUPS x1, 32(AX)

#define SCALE8(x0) VMULPS Y12, x0, x0
#define BETA8(x0) VFMADD231PS (AX), Y13, x0
#define BIAS8(row, x0) VBROADCASTSS (row*ELEM)(AX), Y15; VADDPS Y15, x0, x0
#define RELU8(x0) VMAXPS x0, Y14, x0
#define MASK8(x0) VCMPPS $0x11, (AX), Y14, Y15; VANDPS Y15, x0, x0
#define STORE8(x0) VMOVUPS x0, (AX)

// After row n, stop at label done if the tile has n rows, else step AX.
#define NEXTROW(n, done, step) CMPQ DX, $n; JEQ done; ADDQ step, AX
#define LASTROW(n, done) CMPQ DX, $n; JEQ done

// func kern16AVX2(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)
TEXT ·kern16AVX2(SB), NOSPLIT, $40-128
	ARGS

k16tile:
	TILE
	ZERO12
	CMPQ DX, $6
	JEQ  k16r6
	CMPQ DX, $5
	JEQ  k16r5
	CMPQ DX, $4
	JEQ  k16r4
	CMPQ DX, $3
	JEQ  k16r3
	CMPQ DX, $2
	JEQ  k16r2

k16r1:
	TESTQ $1, CX
	JZ   k16r1pre
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	NEXTK
	JZ   k16e

k16r1pre:
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11

k16r1pair:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	VMOVUPS (DI)(R9*1), Y12
	VMOVUPS 32(DI)(R9*1), Y13
	FMA16B((R10), Y0, Y1)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	JNZ  k16r1pair
	JMP k16e

k16r2:
	TESTQ $1, CX
	JZ   k16r2pre
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	NEXTK
	JZ   k16e

k16r2pre:
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11

k16r2pair:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	VMOVUPS (DI)(R9*1), Y12
	VMOVUPS 32(DI)(R9*1), Y13
	FMA16B((R10), Y0, Y1)
	FMA16B((R10)(R13*1), Y2, Y3)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	JNZ  k16r2pair
	JMP k16e

k16r3:
	TESTQ $1, CX
	JZ   k16r3pre
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	NEXTK
	JZ   k16e

k16r3pre:
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11

k16r3pair:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	VMOVUPS (DI)(R9*1), Y12
	VMOVUPS 32(DI)(R9*1), Y13
	FMA16B((R10), Y0, Y1)
	FMA16B((R10)(R13*1), Y2, Y3)
	FMA16B((R10)(R13*2), Y4, Y5)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	JNZ  k16r3pair
	JMP k16e

k16r4:
	TESTQ $1, CX
	JZ   k16r4pre
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	FMA16((BX), Y6, Y7)
	NEXTK
	JZ   k16e

k16r4pre:
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11

k16r4pair:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	FMA16((BX), Y6, Y7)
	VMOVUPS (DI)(R9*1), Y12
	VMOVUPS 32(DI)(R9*1), Y13
	FMA16B((R10), Y0, Y1)
	FMA16B((R10)(R13*1), Y2, Y3)
	FMA16B((R10)(R13*2), Y4, Y5)
	FMA16B((R11), Y6, Y7)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	JNZ  k16r4pair
	JMP k16e

k16r5:
	TESTQ $1, CX
	JZ   k16r5pre
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	FMA16((BX), Y6, Y7)
	FMA16((BX)(R13*1), Y8, Y9)
	NEXTK
	JZ   k16e

k16r5pre:
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11

k16r5pair:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	FMA16((BX), Y6, Y7)
	FMA16((BX)(R13*1), Y8, Y9)
	VMOVUPS (DI)(R9*1), Y12
	VMOVUPS 32(DI)(R9*1), Y13
	FMA16B((R10), Y0, Y1)
	FMA16B((R10)(R13*1), Y2, Y3)
	FMA16B((R10)(R13*2), Y4, Y5)
	FMA16B((R11), Y6, Y7)
	FMA16B((R11)(R13*1), Y8, Y9)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	JNZ  k16r5pair
	JMP k16e

k16r6:
	TESTQ $1, CX
	JZ   k16r6pre
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	FMA16((BX), Y6, Y7)
	FMA16((BX)(R13*1), Y8, Y9)
	FMA16((BX)(R13*2), Y10, Y11)
	NEXTK
	JZ   k16e

k16r6pre:
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11

k16r6pair:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	FMA16((SI), Y0, Y1)
	FMA16((SI)(R13*1), Y2, Y3)
	FMA16((SI)(R13*2), Y4, Y5)
	FMA16((BX), Y6, Y7)
	FMA16((BX)(R13*1), Y8, Y9)
	FMA16((BX)(R13*2), Y10, Y11)
	VMOVUPS (DI)(R9*1), Y12
	VMOVUPS 32(DI)(R9*1), Y13
	FMA16B((R10), Y0, Y1)
	FMA16B((R10)(R13*1), Y2, Y3)
	FMA16B((R10)(R13*2), Y4, Y5)
	FMA16B((R11), Y6, Y7)
	FMA16B((R11)(R13*1), Y8, Y9)
	FMA16B((R11)(R13*2), Y10, Y11)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	JNZ  k16r6pair
	JMP k16e

k16e:
	MOVQ flags+96(FP), BX
	MOVQ ccur-16(SP), R10
	MOVQ ldc+80(FP), R11
	SHLQ $ELEMSHIFT, R11
	VXORPS Y14, Y14, Y14

	TESTQ $2, BX
	JZ    k16beta
	VBROADCASTSS alpha+88(FP), Y12
	SCALE16(Y0, Y1)
	SCALE16(Y2, Y3)
	SCALE16(Y4, Y5)
	SCALE16(Y6, Y7)
	SCALE16(Y8, Y9)
	SCALE16(Y10, Y11)

k16beta:
	TESTQ $1, BX
	JZ    k16bias
	VBROADCASTSS beta+92(FP), Y13
	MOVQ R10, AX
	BETA16(Y0, Y1)
	NEXTROW(1, k16bias, R11)
	BETA16(Y2, Y3)
	NEXTROW(2, k16bias, R11)
	BETA16(Y4, Y5)
	NEXTROW(3, k16bias, R11)
	BETA16(Y6, Y7)
	NEXTROW(4, k16bias, R11)
	BETA16(Y8, Y9)
	NEXTROW(5, k16bias, R11)
	BETA16(Y10, Y11)

k16bias:
	TESTQ $4, BX
	JZ    k16relu
	MOVQ bcur-24(SP), AX
	BIAS16(0, Y0, Y1)
	LASTROW(1, k16relu)
	BIAS16(1, Y2, Y3)
	LASTROW(2, k16relu)
	BIAS16(2, Y4, Y5)
	LASTROW(3, k16relu)
	BIAS16(3, Y6, Y7)
	LASTROW(4, k16relu)
	BIAS16(4, Y8, Y9)
	LASTROW(5, k16relu)
	BIAS16(5, Y10, Y11)

k16relu:
	TESTQ $8, BX
	JZ    k16mask
	RELU16(Y0, Y1)
	RELU16(Y2, Y3)
	RELU16(Y4, Y5)
	RELU16(Y6, Y7)
	RELU16(Y8, Y9)
	RELU16(Y10, Y11)

k16mask:
	TESTQ $16, BX
	JZ    k16store
	MOVQ mcur-32(SP), AX
	MOVQ ldm+120(FP), R12
	SHLQ $ELEMSHIFT, R12
	MASK16(Y0, Y1)
	NEXTROW(1, k16store, R12)
	MASK16(Y2, Y3)
	NEXTROW(2, k16store, R12)
	MASK16(Y4, Y5)
	NEXTROW(3, k16store, R12)
	MASK16(Y6, Y7)
	NEXTROW(4, k16store, R12)
	MASK16(Y8, Y9)
	NEXTROW(5, k16store, R12)
	MASK16(Y10, Y11)

k16store:
	MOVQ R10, AX
	STORE16(Y0, Y1)
	NEXTROW(1, k16done, R11)
	STORE16(Y2, Y3)
	NEXTROW(2, k16done, R11)
	STORE16(Y4, Y5)
	NEXTROW(3, k16done, R11)
	STORE16(Y6, Y7)
	NEXTROW(4, k16done, R11)
	STORE16(Y8, Y9)
	NEXTROW(5, k16done, R11)
	STORE16(Y10, Y11)

k16done:
	NEXTTILE(k16tile)
	VZEROUPPER
	RET

// func kern8AVX2(nt, base, extra, kc int, a *float32, sa, ra int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)
TEXT ·kern8AVX2(SB), NOSPLIT, $40-128
	ARGS

k8tile:
	TILE
	ZERO12
	MOVQ SI, R10
	ADDQ R8, R10
	MOVQ BX, R11
	ADDQ R8, R11
	CMPQ DX, $6
	JEQ  k8r6
	CMPQ DX, $5
	JEQ  k8r5
	CMPQ DX, $4
	JEQ  k8r4
	CMPQ DX, $3
	JEQ  k8r3
	CMPQ DX, $2
	JEQ  k8r2

k8r1:
	CMPQ CX, $1
	JEQ  k8r1last

k8r1pair:
	VMOVUPS (DI), Y12
	VMOVUPS (DI)(R9*1), Y13
	FMA8((SI), Y0)
	FMA8B((R10), Y1)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	CMPQ CX, $1
	JGT  k8r1pair
	JLT  k8sum

k8r1last:
	VMOVUPS (DI), Y12
	FMA8((SI), Y0)
	JMP k8sum

k8r2:
	CMPQ CX, $1
	JEQ  k8r2last

k8r2pair:
	VMOVUPS (DI), Y12
	VMOVUPS (DI)(R9*1), Y13
	FMA8((SI), Y0)
	FMA8B((R10), Y1)
	FMA8((SI)(R13*1), Y2)
	FMA8B((R10)(R13*1), Y3)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	CMPQ CX, $1
	JGT  k8r2pair
	JLT  k8sum

k8r2last:
	VMOVUPS (DI), Y12
	FMA8((SI), Y0)
	FMA8((SI)(R13*1), Y2)
	JMP k8sum

k8r3:
	CMPQ CX, $1
	JEQ  k8r3last

k8r3pair:
	VMOVUPS (DI), Y12
	VMOVUPS (DI)(R9*1), Y13
	FMA8((SI), Y0)
	FMA8B((R10), Y1)
	FMA8((SI)(R13*1), Y2)
	FMA8B((R10)(R13*1), Y3)
	FMA8((SI)(R13*2), Y4)
	FMA8B((R10)(R13*2), Y5)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	CMPQ CX, $1
	JGT  k8r3pair
	JLT  k8sum

k8r3last:
	VMOVUPS (DI), Y12
	FMA8((SI), Y0)
	FMA8((SI)(R13*1), Y2)
	FMA8((SI)(R13*2), Y4)
	JMP k8sum

k8r4:
	CMPQ CX, $1
	JEQ  k8r4last

k8r4pair:
	VMOVUPS (DI), Y12
	VMOVUPS (DI)(R9*1), Y13
	FMA8((SI), Y0)
	FMA8B((R10), Y1)
	FMA8((SI)(R13*1), Y2)
	FMA8B((R10)(R13*1), Y3)
	FMA8((SI)(R13*2), Y4)
	FMA8B((R10)(R13*2), Y5)
	FMA8((BX), Y6)
	FMA8B((R11), Y7)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	CMPQ CX, $1
	JGT  k8r4pair
	JLT  k8sum

k8r4last:
	VMOVUPS (DI), Y12
	FMA8((SI), Y0)
	FMA8((SI)(R13*1), Y2)
	FMA8((SI)(R13*2), Y4)
	FMA8((BX), Y6)
	JMP k8sum

k8r5:
	CMPQ CX, $1
	JEQ  k8r5last

k8r5pair:
	VMOVUPS (DI), Y12
	VMOVUPS (DI)(R9*1), Y13
	FMA8((SI), Y0)
	FMA8B((R10), Y1)
	FMA8((SI)(R13*1), Y2)
	FMA8B((R10)(R13*1), Y3)
	FMA8((SI)(R13*2), Y4)
	FMA8B((R10)(R13*2), Y5)
	FMA8((BX), Y6)
	FMA8B((R11), Y7)
	FMA8((BX)(R13*1), Y8)
	FMA8B((R11)(R13*1), Y9)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	CMPQ CX, $1
	JGT  k8r5pair
	JLT  k8sum

k8r5last:
	VMOVUPS (DI), Y12
	FMA8((SI), Y0)
	FMA8((SI)(R13*1), Y2)
	FMA8((SI)(R13*2), Y4)
	FMA8((BX), Y6)
	FMA8((BX)(R13*1), Y8)
	JMP k8sum

k8r6:
	CMPQ CX, $1
	JEQ  k8r6last

k8r6pair:
	VMOVUPS (DI), Y12
	VMOVUPS (DI)(R9*1), Y13
	FMA8((SI), Y0)
	FMA8B((R10), Y1)
	FMA8((SI)(R13*1), Y2)
	FMA8B((R10)(R13*1), Y3)
	FMA8((SI)(R13*2), Y4)
	FMA8B((R10)(R13*2), Y5)
	FMA8((BX), Y6)
	FMA8B((R11), Y7)
	FMA8((BX)(R13*1), Y8)
	FMA8B((R11)(R13*1), Y9)
	FMA8((BX)(R13*2), Y10)
	FMA8B((R11)(R13*2), Y11)
	LEAQ (SI)(R8*2), SI
	LEAQ (BX)(R8*2), BX
	LEAQ (R10)(R8*2), R10
	LEAQ (R11)(R8*2), R11
	LEAQ (DI)(R9*2), DI
	SUBQ $2, CX
	CMPQ CX, $1
	JGT  k8r6pair
	JLT  k8sum

k8r6last:
	VMOVUPS (DI), Y12
	FMA8((SI), Y0)
	FMA8((SI)(R13*1), Y2)
	FMA8((SI)(R13*2), Y4)
	FMA8((BX), Y6)
	FMA8((BX)(R13*1), Y8)
	FMA8((BX)(R13*2), Y10)
	JMP k8sum

k8sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VADDPS Y9, Y8, Y8
	VADDPS Y11, Y10, Y10

k8e:
	MOVQ flags+96(FP), BX
	MOVQ ccur-16(SP), R10
	MOVQ ldc+80(FP), R11
	SHLQ $ELEMSHIFT, R11
	VXORPS Y14, Y14, Y14

	TESTQ $2, BX
	JZ    k8beta
	VBROADCASTSS alpha+88(FP), Y12
	SCALE8(Y0)
	SCALE8(Y2)
	SCALE8(Y4)
	SCALE8(Y6)
	SCALE8(Y8)
	SCALE8(Y10)

k8beta:
	TESTQ $1, BX
	JZ    k8bias
	VBROADCASTSS beta+92(FP), Y13
	MOVQ R10, AX
	BETA8(Y0)
	NEXTROW(1, k8bias, R11)
	BETA8(Y2)
	NEXTROW(2, k8bias, R11)
	BETA8(Y4)
	NEXTROW(3, k8bias, R11)
	BETA8(Y6)
	NEXTROW(4, k8bias, R11)
	BETA8(Y8)
	NEXTROW(5, k8bias, R11)
	BETA8(Y10)

k8bias:
	TESTQ $4, BX
	JZ    k8relu
	MOVQ bcur-24(SP), AX
	BIAS8(0, Y0)
	LASTROW(1, k8relu)
	BIAS8(1, Y2)
	LASTROW(2, k8relu)
	BIAS8(2, Y4)
	LASTROW(3, k8relu)
	BIAS8(3, Y6)
	LASTROW(4, k8relu)
	BIAS8(4, Y8)
	LASTROW(5, k8relu)
	BIAS8(5, Y10)

k8relu:
	TESTQ $8, BX
	JZ    k8mask
	RELU8(Y0)
	RELU8(Y2)
	RELU8(Y4)
	RELU8(Y6)
	RELU8(Y8)
	RELU8(Y10)

k8mask:
	TESTQ $16, BX
	JZ    k8store
	MOVQ mcur-32(SP), AX
	MOVQ ldm+120(FP), R12
	SHLQ $ELEMSHIFT, R12
	MASK8(Y0)
	NEXTROW(1, k8store, R12)
	MASK8(Y2)
	NEXTROW(2, k8store, R12)
	MASK8(Y4)
	NEXTROW(3, k8store, R12)
	MASK8(Y6)
	NEXTROW(4, k8store, R12)
	MASK8(Y8)
	NEXTROW(5, k8store, R12)
	MASK8(Y10)

k8store:
	MOVQ R10, AX
	STORE8(Y0)
	NEXTROW(1, k8done, R11)
	STORE8(Y2)
	NEXTROW(2, k8done, R11)
	STORE8(Y4)
	NEXTROW(3, k8done, R11)
	STORE8(Y6)
	NEXTROW(4, k8done, R11)
	STORE8(Y8)
	NEXTROW(5, k8done, R11)
	STORE8(Y10)

k8done:
	NEXTTILE(k8tile)
	VZEROUPPER
	RET
