//go:build amd64 && !purego

#include "textflag.h"

// Micro-kernels for kernelFunc (see sgemm.go). Register use:
//	DX rows, CX k counter, SI A row p, R8 A stride (bytes),
//	DI B row p, R9 B stride (bytes);
//	row i of the tile accumulates in Y(2i) (columns 0-7) and Y(2i+1)
//	(columns 8-15); Y12, Y13 hold row p of B, Y14 (and Y15) a broadcast
//	element of A.
//	Epilogue: BX flags, R10 C, R11 C stride, R12 mask stride (bytes),
//	AX the row pointer being walked, Y12 alpha, Y13 beta, Y14 zero,
//	Y15 scratch.
// Flag bits: 1 beta, 2 alpha, 4 bias, 8 ReLU, 16 mask.

#define ZERO12 \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; VXORPS Y9, Y9, Y9; VXORPS Y10, Y10, Y10; VXORPS Y11, Y11, Y11

#define ARGS \
	MOVQ rows+0(FP), DX; \
	MOVQ kc+8(FP), CX; \
	MOVQ a+16(FP), SI; \
	MOVQ sa+24(FP), R8; \
	SHLQ $2, R8; \
	MOVQ b+32(FP), DI; \
	MOVQ sb+40(FP), R9; \
	SHLQ $2, R9

#define NEXTK ADDQ R8, SI; ADDQ R9, DI; DECQ CX

// 16 columns: row p of B in Y12:Y13.
#define LOADB16 VMOVUPS (DI), Y12; VMOVUPS 32(DI), Y13
#define FMA16(off, x0, x1) VBROADCASTSS off(SI), Y14; VFMADD231PS Y12, Y14, x0; VFMADD231PS Y13, Y14, x1

// 8 columns: row p of B in Y12, row i of the tile in Y(2i).
#define LOADB8 VMOVUPS (DI), Y12
#define FMA8(off, x0) VBROADCASTSS off(SI), Y14; VFMADD231PS Y12, Y14, x0

// Epilogue steps for one row; AX points at the row's C, bias or mask.
#define SCALE16(x0, x1) VMULPS Y12, x0, x0; VMULPS Y12, x1, x1
#define BETA16(x0, x1) VFMADD231PS (AX), Y13, x0; VFMADD231PS 32(AX), Y13, x1
#define BIAS16(off, x0, x1) VBROADCASTSS off(AX), Y15; VADDPS Y15, x0, x0; VADDPS Y15, x1, x1
// max(0, x) returning x itself when x is NaN or ±0 (the second source).
#define RELU16(x0, x1) VMAXPS x0, Y14, x0; VMAXPS x1, Y14, x1
// Keep x where 0 < mask (ordered: a NaN mask clears).
#define MASK16(x0, x1) VCMPPS $0x11, (AX), Y14, Y15; VANDPS Y15, x0, x0; VCMPPS $0x11, 32(AX), Y14, Y15; VANDPS Y15, x1, x1
#define STORE16(x0, x1) VMOVUPS x0, (AX); VMOVUPS x1, 32(AX)

#define SCALE8(x0) VMULPS Y12, x0, x0
#define BETA8(x0) VFMADD231PS (AX), Y13, x0
#define BIAS8(off, x0) VBROADCASTSS off(AX), Y15; VADDPS Y15, x0, x0
#define RELU8(x0) VMAXPS x0, Y14, x0
#define MASK8(x0) VCMPPS $0x11, (AX), Y14, Y15; VANDPS Y15, x0, x0
#define STORE8(x0) VMOVUPS x0, (AX)

// After row n, stop at label done if the tile has n rows, else step AX.
#define NEXTROW(n, done, step) CMPQ DX, $n; JEQ done; ADDQ step, AX
#define LASTROW(n, done) CMPQ DX, $n; JEQ done

// func kern16AVX2(rows, kc int, a *float32, sa int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)
TEXT ·kern16AVX2(SB), NOSPLIT, $0-104
	ARGS
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
	LOADB16
	FMA16(0, Y0, Y1)
	NEXTK
	JNZ k16r1
	JMP e16

k16r2:
	LOADB16
	FMA16(0, Y0, Y1)
	FMA16(4, Y2, Y3)
	NEXTK
	JNZ k16r2
	JMP e16

