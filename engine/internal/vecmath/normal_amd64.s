//go:build amd64 && !purego

#include "textflag.h"

// Constants of Normals and logUnit (normal.go), one float64 each.
DATA normK<>+0(SB)/8, $0x3FF0000000000000 // one
DATA normK<>+8(SB)/8, $0x4000000000000000 // two
DATA normK<>+16(SB)/8, $0x3FE0000000000000 // half
DATA normK<>+24(SB)/8, $0x000FFFFFFFFFFFFF // fracMask
DATA normK<>+32(SB)/8, $0x3FF6A09E667F3BCD // √2
DATA normK<>+40(SB)/8, $0x4330000000000000 // 2^52
DATA normK<>+48(SB)/8, $0x43300000000003FF // 2^52 + 1023
DATA normK<>+56(SB)/8, $0x3FE5555555555593 // lg1
DATA normK<>+64(SB)/8, $0x3FD999999997FA04 // lg2
DATA normK<>+72(SB)/8, $0x3FD2492494229359 // lg3
DATA normK<>+80(SB)/8, $0x3FCC71C51D8E78AF // lg4
DATA normK<>+88(SB)/8, $0x3FC7466496CB03DE // lg5
DATA normK<>+96(SB)/8, $0x3FC39A09D078C69F // lg6
DATA normK<>+104(SB)/8, $0x3FC2F112DF3E5244 // lg7
DATA normK<>+112(SB)/8, $0x3FE62E42FEE00000 // ln2Hi
DATA normK<>+120(SB)/8, $0x3DEA39EF35793C76 // ln2Lo
DATA normK<>+128(SB)/8, $0xC000000000000000 // −2
DATA normK<>+136(SB)/8, $0x401921FB54442D18 // 2π
GLOBL normK<>(SB), RODATA|NOPTR, $144

// func normThetaAVX2(theta *float64, bits *uint64, n int)
//
// theta[i] = 2π·u2 from bits[i], for n a multiple of 4.
TEXT ·normThetaAVX2(SB), NOSPLIT, $0-24
	MOVQ theta+0(FP), DI
	MOVQ bits+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD normK<>+0(SB), Y15
	VBROADCASTSD normK<>+136(SB), Y14
	XORQ AX, AX
thetaLoop:
	VMOVDQU (SI)(AX*8), Y0
	VPSRLQ  $12, Y0, Y0
	VPOR    Y15, Y0, Y0
	VSUBPD  Y15, Y0, Y0 // u2
	VMULPD  Y14, Y0, Y0
	VMOVUPD Y0, (DI)(AX*8)
	ADDQ    $4, AX
	CMPQ    AX, CX
	JLT     thetaLoop
	VZEROUPPER
	RET

// Stack slots of normRadiusAVX2, normSub float64 each.
#define normSub 64
#define slotF 0
#define slotK 512
#define slotS 1024
#define slotR 1536

// func normRadiusAVX2(c, s *float64, bits *uint64, n int)
//
// With r = √(−2·logUnit(u1)) from bits[i]: c[i] *= r, s[i] *= r, for n a
// multiple of 4. The operations of logUnit in the same order (no FMA), so
// the bits match; its branch at √2 is a blend.
//
// In one loop, a block's chain (a division, some twenty dependent
// operations, a square root) is so long for the operations it holds that
// the CPU runs out of room for waiting instructions well before it runs
// out of units. Three loops over normSub values at a time, each a short
// chain, handing f, k, s and R over on the stack, take a fifth less time.
TEXT ·normRadiusAVX2(SB), $2048-32
	MOVQ c+0(FP), DI
	MOVQ s+8(FP), DX
	MOVQ bits+16(FP), SI
	MOVQ n+24(FP), CX
	VBROADCASTSD normK<>+0(SB), Y15
	VBROADCASTSD normK<>+8(SB), Y14
	VBROADCASTSD normK<>+16(SB), Y13
chunk:
	MOVQ    $normSub, R8
	CMPQ    CX, R8
	CMOVQLT CX, R8

	// f, k and s = f/(2+f).
	VBROADCASTSD normK<>+24(SB), Y12
	VBROADCASTSD normK<>+32(SB), Y11
	VBROADCASTSD normK<>+40(SB), Y10
	VBROADCASTSD normK<>+48(SB), Y9
	XORQ AX, AX
