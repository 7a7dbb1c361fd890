//go:build amd64 && !purego

#include "textflag.h"

// func adamAVX(dp, dg, dm, dv *float64, n int, scale, step, b1, b2, eps float64)
// n is a multiple of 4. The operations mirror adamGo exactly (no FMA).
TEXT ·adamAVX(SB), NOSPLIT, $0-80
	MOVQ dp+0(FP), DI
	MOVQ dg+8(FP), SI
	MOVQ dm+16(FP), R8
	MOVQ dv+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSD scale+40(FP), Y8
	VBROADCASTSD step+48(FP), Y9
	VBROADCASTSD b1+56(FP), Y10
	VBROADCASTSD b2+64(FP), Y11
	VBROADCASTSD eps+72(FP), Y12
	// c1 = 1 − b1, c2 = 1 − b2
	MOVQ $0x3FF0000000000000, AX
	MOVQ AX, X13
	VBROADCASTSD X13, Y13
	VSUBPD Y10, Y13, Y14 // c1
	VSUBPD Y11, Y13, Y15 // c2
	XORQ AX, AX

loop:
	VMULPD (SI)(AX*8), Y8, Y0     // gj = g·scale
	VMULPD (R8)(AX*8), Y10, Y1    // b1·m
	VMULPD Y0, Y14, Y2            // c1·gj
	VADDPD Y2, Y1, Y1             // m'
	VMOVUPD Y1, (R8)(AX*8)
	VMULPD (R9)(AX*8), Y11, Y3    // b2·v
	VMULPD Y0, Y15, Y4            // c2·gj
	VMULPD Y0, Y4, Y4             // c2·gj·gj
	VADDPD Y4, Y3, Y3             // v'
	VMOVUPD Y3, (R9)(AX*8)
	VSQRTPD Y3, Y5
	VADDPD Y12, Y5, Y5            // √v + eps
	VMULPD Y1, Y9, Y6             // step·m
	VDIVPD Y5, Y6, Y6
	VMOVUPD (DI)(AX*8), Y7
	VSUBPD Y6, Y7, Y7
	VMOVUPD Y7, (DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, CX
	JLT  loop
	VZEROUPPER
	RET
