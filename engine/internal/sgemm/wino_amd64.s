//go:build amd64 && !purego

#include "textflag.h"

// Winograd F(2×2, 3×3) tile kernels (see wino.go), 8 channels per
// iteration over the leading n channels (n a positive multiple of 8). Each
// evaluates the portable code's expressions in the same order, so results
// are identical. Pointers to the 4 rows or 16 matrices of a tile advance
// by 32 bytes per iteration; a row of ξ matrices (ξ = 4r … 4r+3) is
// addressed as base, base+ld, base+2ld, base+3ld.

// WIROW writes row r of V = T·B from T[r][0..3] in Y0-Y3 to the ξ
// matrices at AX and moves AX to the next row.
#define WIROW \
	VSUBPS  Y2, Y0, Y4; \
	VADDPS  Y2, Y1, Y5; \
	VSUBPS  Y1, Y2, Y6; \
	VSUBPS  Y3, Y1, Y7; \
	VMOVUPS Y4, (AX); \
	VMOVUPS Y5, (AX)(R12*1); \
	VMOVUPS Y6, (AX)(R12*2); \
	VMOVUPS Y7, (AX)(R13*1); \
	ADDQ    SI, AX

// func winoInAVX(v *float32, ldv int, src *float32, lds, c, n int)
//
// R8-R11 rows 0-3 of the tile, BX c and DX 3c (bytes) between columns;
// DI the V cursor, AX the row of ξ matrices being written, R12 ldv, R13
// 3·ldv, SI 4·ldv (bytes).
TEXT ·winoInAVX(SB), NOSPLIT, $0-48
	MOVQ v+0(FP), DI
	MOVQ ldv+8(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13
	LEAQ (R12*4), SI
	MOVQ src+16(FP), R8
	MOVQ lds+24(FP), AX
	SHLQ $2, AX
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	MOVQ c+32(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), DX
	MOVQ n+40(FP), CX

wiloop:
	MOVQ DI, AX
	// T[0][b] = d0b - d2b
	VMOVUPS (R8), Y0
	VSUBPS  (R10), Y0, Y0
	VMOVUPS (R8)(BX*1), Y1
	VSUBPS  (R10)(BX*1), Y1, Y1
	VMOVUPS (R8)(BX*2), Y2
	VSUBPS  (R10)(BX*2), Y2, Y2
	VMOVUPS (R8)(DX*1), Y3
	VSUBPS  (R10)(DX*1), Y3, Y3
	WIROW
	// T[1][b] = d1b + d2b
	VMOVUPS (R9), Y0
	VADDPS  (R10), Y0, Y0
	VMOVUPS (R9)(BX*1), Y1
	VADDPS  (R10)(BX*1), Y1, Y1
	VMOVUPS (R9)(BX*2), Y2
	VADDPS  (R10)(BX*2), Y2, Y2
	VMOVUPS (R9)(DX*1), Y3
	VADDPS  (R10)(DX*1), Y3, Y3
	WIROW
	// T[2][b] = d2b - d1b
	VMOVUPS (R10), Y0
	VSUBPS  (R9), Y0, Y0
	VMOVUPS (R10)(BX*1), Y1
	VSUBPS  (R9)(BX*1), Y1, Y1
	VMOVUPS (R10)(BX*2), Y2
	VSUBPS  (R9)(BX*2), Y2, Y2
	VMOVUPS (R10)(DX*1), Y3
	VSUBPS  (R9)(DX*1), Y3, Y3
	WIROW
	// T[3][b] = d1b - d3b
	VMOVUPS (R9), Y0
	VSUBPS  (R11), Y0, Y0
	VMOVUPS (R9)(BX*1), Y1
	VSUBPS  (R11)(BX*1), Y1, Y1
	VMOVUPS (R9)(BX*2), Y2
	VSUBPS  (R11)(BX*2), Y2, Y2
	VMOVUPS (R9)(DX*1), Y3
	VSUBPS  (R11)(DX*1), Y3, Y3
	WIROW
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, R11
	SUBQ $8, CX
	JNZ  wiloop
	VZEROUPPER
	RET

// WGROW stores row r of dM, va·colA[j][s] for s = 0..3 (colA[j] in
// Y7-Y10), at R9 and moves R9 to the next row.
#define WGROW(va) \
	VMULPS  Y7, va, Y11; \
	VMOVUPS Y11, (R9); \
	VMULPS  Y8, va, Y11; \
	VMOVUPS Y11, (R9)(BX*1); \
	VMULPS  Y9, va, Y11; \
	VMOVUPS Y11, (R9)(BX*2); \
	VMULPS  Y10, va, Y11; \
	VMOVUPS Y11, (R9)(DX*1); \
	LEAQ    (R9)(BX*4), R9

// WTROW adds row a of T·Bᵀ, from T[a][0..3] in Y0-Y3, to the tile row at
// AX and moves AX to the next row: (T0, (T1 - T2) + T3, (T1 + T2) - T0, -T3).
#define WTROW \
	VADDPS  (AX), Y0, Y4; \
	VMOVUPS Y4, (AX); \
	VSUBPS  Y2, Y1, Y4; \
	VADDPS  Y3, Y4, Y4; \
	VADDPS  (AX)(R12*1), Y4, Y4; \
	VMOVUPS Y4, (AX)(R12*1); \
	VADDPS  Y2, Y1, Y4; \
	VSUBPS  Y0, Y4, Y4; \
	VADDPS  (AX)(R12*2), Y4, Y4; \
	VMOVUPS Y4, (AX)(R12*2); \
	VXORPS  Y15, Y3, Y4; \
	VADDPS  (AX)(R13*1), Y4, Y4; \
	VMOVUPS Y4, (AX)(R13*1); \
	ADDQ    SI, AX

// WOXFORM computes the output transform Y = Aᵀ M A of 8 filters: with R8
// at M[0], BX ldm and DX 3·ldm (bytes), T2[0][s] = (M0s + M1s) + M2s in
// Y0-Y3 and T2[1][s] = (M1s - M2s) - M3s in Y4-Y7, then Y[r][0] = (T2r0 +
// T2r1) + T2r2 and Y[r][1] = (T2r1 - T2r2) - T2r3: cells 0 and 1 in Y0 and
// Y3, cells 2 and 3 in Y4 and Y7. R9, Y1, Y2, Y5, Y6 and Y14 are clobbered.
#define WOXFORM \
	VMOVUPS (R8), Y0; \
	VMOVUPS (R8)(BX*1), Y1; \
	VMOVUPS (R8)(BX*2), Y2; \
	VMOVUPS (R8)(DX*1), Y3; \
	LEAQ    (R8)(BX*4), R9; \
	VADDPS  (R9), Y0, Y0; \
	VADDPS  (R9)(BX*1), Y1, Y1; \
	VADDPS  (R9)(BX*2), Y2, Y2; \
	VADDPS  (R9)(DX*1), Y3, Y3; \
	VMOVUPS (R9), Y4; \
	VMOVUPS (R9)(BX*1), Y5; \
	VMOVUPS (R9)(BX*2), Y6; \
	VMOVUPS (R9)(DX*1), Y7; \
	LEAQ    (R9)(BX*4), R9; \
	VADDPS  (R9), Y0, Y0; \
	VADDPS  (R9)(BX*1), Y1, Y1; \
	VADDPS  (R9)(BX*2), Y2, Y2; \
	VADDPS  (R9)(DX*1), Y3, Y3; \
	VSUBPS  (R9), Y4, Y4; \
	VSUBPS  (R9)(BX*1), Y5, Y5; \
	VSUBPS  (R9)(BX*2), Y6, Y6; \
	VSUBPS  (R9)(DX*1), Y7, Y7; \
	LEAQ    (R9)(BX*4), R9; \
	VSUBPS  (R9), Y4, Y4; \
	VSUBPS  (R9)(BX*1), Y5, Y5; \
	VSUBPS  (R9)(BX*2), Y6, Y6; \
	VSUBPS  (R9)(DX*1), Y7, Y7; \
	VSUBPS Y2, Y1, Y14; \
	VSUBPS Y3, Y14, Y3; \
	VADDPS Y1, Y0, Y0; \
	VADDPS Y2, Y0, Y0; \
	VSUBPS Y6, Y5, Y14; \
	VSUBPS Y7, Y14, Y7; \
	VADDPS Y5, Y4, Y4; \
	VADDPS Y6, Y4, Y4

// EPI applies bias (Y8), alpha (Y9), the ReLU (Y10 = 0) and, if the flag
// in R14 says so, the mask at addr to the cell in y.
#define EPI(y, addr, skip) \
	VADDPS Y8, y, y; \
	VMULPS Y9, y, y; \
	VMAXPS y, Y10, y; \
	TESTQ  $4, R14; \
	JZ     skip; \
	VCMPPS $0x11, addr, Y10, Y14; \
	VANDPS Y14, y, y; \
skip:

// TAKEY replaces the maximum Y0 (and its index Y5 by kc) where y is
// greater or NaN.
#define TAKEY(y, kc) \
	VCMPPS    $0x1e, Y0, y, Y14; \
	VCMPPS    $0x03, y, y, Y15; \
	VORPS     Y15, Y14, Y14; \
	VBLENDVPS Y14, y, Y0, Y0; \
	VBLENDVPS Y14, kc, Y5, Y5

// func winoOutPoolAVX(out *float32, arg *uint8, m *float32, ldm int, bias *float32, alpha float32, mask *float32, nmask, flags, n int)
//
// AX the filter index, BX ldm and DX 3·ldm (bytes), R8 the M cursor and R9
// the row of ξ matrices being read, R13 the mask cursor (cell q at
// q·nmask floats), R11 nmask and R10 3·nmask (bytes), R12 bias, DI out, SI
// arg, R14 the flags (bit 2: mask present). The four outputs end in Y0,
// Y3 (cells 0 and 1) and Y4, Y7 (cells 2 and 3).
TEXT ·winoOutPoolAVX(SB), NOSPLIT, $0-80
	MOVQ out+0(FP), DI
	MOVQ arg+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ ldm+24(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), DX
	MOVQ bias+32(FP), R12
	VBROADCASTSS alpha+40(FP), Y9
	MOVQ mask+48(FP), R13
	MOVQ nmask+56(FP), R11
	SHLQ $2, R11
	LEAQ (R11)(R11*2), R10
	MOVQ flags+64(FP), R14
	TESTQ R13, R13
	JZ   wonomask
	ORQ  $4, R14

wonomask:
	MOVQ n+72(FP), CX
	MOVL $1, AX
	MOVQ AX, X11
	VPBROADCASTD X11, Y11
	MOVL $2, AX
	MOVQ AX, X12
	VPBROADCASTD X12, Y12
	MOVL $3, AX
	MOVQ AX, X13
	VPBROADCASTD X13, Y13
	VXORPS Y10, Y10, Y10
	XORQ AX, AX

woloop:
	WOXFORM
	VMOVUPS (R12)(AX*4), Y8
	EPI(Y0, (R13), woe0)
	EPI(Y3, (R13)(R11*1), woe1)
	EPI(Y4, (R13)(R11*2), woe2)
	EPI(Y7, (R13)(R10*1), woe3)
	TESTQ $1, R14
	JZ    wocol
	VMOVAPS Y0, Y3
	VMOVAPS Y4, Y7

wocol:
	TESTQ $2, R14
	JZ    worow
	VMOVAPS Y0, Y4
	VMOVAPS Y3, Y7

worow:
	VPXOR Y5, Y5, Y5
	TAKEY(Y3, Y11)
	TAKEY(Y4, Y12)
	TAKEY(Y7, Y13)
	VMOVUPS      Y0, (DI)(AX*4)
	VEXTRACTI128 $1, Y5, X14
	VPACKSSDW    X14, X5, X5
	VPACKUSWB    X5, X5, X5
	MOVQ         X5, (SI)(AX*1)
	ADDQ $32, R8
	ADDQ $32, R13
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  woloop
	VZEROUPPER
	RET

// func winoGradOutAVX(dm *float32, ldm int, db, gv, out *float32, arg *uint8, alpha float32, n int)
//
// AX the filter index, R8 the dM cursor and R9 the row of ξ matrices being
// written, BX ldm and DX 3·ldm (bytes); R10 g, R11 out, R12 db, SI arg.
// Y0 v; Y2 (Y1) has the sign bit set where the cell's row (column) is 1;
// Y3-Y6 v·colA[i][r], Y7-Y10 colA[j][s]; Y12 -1, Y13 1, Y14 0, Y15 alpha.
TEXT ·winoGradOutAVX(SB), NOSPLIT, $0-64
	MOVQ dm+0(FP), R8
	MOVQ ldm+8(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), DX
	MOVQ db+16(FP), R12
	MOVQ gv+24(FP), R10
	MOVQ out+32(FP), R11
	MOVQ arg+40(FP), SI
	VBROADCASTSS alpha+48(FP), Y15
	MOVQ n+56(FP), CX
	MOVL $0x3f800000, AX
	MOVQ AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0xbf800000, AX
	MOVQ AX, X12
	VPBROADCASTD X12, Y12
	VXORPS Y14, Y14, Y14
	XORQ AX, AX

wgloop:
	VMULPS    (R10)(AX*4), Y15, Y0
	VCMPPS    $0x11, (R11)(AX*4), Y14, Y1
	VANDPS    Y1, Y0, Y0
	VADDPS    (R12)(AX*4), Y0, Y1
	VMOVUPS   Y1, (R12)(AX*4)
	VPMOVZXBD (SI)(AX*1), Y1
	VPSLLD    $30, Y1, Y2
	VPSLLD    $31, Y1, Y1
	// colA[0] = (1, 1, 1, 0), colA[1] = (0, 1, -1, -1).
	VBLENDVPS Y2, Y14, Y13, Y3
	VMULPS    Y3, Y0, Y3
	VMULPS    Y13, Y0, Y4
	VBLENDVPS Y2, Y12, Y13, Y5
	VMULPS    Y5, Y0, Y5
	VBLENDVPS Y2, Y12, Y14, Y6
	VMULPS    Y6, Y0, Y6
	VBLENDVPS Y1, Y14, Y13, Y7
	VMOVAPS   Y13, Y8
	VBLENDVPS Y1, Y12, Y13, Y9
	VBLENDVPS Y1, Y12, Y14, Y10
	MOVQ      R8, R9
	WGROW(Y3)
	WGROW(Y4)
	WGROW(Y5)
	WGROW(Y6)
	ADDQ $32, R8
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  wgloop
	VZEROUPPER
	RET

// func winoInTAVX(dst *float32, ldd int, dv *float32, ldv, c, n int)
//
// R8 the dV cursor and R9 the row of ξ matrices being read, BX ldv and DX
// 3·ldv (bytes); DI the tile cursor, AX the tile row being updated, SI
// ldd, R12 c and R13 3c (bytes). T[a][0..3] in Y0-Y3; Y15 the sign bit.
TEXT ·winoInTAVX(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), SI
	SHLQ $2, SI
	MOVQ dv+16(FP), R8
	MOVQ ldv+24(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), DX
	MOVQ c+32(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13
	MOVQ n+40(FP), CX
	MOVL $0x80000000, AX
	MOVQ AX, X15
	VPBROADCASTD X15, Y15

wtloop:
	MOVQ DI, AX
	// a = 0: T0s = D0s.
	VMOVUPS (R8), Y0
	VMOVUPS (R8)(BX*1), Y1
	VMOVUPS (R8)(BX*2), Y2
	VMOVUPS (R8)(DX*1), Y3
	WTROW
	// a = 1: T1s = (D1s - D2s) + D3s.
	LEAQ    (R8)(BX*4), R9
	VMOVUPS (R9), Y0
	VMOVUPS (R9)(BX*1), Y1
	VMOVUPS (R9)(BX*2), Y2
	VMOVUPS (R9)(DX*1), Y3
	LEAQ    (R9)(BX*4), R9
	VSUBPS  (R9), Y0, Y0
	VSUBPS  (R9)(BX*1), Y1, Y1
	VSUBPS  (R9)(BX*2), Y2, Y2
	VSUBPS  (R9)(DX*1), Y3, Y3
	LEAQ    (R9)(BX*4), R9
	VADDPS  (R9), Y0, Y0
	VADDPS  (R9)(BX*1), Y1, Y1
	VADDPS  (R9)(BX*2), Y2, Y2
	VADDPS  (R9)(DX*1), Y3, Y3
	WTROW
	// a = 2: T2s = (D1s + D2s) - D0s.
	LEAQ    (R8)(BX*4), R9
	VMOVUPS (R9), Y0
	VMOVUPS (R9)(BX*1), Y1
	VMOVUPS (R9)(BX*2), Y2
	VMOVUPS (R9)(DX*1), Y3
	LEAQ    (R9)(BX*4), R9
	VADDPS  (R9), Y0, Y0
	VADDPS  (R9)(BX*1), Y1, Y1
	VADDPS  (R9)(BX*2), Y2, Y2
	VADDPS  (R9)(DX*1), Y3, Y3
	VSUBPS  (R8), Y0, Y0
	VSUBPS  (R8)(BX*1), Y1, Y1
	VSUBPS  (R8)(BX*2), Y2, Y2
	VSUBPS  (R8)(DX*1), Y3, Y3
	WTROW
	// a = 3: T3s = -D3s.
	LEAQ    (R8)(BX*8), R9
	LEAQ    (R9)(BX*4), R9
	VXORPS  (R9), Y15, Y0
	VXORPS  (R9)(BX*1), Y15, Y1
	VXORPS  (R9)(BX*2), Y15, Y2
	VXORPS  (R9)(DX*1), Y15, Y3
	WTROW
	ADDQ $32, R8
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ  wtloop
	VZEROUPPER
	RET

// WOSTORE writes (bit 4 of R14: adds) the cell in y to addr.
#define WOSTORE(y, addr, plain) \
	TESTQ   $4, R14; \
	JZ      plain; \
	VADDPS  addr, y, y; \
plain: \
	VMOVUPS y, addr

// func winoOutAVX(dst *float32, ldd int, m *float32, ldm, c, flags, n int)
//
// c is the distance between the cells (0, 0) and (0, 1), the tile's filter
// count; n the leading multiple of 8 of it, the filters done here.
// AX the filter index, BX ldm and DX 3·ldm (bytes), R8 the M cursor and R9
// the row of ξ matrices being read; DI, R12, R13 and SI the cells (0, 0),
// (0, 1), (1, 0) and (1, 1) of the tile; R14 the flags. WOXFORM computes the
// outputs into Y0, Y3 (cells 0 and 1) and Y4, Y7 (cells 2 and 3), as in
// winoOutPoolAVX.
TEXT ·winoOutAVX(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R11
	SHLQ $2, R11
	MOVQ m+16(FP), R8
	MOVQ ldm+24(FP), BX
	SHLQ $2, BX
	LEAQ (BX)(BX*2), DX
	MOVQ c+32(FP), R10
	MOVQ flags+40(FP), R14
	MOVQ n+48(FP), CX
	SHLQ $2, R10
	LEAQ (DI)(R10*1), R12
	LEAQ (DI)(R11*1), R13
	LEAQ (R13)(R10*1), SI
	XORQ AX, AX

wxloop:
	WOXFORM
	WOSTORE(Y0, (DI)(AX*4), wxs0)
	TESTQ   $1, R14
	JNZ     wxnocol
	WOSTORE(Y3, (R12)(AX*4), wxs1)

wxnocol:
	TESTQ   $2, R14
	JNZ     wxnext
	WOSTORE(Y4, (R13)(AX*4), wxs2)
	TESTQ   $1, R14
	JNZ     wxnext
	WOSTORE(Y7, (SI)(AX*4), wxs3)

wxnext:
	ADDQ $32, R8
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  wxloop
	VZEROUPPER
	RET
