//go:build amd64 && !purego

#include "textflag.h"

// Constants of Sincos (sincos.go), one float64 each.
DATA sincosK<>+0(SB)/8, $0x3FE45F306DC9C883 // twoOverPi
DATA sincosK<>+8(SB)/8, $0x3FF921FB40000000 // pio2a
DATA sincosK<>+16(SB)/8, $0x3E74442D00000000 // pio2b
DATA sincosK<>+24(SB)/8, $0x3CF8469898CC5170 // pio2c
DATA sincosK<>+32(SB)/8, $0x3DE5D8FD1FD19CCD // s0
DATA sincosK<>+40(SB)/8, $0xBE5AE5E5A9291F5D // s1
DATA sincosK<>+48(SB)/8, $0x3EC71DE3567D48A1 // s2
DATA sincosK<>+56(SB)/8, $0xBF2A01A019BFDF03 // s3
DATA sincosK<>+64(SB)/8, $0x3F8111111110F7D0 // s4
DATA sincosK<>+72(SB)/8, $0xBFC5555555555548 // s5
DATA sincosK<>+80(SB)/8, $0xBDA8FA49A0861A9B // c0
DATA sincosK<>+88(SB)/8, $0x3E21EE9D7B4E3F05 // c1
DATA sincosK<>+96(SB)/8, $0xBE927E4F7EAC4BC6 // c2
DATA sincosK<>+104(SB)/8, $0x3EFA01A019C844F5 // c3
DATA sincosK<>+112(SB)/8, $0xBF56C16C16C14F91 // c4
DATA sincosK<>+120(SB)/8, $0x3FA555555555554B // c5
DATA sincosK<>+128(SB)/8, $0x3FE0000000000000 // half
DATA sincosK<>+136(SB)/8, $0x3FD0000000000000 // quarter
DATA sincosK<>+144(SB)/8, $0x3FF0000000000000 // one
DATA sincosK<>+152(SB)/8, $0x41B0000000000000 // maxarg
DATA sincosK<>+160(SB)/8, $0x8000000000000000 // sign bit
DATA sincosK<>+168(SB)/8, $0x7FFFFFFFFFFFFFFF // abs mask
GLOBL sincosK<>(SB), RODATA|NOPTR, $176

// func sincosAVX(s, c, x *float64, n int, scale float64) (outOfRange bool)
//
// Four lanes at a time, the operations of Sincos in the same order (no
// FMA), so the bits match. A first pass looks for arguments outside
// (−SincosMax, SincosMax) or NaN: then nothing is written and the result
// is true (c may alias x, and the caller redoes all with the scalar path).
// n is a multiple of 4.
TEXT ·sincosAVX(SB), NOSPLIT, $0-41
	MOVQ s+0(FP), DI
	MOVQ c+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	VBROADCASTSD sincosK<>+168(SB), Y14
	VBROADCASTSD sincosK<>+152(SB), Y13
	VXORPD Y12, Y12, Y12
	XORQ AX, AX
check:
	VANDPD (SI)(AX*8), Y14, Y0
	VCMPPD $0x05, Y13, Y0, Y0 // !(|x| < max), true for NaN
	VORPD Y0, Y12, Y12
	ADDQ $4, AX
	CMPQ AX, CX
	JLT  check
	VMOVMSKPD Y12, AX
	TESTQ AX, AX
	JZ   compute
	MOVB $1, outOfRange+40(FP)
	VZEROUPPER
	RET

compute:
	VBROADCASTSD sincosK<>+144(SB), Y15
	VBROADCASTSD sincosK<>+128(SB), Y14
	XORQ AX, AX