k16r3:
	LOADB16
	FMA16(0, Y0, Y1)
	FMA16(4, Y2, Y3)
	FMA16(8, Y4, Y5)
	NEXTK
	JNZ k16r3
	JMP e16

k16r4:
	LOADB16
	FMA16(0, Y0, Y1)
	FMA16(4, Y2, Y3)
	FMA16(8, Y4, Y5)
	FMA16(12, Y6, Y7)
	NEXTK
	JNZ k16r4
	JMP e16

k16r5:
	LOADB16
	FMA16(0, Y0, Y1)
	FMA16(4, Y2, Y3)
	FMA16(8, Y4, Y5)
	FMA16(12, Y6, Y7)
	FMA16(16, Y8, Y9)
	NEXTK
	JNZ k16r5
	JMP e16

k16r6:
	LOADB16
	FMA16(0, Y0, Y1)
	FMA16(4, Y2, Y3)
	FMA16(8, Y4, Y5)
	FMA16(12, Y6, Y7)
	FMA16(16, Y8, Y9)
	FMA16(20, Y10, Y11)
	NEXTK
	JNZ k16r6

e16:
	MOVQ flags+72(FP), BX
	MOVQ c+48(FP), R10
	MOVQ ldc+56(FP), R11
	SHLQ $2, R11
	VXORPS Y14, Y14, Y14

	TESTQ $2, BX
	JZ    e16beta
	VBROADCASTSS alpha+64(FP), Y12
	SCALE16(Y0, Y1)
	SCALE16(Y2, Y3)
	SCALE16(Y4, Y5)
	SCALE16(Y6, Y7)
	SCALE16(Y8, Y9)
	SCALE16(Y10, Y11)

e16beta:
	TESTQ $1, BX
	JZ    e16bias
	VBROADCASTSS beta+68(FP), Y13
	MOVQ R10, AX
	BETA16(Y0, Y1)
	NEXTROW(1, e16bias, R11)
	BETA16(Y2, Y3)
	NEXTROW(2, e16bias, R11)
	BETA16(Y4, Y5)
	NEXTROW(3, e16bias, R11)
	BETA16(Y6, Y7)
	NEXTROW(4, e16bias, R11)
	BETA16(Y8, Y9)
	NEXTROW(5, e16bias, R11)
	BETA16(Y10, Y11)

e16bias:
	TESTQ $4, BX
	JZ    e16relu
	MOVQ bias+80(FP), AX
	BIAS16(0, Y0, Y1)
	LASTROW(1, e16relu)
	BIAS16(4, Y2, Y3)
	LASTROW(2, e16relu)
	BIAS16(8, Y4, Y5)
	LASTROW(3, e16relu)
	BIAS16(12, Y6, Y7)
	LASTROW(4, e16relu)
	BIAS16(16, Y8, Y9)
	LASTROW(5, e16relu)
	BIAS16(20, Y10, Y11)

e16relu:
	TESTQ $8, BX
	JZ    e16mask
	RELU16(Y0, Y1)
	RELU16(Y2, Y3)
	RELU16(Y4, Y5)
	RELU16(Y6, Y7)
	RELU16(Y8, Y9)
	RELU16(Y10, Y11)

e16mask:
	TESTQ $16, BX
	JZ    e16store
	MOVQ mask+88(FP), AX
	MOVQ ldm+96(FP), R12
	SHLQ $2, R12
	MASK16(Y0, Y1)
	NEXTROW(1, e16store, R12)
	MASK16(Y2, Y3)
	NEXTROW(2, e16store, R12)
	MASK16(Y4, Y5)
	NEXTROW(3, e16store, R12)
	MASK16(Y6, Y7)
	NEXTROW(4, e16store, R12)
	MASK16(Y8, Y9)
	NEXTROW(5, e16store, R12)
	MASK16(Y10, Y11)

e16store:
	MOVQ R10, AX
	STORE16(Y0, Y1)
	NEXTROW(1, e16done, R11)
	STORE16(Y2, Y3)
	NEXTROW(2, e16done, R11)
	STORE16(Y4, Y5)
	NEXTROW(3, e16done, R11)
	STORE16(Y6, Y7)
	NEXTROW(4, e16done, R11)
	STORE16(Y8, Y9)
	NEXTROW(5, e16done, R11)
	STORE16(Y10, Y11)

e16done:
	VZEROUPPER
	RET

