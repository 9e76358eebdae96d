#include "textflag.h"
#include "vec_amd64.h"

// shuffleVec: skipVec's walk (vec_amd64.s) that also writes, in order,
// the value of every accepted try: the swap partner j of each step i of
// a Fisher–Yates shuffle, for the caller to apply. It stops when i falls
// below stop.

DATA iotaj<>+0(SB)/8, $0x0000000100000000
DATA iotaj<>+8(SB)/8, $0x0000000300000002
DATA iotaj<>+16(SB)/8, $0x0000000500000004
DATA iotaj<>+24(SB)/8, $0x0000000700000006
DATA iotaj<>+32(SB)/8, $0x0000000900000008
DATA iotaj<>+40(SB)/8, $0x0000000b0000000a
DATA iotaj<>+48(SB)/8, $0x0000000d0000000c
DATA iotaj<>+56(SB)/8, $0x0000000f0000000e
GLOBL iotaj<>(SB), RODATA|NOPTR, $64

// HALFJ is skipVec's HALF that then writes the accepted tries' values
// at BX (compressed, in order) and advances BX past them.
#define HALFJ(x, v, off, rl, rn) \
	ACCEPTED(x, v, off, SP, rl, rn) \
	KMOVW AX, K2 \
	VPCOMPRESSD v, K2, (BX) \
	POPCNTQ AX, AX \
	SUBQ AX, SI \
	LEAQ (BX)(AX*4), BX

// SLOWHALFJ is skipVec's SLOWHALF that writes each try's value at BX and
// advances BX when it is accepted; R15 = max(floor, stop), and it jumps
// to jdone when i falls below stop (R14).
#define SLOWHALFJ(x, off, from, to, lp, nx) \
	VMOVDQU64 x, off(SP) \
	MOVQ from, R8 \
lp: \
	MOVL (SP)(R8*4), R9 \
	ANDQ DX, R9 \
	MOVL R9, (BX) \
	MOVQ SI, R10 \
	CMPQ SI, R9 \
	ADCQ $-1, SI \
	SUBQ SI, R10 \
	LEAQ (BX)(R10*4), BX \
	CMPQ SI, R15 \
	JAE nx \
	CMPQ SI, R14 \
	JB jdone \
	SHRQ $1, DX \
	SHRQ $1, R12 \
	MOVQ R12, R15 \
	CMPQ R14, R15 \
	CMOVQHI R14, R15 \
nx: \
	INCQ R8 \
	CMPQ R8, to \
	JB lp \
	VPBROADCASTD DX, Z15

// SELHALFJ: HALFJ when the band is wide (127 <= mask < 2^31) and i - 16 stays at or above
// max(floor, stop), else SLOWHALFJ.
#define SELHALFJ(x, v, off, from, to, fl, sl, lp, rl, rn, nx) \
	CMPQ DX, $127 \
	JB sl \
	CMPQ DX, $0x7fffffff \
	JA sl \
	LEAQ 16(R15), AX \
	CMPQ SI, AX \
	JB sl \
	HALFJ(x, v, off, rl, rn) \
	JMP fl \
sl: \
	SLOWHALFJ(x, off, from, to, lp, nx) \
fl:

// func shuffleVec(st *vecState, i, mask, stop uint64, blocks int, out *uint32) (t, iOut, maskOut, n uint64)
//
// SI = i, DX = mask, R12 = floor, R13 = blocks left, R14 = stop (>= 1,
// <= i), R15 = max(floor, stop), BX = where the next value goes (out has
// room for 32·blocks + 1 values).
TEXT ·shuffleVec(SB), NOSPLIT, $128-80
	MOVQ st+0(FP), DI
	MOVQ i+8(FP), SI
	MOVQ mask+16(FP), DX
	MOVQ stop+24(FP), R14
	MOVQ blocks+32(FP), R13
	MOVQ out+40(FP), BX
	LOADLANES
	LEAQ 1(DX), R12
	SHRQ $1, R12
	MOVQ R12, R15
	CMPQ R14, R15
	CMOVQHI R14, R15
	VMOVDQU32 iotaj<>+0(SB), Z13
	VPBROADCASTD DX, Z15

jblock:
	OUT(Z0, Z2, Z4, Z24, Z26)
	OUT(Z1, Z3, Z5, Z25, Z27)
	SELHALFJ(Z24, Z29, 0, $0, $16, jfa, jsa, jla, jra, jrna, jxa)
	SELHALFJ(Z25, Z30, 64, $16, $32, jfb, jsb, jlb, jrb, jrnb, jxb)
	STEP(Z0, Z2, Z4, Z16, Z17, Z18, Z19)
	STEP(Z1, Z3, Z5, Z20, Z21, Z22, Z23)
	DECQ R13
	JNZ jblock
	// Out of blocks: the lanes are at the next block, i >= stop.
	STORELANES
	MOVQ $32, t+48(FP)
	JMP jret

jdone:
	STORELANES
	MOVQ R8, t+48(FP)

jret:
	MOVQ SI, iOut+56(FP)
	MOVQ DX, maskOut+64(FP)
	SUBQ out+40(FP), BX
	SHRQ $2, BX
	MOVQ BX, n+72(FP)
	VZEROUPPER
	RET