reduce:
	VMOVDQU   (SI)(AX*8), Y0
	VPSRLQ    $12, Y0, Y0
	VPOR      Y15, Y0, Y0
	VSUBPD    Y0, Y14, Y0 // u1 = 2 − v
	VPSRLQ    $52, Y0, Y1
	VPOR      Y10, Y1, Y1
	VSUBPD    Y9, Y1, Y1 // k, from the biased exponent
	VPAND     Y12, Y0, Y0
	VPOR      Y15, Y0, Y0 // m ∈ [1, 2)
	VCMPPD    $0x0D, Y11, Y0, Y2 // m ≥ √2
	VMULPD    Y13, Y0, Y3
	VBLENDVPD Y2, Y3, Y0, Y0
	VANDPD    Y15, Y2, Y2
	VADDPD    Y2, Y1, Y1 // k+1 where halved; k+0 is k (k ≠ −0)
	VSUBPD    Y15, Y0, Y0 // f
	VADDPD    Y14, Y0, Y2
	VDIVPD    Y2, Y0, Y2 // s
	VMOVUPD   Y0, slotF(SP)(AX*8)
	VMOVUPD   Y1, slotK(SP)(AX*8)
	VMOVUPD   Y2, slotS(SP)(AX*8)
	ADDQ      $4, AX
	CMPQ      AX, R8
	JLT       reduce

	// R = t1 + t2.
	VBROADCASTSD normK<>+56(SB), Y12
	VBROADCASTSD normK<>+64(SB), Y11
	VBROADCASTSD normK<>+72(SB), Y10
	VBROADCASTSD normK<>+80(SB), Y9
	VBROADCASTSD normK<>+88(SB), Y8
	VBROADCASTSD normK<>+96(SB), Y7
	VBROADCASTSD normK<>+104(SB), Y0
	XORQ AX, AX
poly:
	VMOVUPD slotS(SP)(AX*8), Y2
	VMULPD  Y2, Y2, Y3 // s2
	VMULPD  Y3, Y3, Y4 // s4
	VMULPD  Y0, Y4, Y5
	VADDPD  Y8, Y5, Y5
	VMULPD  Y4, Y5, Y5
	VADDPD  Y10, Y5, Y5
	VMULPD  Y4, Y5, Y5
	VADDPD  Y12, Y5, Y5
	VMULPD  Y3, Y5, Y5 // t1
	VMULPD  Y7, Y4, Y6
	VADDPD  Y9, Y6, Y6
	VMULPD  Y4, Y6, Y6
	VADDPD  Y11, Y6, Y6
	VMULPD  Y4, Y6, Y6 // t2
	VADDPD  Y6, Y5, Y5
	VMOVUPD Y5, slotR(SP)(AX*8)
	ADDQ    $4, AX
	CMPQ    AX, R8
	JLT     poly

	// ln u1, r and the products.
	VBROADCASTSD normK<>+112(SB), Y12
	VBROADCASTSD normK<>+120(SB), Y11
	VBROADCASTSD normK<>+128(SB), Y10
	XORQ AX, AX
radius:
	VMOVUPD slotF(SP)(AX*8), Y0
	VMOVUPD slotK(SP)(AX*8), Y1
	VMULPD  Y13, Y0, Y6
	VMULPD  Y0, Y6, Y6 // hfsq
	VADDPD  slotR(SP)(AX*8), Y6, Y5
	VMULPD  slotS(SP)(AX*8), Y5, Y5 // s·(hfsq+R)
	VMULPD  Y11, Y1, Y7
	VADDPD  Y7, Y5, Y5
	VSUBPD  Y5, Y6, Y5
	VSUBPD  Y0, Y5, Y5
	VMULPD  Y12, Y1, Y7
	VSUBPD  Y5, Y7, Y5 // ln u1
	VMULPD  Y10, Y5, Y5
	VSQRTPD Y5, Y5 // r
	VMULPD  (DI)(AX*8), Y5, Y6
	VMULPD  (DX)(AX*8), Y5, Y7
	VMOVUPD Y6, (DI)(AX*8)
	VMOVUPD Y7, (DX)(AX*8)
	ADDQ    $4, AX
	CMPQ    AX, R8
	JLT     radius

	LEAQ (SI)(R8*8), SI
	LEAQ (DI)(R8*8), DI
	LEAQ (DX)(R8*8), DX
	SUBQ R8, CX
	JGT  chunk
	VZEROUPPER
	RET