// func kern8AVX2(rows, kc int, a *float32, sa int, b *float32, sb int, c *float32, ldc int, alpha, beta float32, flags int, bias, mask *float32, ldm int)
TEXT ·kern8AVX2(SB), NOSPLIT, $0-104
	ARGS
	ZERO12
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
	LOADB8
	FMA8(0, Y0)
	NEXTK
	JNZ k8r1
	JMP e8

k8r2:
	LOADB8
	FMA8(0, Y0)
	FMA8(4, Y2)
	NEXTK
	JNZ k8r2
	JMP e8

k8r3:
	LOADB8
	FMA8(0, Y0)
	FMA8(4, Y2)
	FMA8(8, Y4)
	NEXTK
	JNZ k8r3
	JMP e8

k8r4:
	LOADB8
	FMA8(0, Y0)
	FMA8(4, Y2)
	FMA8(8, Y4)
	FMA8(12, Y6)
	NEXTK
	JNZ k8r4
	JMP e8

k8r5:
	LOADB8
	FMA8(0, Y0)
	FMA8(4, Y2)
	FMA8(8, Y4)
	FMA8(12, Y6)
	FMA8(16, Y8)
	NEXTK
	JNZ k8r5
	JMP e8

k8r6:
	LOADB8
	FMA8(0, Y0)
	FMA8(4, Y2)
	FMA8(8, Y4)
	FMA8(12, Y6)
	FMA8(16, Y8)
	FMA8(20, Y10)
	NEXTK
	JNZ k8r6

e8:
	MOVQ flags+72(FP), BX
	MOVQ c+48(FP), R10
	MOVQ ldc+56(FP), R11
	SHLQ $2, R11
	VXORPS Y14, Y14, Y14

	TESTQ $2, BX
	JZ    e8beta
	VBROADCASTSS alpha+64(FP), Y12
	SCALE8(Y0)
	SCALE8(Y2)
	SCALE8(Y4)
	SCALE8(Y6)
	SCALE8(Y8)
	SCALE8(Y10)

e8beta:
	TESTQ $1, BX
	JZ    e8bias
	VBROADCASTSS beta+68(FP), Y13
	MOVQ R10, AX
	BETA8(Y0)
	NEXTROW(1, e8bias, R11)
	BETA8(Y2)
	NEXTROW(2, e8bias, R11)
	BETA8(Y4)
	NEXTROW(3, e8bias, R11)
	BETA8(Y6)
	NEXTROW(4, e8bias, R11)
	BETA8(Y8)
	NEXTROW(5, e8bias, R11)
	BETA8(Y10)

e8bias:
	TESTQ $4, BX
	JZ    e8relu
	MOVQ bias+80(FP), AX
	BIAS8(0, Y0)
	LASTROW(1, e8relu)
	BIAS8(4, Y2)
	LASTROW(2, e8relu)
	BIAS8(8, Y4)
	LASTROW(3, e8relu)
	BIAS8(12, Y6)
	LASTROW(4, e8relu)
	BIAS8(16, Y8)
	LASTROW(5, e8relu)
	BIAS8(20, Y10)

e8relu:
	TESTQ $8, BX
	JZ    e8mask
	RELU8(Y0)
	RELU8(Y2)
	RELU8(Y4)
	RELU8(Y6)
	RELU8(Y8)
	RELU8(Y10)

e8mask:
	TESTQ $16, BX
	JZ    e8store
	MOVQ mask+88(FP), AX
	MOVQ ldm+96(FP), R12
	SHLQ $2, R12
	MASK8(Y0)
	NEXTROW(1, e8store, R12)
	MASK8(Y2)
	NEXTROW(2, e8store, R12)
	MASK8(Y4)
	NEXTROW(3, e8store, R12)
	MASK8(Y6)
	NEXTROW(4, e8store, R12)
	MASK8(Y8)
	NEXTROW(5, e8store, R12)
	MASK8(Y10)

e8store:
	MOVQ R10, AX
	STORE8(Y0)
	NEXTROW(1, e8done, R11)
	STORE8(Y2)
	NEXTROW(2, e8done, R11)
	STORE8(Y4)
	NEXTROW(3, e8done, R11)
	STORE8(Y6)
	NEXTROW(4, e8done, R11)
	STORE8(Y8)
	NEXTROW(5, e8done, R11)
	STORE8(Y10)

e8done:
	VZEROUPPER
	RET
