#include "textflag.h"
#include "vec_amd64.h"

// The kernels of vec_amd64.go; the lanes and macros are described in
// vec_amd64.h.

DATA iota32<>+0(SB)/8, $0x0000000100000000
DATA iota32<>+8(SB)/8, $0x0000000300000002
DATA iota32<>+16(SB)/8, $0x0000000500000004
DATA iota32<>+24(SB)/8, $0x0000000700000006
DATA iota32<>+32(SB)/8, $0x0000000900000008
DATA iota32<>+40(SB)/8, $0x0000000b0000000a
DATA iota32<>+48(SB)/8, $0x0000000d0000000c
DATA iota32<>+56(SB)/8, $0x0000000f0000000e
DATA iota32<>+64(SB)/8, $0x0000001100000010
DATA iota32<>+72(SB)/8, $0x0000001300000012
DATA iota32<>+80(SB)/8, $0x0000001500000014
DATA iota32<>+88(SB)/8, $0x0000001700000016
DATA iota32<>+96(SB)/8, $0x0000001900000018
DATA iota32<>+104(SB)/8, $0x0000001b0000001a
DATA iota32<>+112(SB)/8, $0x0000001d0000001c
DATA iota32<>+120(SB)/8, $0x0000001f0000001e
GLOBL iota32<>(SB), RODATA|NOPTR, $128

DATA iota64<>+0(SB)/8, $0
DATA iota64<>+8(SB)/8, $1
DATA iota64<>+16(SB)/8, $2
DATA iota64<>+24(SB)/8, $3
DATA iota64<>+32(SB)/8, $4
DATA iota64<>+40(SB)/8, $5
DATA iota64<>+48(SB)/8, $6
DATA iota64<>+56(SB)/8, $7
GLOBL iota64<>(SB), RODATA|NOPTR, $64

// HALF counts 16 tries (the dwords of x) of a block on the fast path:
// try t is certainly accepted when its value v is <= i - t and certainly
// rejected when v > i; the tries between are resolved in order (try t
// is accepted iff v <= i - the tries accepted before it), without
// branches on the outcome. Then i -= the accepted tries. v and off: a
// scratch register and the stack offset for the values.
#define HALF(x, v, off, rl, rn) \
	ACCEPTED(x, v, off, rl, rn) \
	POPCNTQ AX, AX \
	SUBQ AX, SI

// SLOWHALF makes the 16 tries of a half block (x; tries from..to-1 of
// the block) one by one, the band's mask halving as i falls below floor,
// and jumps to sdone (R8 = the try) when i reaches 0.
#define SLOWHALF(x, off, from, to, lp, nx) \
	VMOVDQU64 x, off(SP) \
	MOVQ from, R8 \
lp: \
	MOVL (SP)(R8*4), R9 \
	ANDQ DX, R9 \
	CMPQ SI, R9 \
	ADCQ $-1, SI \
	CMPQ SI, R12 \
	JAE nx \
	TESTQ SI, SI \
	JZ sdone \
	SHRQ $1, DX \
	SHRQ $1, R12 \
nx: \
	INCQ R8 \
	CMPQ R8, to \
	JB lp \
	VPBROADCASTD DX, Z15

// SELHALF makes a half block's tries: counted (HALF) when the band is
// wide (mask >= 127) and i - 16 is still in it (i >= floor + 16),
// else one by one (SLOWHALF).
#define SELHALF(x, v, off, from, to, fl, sl, lp, rl, rn, nx) \
	CMPQ DX, $127 \
	JB sl \
	LEAQ 16(R12), AX \
	CMPQ SI, AX \
	JB sl \
	HALF(x, v, off, rl, rn) \
	JMP fl \
sl: \
	SLOWHALF(x, off, from, to, lp, nx) \
fl:

// func skipVec(st *vecState, i, mask uint64, blocks, from int) (t, iOut, maskOut uint64)
//
// SI = i, DX = mask, R12 = floor = (mask+1)/2, R13 = blocks left. The 32
// tries of a block are the dwords of the two output registers, in order
// (the lower half of each draw first). The first block's tries before
// from (0–32) are not made: they belong to what the lanes drew before.
TEXT ·skipVec(SB), NOSPLIT, $128-64
	MOVQ st+0(FP), DI
	MOVQ i+8(FP), SI
	MOVQ mask+16(FP), DX
	MOVQ blocks+24(FP), R13
	LOADLANES
	LEAQ 1(DX), R12
	SHRQ $1, R12
	VMOVDQU32 iota32<>+0(SB), Z13
	VPBROADCASTD DX, Z15
	MOVQ from+32(FP), R14
	TESTQ R14, R14
	JZ sblock
	CMPQ R14, $32
	JAE sstep
	// The first block from try from, one by one.
	OUT(Z0, Z2, Z4, Z24, Z26)
	OUT(Z1, Z3, Z5, Z25, Z27)
	CMPQ R14, $16
	JAE sfirstb
	SLOWHALF(Z24, 0, R14, $16, sfla, sfxa)
	MOVQ $16, R14