loop:
	VMOVUPD (SI)(AX*8), Y0
	VBROADCASTSD sincosK<>+0(SB), Y13
	VMULPD Y13, Y0, Y1
	VROUNDPD $0, Y1, Y1 // kf
	VBROADCASTSD sincosK<>+8(SB), Y13
	VMULPD Y13, Y1, Y2
	VSUBPD Y2, Y0, Y2
	VBROADCASTSD sincosK<>+16(SB), Y13
	VMULPD Y13, Y1, Y3
	VSUBPD Y3, Y2, Y2
	VBROADCASTSD sincosK<>+24(SB), Y13
	VMULPD Y13, Y1, Y3
	VSUBPD Y3, Y2, Y2 // r
	VMULPD Y2, Y2, Y3 // z
	VBROADCASTSD sincosK<>+32(SB), Y4
	VMULPD Y3, Y4, Y4
	VBROADCASTSD sincosK<>+40(SB), Y13
	VADDPD Y13, Y4, Y4
	VMULPD Y3, Y4, Y4
	VBROADCASTSD sincosK<>+48(SB), Y13
	VADDPD Y13, Y4, Y4
	VMULPD Y3, Y4, Y4
	VBROADCASTSD sincosK<>+56(SB), Y13
	VADDPD Y13, Y4, Y4
	VMULPD Y3, Y4, Y4
	VBROADCASTSD sincosK<>+64(SB), Y13
	VADDPD Y13, Y4, Y4
	VMULPD Y3, Y4, Y4
	VBROADCASTSD sincosK<>+72(SB), Y13
	VADDPD Y13, Y4, Y4 // ps
	VBROADCASTSD sincosK<>+80(SB), Y5
	VMULPD Y3, Y5, Y5
	VBROADCASTSD sincosK<>+88(SB), Y13
	VADDPD Y13, Y5, Y5
	VMULPD Y3, Y5, Y5
	VBROADCASTSD sincosK<>+96(SB), Y13
	VADDPD Y13, Y5, Y5
	VMULPD Y3, Y5, Y5
	VBROADCASTSD sincosK<>+104(SB), Y13
	VADDPD Y13, Y5, Y5
	VMULPD Y3, Y5, Y5
	VBROADCASTSD sincosK<>+112(SB), Y13
	VADDPD Y13, Y5, Y5
	VMULPD Y3, Y5, Y5
	VBROADCASTSD sincosK<>+120(SB), Y13
	VADDPD Y13, Y5, Y5 // pc
	VMULPD Y3, Y2, Y6
	VMULPD Y4, Y6, Y6
	VADDPD Y6, Y2, Y6 // sr = r + r·z·ps
	VMULPD Y14, Y3, Y7
	VSUBPD Y7, Y15, Y7
	VMULPD Y3, Y3, Y8
	VMULPD Y5, Y8, Y8
	VADDPD Y8, Y7, Y7 // cr = 1 − z/2 + z·z·pc
	VMULPD Y14, Y1, Y9
	VROUNDPD $1, Y9, Y10
	VSUBPD Y10, Y9, Y9
	VCMPPD $0x0D, Y14, Y9, Y9 // odd quadrant: swap
	VBLENDVPD Y9, Y7, Y6, Y10 // s0
	VBLENDVPD Y9, Y6, Y7, Y11 // c0
	VBROADCASTSD sincosK<>+136(SB), Y8
	VBROADCASTSD sincosK<>+160(SB), Y5
	VMULPD Y8, Y1, Y12
	VROUNDPD $1, Y12, Y13
	VSUBPD Y13, Y12, Y12
	VCMPPD $0x0D, Y14, Y12, Y12 // q&2: negate sin
	VANDPD Y5, Y12, Y12
	VXORPD Y12, Y10, Y10
	VADDPD Y15, Y1, Y12
	VMULPD Y8, Y12, Y12
	VROUNDPD $1, Y12, Y13
	VSUBPD Y13, Y12, Y12
	VCMPPD $0x0D, Y14, Y12, Y12 // (q+1)&2: negate cos
	VANDPD Y5, Y12, Y12
	VXORPD Y12, Y11, Y11
	VBROADCASTSD scale+32(FP), Y8
	VMULPD Y8, Y11, Y11
	VMOVUPD Y10, (DI)(AX*8)
	VMOVUPD Y11, (DX)(AX*8)
	ADDQ $4, AX
	CMPQ AX, CX
	JLT  loop
	MOVB $0, outOfRange+40(FP)
	VZEROUPPER
	RET
