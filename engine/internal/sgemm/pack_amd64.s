//go:build amd64 && !purego

#include "textflag.h"

// func transpose8AVX(dst *float32, ldd int, src *float32, lds, rows, nblk int)
//
// Transposes nblk consecutive 8×8 blocks: the 8·nblk columns of source
// rows 0…7 (row i at src + i·lds) become output rows q = 0…8·nblk-1 of 8
// floats at dst + q·ldd. Source rows ≥ rows are not read (row 0 stands in
// for them), so output columns ≥ rows are garbage; with ldd < 8 each store
// overlaps the next row, which the next store then overwrites, and the last
// one writes 8-ldd floats past the end of output row 8·nblk-1.
TEXT ·transpose8AVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), DX
	SHLQ $2, DX
	MOVQ src+16(FP), R8
	MOVQ lds+24(FP), AX
	SHLQ $2, AX
	MOVQ rows+32(FP), CX

	// Row pointers R8…R13, SI, BX; missing rows read row 0.
	MOVQ R8, R9
	ADDQ AX, R9
	CMPQ CX, $2
	CMOVQLT R8, R9
	LEAQ (R8)(AX*2), R10
	CMPQ CX, $3
	CMOVQLT R8, R10
	MOVQ R10, R11
	ADDQ AX, R11
	CMPQ CX, $4
	CMOVQLT R8, R11
	LEAQ (R8)(AX*4), R12
	CMPQ CX, $5
	CMOVQLT R8, R12
	MOVQ R12, R13
	ADDQ AX, R13
	CMPQ CX, $6
	CMOVQLT R8, R13
	LEAQ (R12)(AX*2), SI
	CMPQ CX, $7
	CMOVQLT R8, SI
	MOVQ SI, BX
	ADDQ AX, BX
	CMPQ CX, $8
	CMOVQLT R8, BX

	MOVQ nblk+40(FP), AX
	SHLQ $5, AX // end offset in bytes
	XORQ CX, CX
	TESTQ AX, AX
	JZ   done

loop:
	VMOVUPS (R8)(CX*1), Y0
	VMOVUPS (R9)(CX*1), Y1
	VMOVUPS (R10)(CX*1), Y2
	VMOVUPS (R11)(CX*1), Y3
	VMOVUPS (R12)(CX*1), Y4
	VMOVUPS (R13)(CX*1), Y5
	VMOVUPS (SI)(CX*1), Y6
	VMOVUPS (BX)(CX*1), Y7
	// Rows a…h: t0 = a0 b0 a1 b1 | a4 b4 a5 b5, t1 = a2 b2 a3 b3 | a6 b6 a7 b7, …
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	// s0 = a0 b0 c0 d0 | a4 b4 c4 d4, s1 = a1 b1 c1 d1 | a5 …, …
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	// Output row q joins the matching 128-bit lanes of s(q) and s(q+4).
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, (DI)
	ADDQ    DX, DI
	VMOVUPS Y9, (DI)
	ADDQ    DX, DI
	VMOVUPS Y10, (DI)
	ADDQ    DX, DI
	VMOVUPS Y11, (DI)
	ADDQ    DX, DI
	VMOVUPS Y12, (DI)
	ADDQ    DX, DI
	VMOVUPS Y13, (DI)
	ADDQ    DX, DI
	VMOVUPS Y14, (DI)
	ADDQ    DX, DI
	VMOVUPS Y15, (DI)
	ADDQ    DX, DI
	ADDQ    $32, CX
	CMPQ    CX, AX
	JLT     loop

done:
	VZEROUPPER
	RET