sfirstb:
	SLOWHALF(Z25, 64, R14, $32, sflb, sfxb)
	JMP sstep

sblock:
	OUT(Z0, Z2, Z4, Z24, Z26)
	OUT(Z1, Z3, Z5, Z25, Z27)
	SELHALF(Z24, Z29, 0, $0, $16, sfa, ssa, sla, sra, srna, sxa)
	SELHALF(Z25, Z30, 64, $16, $32, sfb, ssb, slb, srb, srnb, sxb)
sstep:
	STEP(Z0, Z2, Z4, Z16, Z17, Z18, Z19)
	STEP(Z1, Z3, Z5, Z20, Z21, Z22, Z23)
	DECQ R13
	JNZ sblock
	// Out of blocks: the lanes are at the next block, i > 0.
	STORELANES
	MOVQ $32, t+40(FP)
	MOVQ SI, iOut+48(FP)
	MOVQ DX, maskOut+56(FP)
	VZEROUPPER
	RET

sdone:
	STORELANES
	MOVQ R8, t+40(FP)
	MOVQ $0, iOut+48(FP)
	MOVQ DX, maskOut+56(FP)
	VZEROUPPER
	RET

// func countVec(st *vecState, ks *[16]int64, blocks int, lo int64, w uint64, step16 int64, tBase int64, hitT *int64, hitV *uint64, maxHits int) (below, done, nHits int)
//
// Z13/Z14: ks (the lines of lanes 0–7/8–15, minus lo); Z15: lo;
// Z28: w; Z29: step16; Z30: 0..7. CX = blocks, R8 = done, R9 = below,
// R10 = hits stored, R11 = t of the block's first draw, R14 = the most
// hits stored before a block with hits (maxHits - 16).
TEXT ·countVec(SB), NOSPLIT, $0-104
	MOVQ st+0(FP), DI
	MOVQ ks+8(FP), SI
	LOADLANES
	VMOVDQU64 0(SI), Z13
	VMOVDQU64 64(SI), Z14
	VPBROADCASTQ lo+24(FP), Z15
	VPBROADCASTQ w+32(FP), Z28
	VPBROADCASTQ step16+40(FP), Z29
	VMOVDQU64 iota64<>+0(SB), Z30
	MOVQ blocks+16(FP), CX
	XORQ R8, R8
	XORQ R9, R9
	XORQ R10, R10
	MOVQ tBase+48(FP), R11
	MOVQ hitT+56(FP), R12
	MOVQ hitV+64(FP), R13
	MOVQ maxHits+72(FP), R14
	SUBQ $16, R14

cblock:
	CMPQ R8, CX
	JGE cdone
	OUT(Z0, Z2, Z4, Z24, Z26)
	OUT(Z1, Z3, Z5, Z25, Z27)
	VPSRLQ $11, Z24, Z24
	VPSRLQ $11, Z25, Z25
	VPSUBQ Z13, Z24, Z26 // d = r - (line - lo)
	VPSUBQ Z14, Z25, Z27
	VPCMPUQ $1, Z28, Z26, K3 // uint64(d) < w: a hit
	VPCMPUQ $1, Z28, Z27, K4
	KORTESTW K3, K4
	JNZ chit

ccount:
	VPCMPQ $1, Z15, Z26, K1 // d < lo: below the line
	VPCMPQ $1, Z15, Z27, K2
	KMOVW K1, AX
	POPCNTL AX, AX
	ADDQ AX, R9
	KMOVW K2, AX
	POPCNTL AX, AX
	ADDQ AX, R9
	VPSUBQ Z29, Z13, Z13
	VPSUBQ Z29, Z14, Z14
	STEP(Z0, Z2, Z4, Z16, Z17, Z18, Z19)
	STEP(Z1, Z3, Z5, Z20, Z21, Z22, Z23)
	INCQ R8
	ADDQ $16, R11
	JMP cblock

chit:
	CMPQ R10, R14
	JGT cdone
	VPBROADCASTQ R11, Z31
	VPADDQ Z30, Z31, Z31
	VPCOMPRESSQ Z24, K3, (R13)(R10*8)
	VPCOMPRESSQ Z31, K3, (R12)(R10*8)
	KMOVW K3, AX
	POPCNTL AX, AX
	ADDQ AX, R10
	MOVQ $8, AX
	VPBROADCASTQ AX, Z16
	VPADDQ Z16, Z31, Z31
	VPCOMPRESSQ Z25, K4, (R13)(R10*8)
	VPCOMPRESSQ Z31, K4, (R12)(R10*8)
	KMOVW K4, AX
	POPCNTL AX, AX
	ADDQ AX, R10
	JMP ccount

cdone:
	STORELANES
	VMOVDQU64 Z13, 0(SI)
	VMOVDQU64 Z14, 64(SI)
	MOVQ R9, below+80(FP)
	MOVQ R8, done+88(FP)
	MOVQ R10, nHits+96(FP)
	VZEROUPPER
	RET
