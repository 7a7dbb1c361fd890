//go:build amd64 && !purego

#include "textflag.h"

// Pooling kernels (see pool.go) over n elements, n a positive multiple of
// 8; AX is the element index. Y5, Y6, Y7 hold the int32 lane constants 1,
// 2, 3 and Y4 the index of the running maximum.

#define CONSTS \
	MOVL $1, AX; VMOVD AX, X5; VPBROADCASTD X5, Y5; \
	MOVL $2, AX; VMOVD AX, X6; VPBROADCASTD X6, Y6; \
	MOVL $3, AX; VMOVD AX, X7; VPBROADCASTD X7, Y7

// TAKE replaces the maximum Y0 (and its index Y4 by kc) where the cell at
// addr is greater or NaN.
#define TAKE(addr, kc) \
	VMOVUPS addr, Y1; \
	VCMPPS $0x1e, Y0, Y1, Y2; \
	VCMPPS $0x03, Y1, Y1, Y3; \
	VORPS Y3, Y2, Y2; \
	VBLENDVPS Y2, Y1, Y0, Y0; \
	VBLENDVPS Y2, kc, Y4, Y4

// func maxPool4AVX(out *float32, arg *uint8, a, b, c, d *float32, n int)
TEXT ·maxPool4AVX(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ arg+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), R9
	MOVQ c+32(FP), R10
	MOVQ d+40(FP), R11
	MOVQ n+48(FP), CX
	CONSTS
	XORQ AX, AX

poolloop:
	VMOVUPS (SI)(AX*4), Y0
	VPXOR   Y4, Y4, Y4
	TAKE((R9)(AX*4), Y5)
	TAKE((R10)(AX*4), Y6)
	TAKE((R11)(AX*4), Y7)
	VMOVUPS Y0, (DI)(AX*4)
	// int32 lanes 0-7 → bytes 0-7.
	VEXTRACTI128 $1, Y4, X8
	VPACKSSDW    X8, X4, X4
	VPACKUSWB    X4, X4, X4
	MOVQ         X4, (R8)(AX*1)
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  poolloop
	VZEROUPPER
	RET

// PUT stores Y0 masked to the lanes whose index Y4 equals kc at addr.
#define PUT(kc, addr) \
	VPCMPEQD kc, Y4, Y2; \
	VANDPS   Y2, Y0, Y3; \
	VMOVUPS  Y3, addr

// func unpool4AVX(a, b, c, d, gv, out *float32, arg *uint8, scale float32, n int)
TEXT ·unpool4AVX(SB), NOSPLIT, $0-72
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), R9
	MOVQ c+16(FP), R10
	MOVQ d+24(FP), R11
	MOVQ gv+32(FP), DI
	MOVQ out+40(FP), R12
	MOVQ arg+48(FP), R8
	VBROADCASTSS scale+56(FP), Y15
	MOVQ n+64(FP), CX
	CONSTS
	VXORPS Y14, Y14, Y14
	XORQ AX, AX

unpoolloop:
	VPMOVZXBD (R8)(AX*1), Y4
	VMULPS    (DI)(AX*4), Y15, Y0
	// 0 < out (ordered: a NaN out gates to 0).
	VCMPPS    $0x11, (R12)(AX*4), Y14, Y1
	VANDPS    Y1, Y0, Y0
	PUT(Y7, (R11)(AX*4))
	PUT(Y6, (R10)(AX*4))
	PUT(Y5, (R9)(AX*4))
	PUT(Y14, (SI)(AX*4))
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  unpoolloop
	VZEROUPPER
	RET

// MTAKE is TAKE of the cell at addr after zeroing it where the mask at
// maddr is not > 0 (Y9 = 0).
#define MTAKE(addr, maddr, kc) \
	VCMPPS $0x11, maddr, Y9, Y3; \
	VANDPS addr, Y3, Y1; \
	VCMPPS $0x1e, Y0, Y1, Y2; \
	VCMPPS $0x03, Y1, Y1, Y3; \
	VORPS Y3, Y2, Y2; \
	VBLENDVPS Y2, Y1, Y0, Y0; \
	VBLENDVPS Y2, kc, Y4, Y4

// func maskedMaxPool4AVX(out *float32, arg *uint8, a, b, c, d, ma, mb, mc, md *float32, n int)
TEXT ·maskedMaxPool4AVX(SB), NOSPLIT, $0-88
	MOVQ out+0(FP), DI
	MOVQ arg+8(FP), R8
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), R9
	MOVQ c+32(FP), R10
	MOVQ d+40(FP), R11
	MOVQ ma+48(FP), R12
	MOVQ mb+56(FP), R13
	MOVQ mc+64(FP), BX
	MOVQ md+72(FP), DX
	MOVQ n+80(FP), CX
	CONSTS
	VXORPS Y9, Y9, Y9
	XORQ AX, AX

mpoolloop:
	VCMPPS $0x11, (R12)(AX*4), Y9, Y3
	VANDPS (SI)(AX*4), Y3, Y0
	VPXOR  Y4, Y4, Y4
	MTAKE((R9)(AX*4), (R13)(AX*4), Y5)
	MTAKE((R10)(AX*4), (BX)(AX*4), Y6)
	MTAKE((R11)(AX*4), (DX)(AX*4), Y7)
	VMOVUPS Y0, (DI)(AX*4)
	VEXTRACTI128 $1, Y4, X8
	VPACKSSDW    X8, X4, X4
	VPACKUSWB    X4, X4, X4
	MOVQ         X4, (R8)(AX*1)
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  mpoolloop
	VZEROUPPER
	RET
