#include "textflag.h"
#include "vec_amd64.h"

// The kernels of vec_amd64.go; the lanes and macros are described in
// vec_amd64.h.

// pref16: dword t is 2^t - 1, the tries below t (ACCEPTEDL, in Z14).
DATA pref16<>+0(SB)/8, $0x0000000100000000
DATA pref16<>+8(SB)/8, $0x0000000700000003
DATA pref16<>+16(SB)/8, $0x0000001f0000000f
DATA pref16<>+24(SB)/8, $0x0000007f0000003f
DATA pref16<>+32(SB)/8, $0x000001ff000000ff
DATA pref16<>+40(SB)/8, $0x000007ff000003ff
DATA pref16<>+48(SB)/8, $0x00001fff00000fff
DATA pref16<>+56(SB)/8, $0x00007fff00003fff
GLOBL pref16<>(SB), RODATA|NOPTR, $64

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
// scratch register and the values' offset in the aligned buffer (BX).
#define HALF(x, v, off, rl, rn) \
	ACCEPTED(x, v, off, BX, rl, rn) \
	POPCNTQ AX, AX \
	SUBQ AX, SI

// HALFL is HALF on ACCEPTEDL (the narrow bands' halves).
#define HALFL(x, v, off, rl, rn) \
	ACCEPTEDL(x, v, off, BX, rl, rn) \
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

// SELHALF makes a half block's tries: counted when the band is wide
// (127 <= mask < 2^31) and i - 16 is still in it (i >= floor + 16), by
// HALF or, for masks <= 1023, HALFL (at rf, out of line); else one by one
// (at sl, out of line). Both come back to fl.
#define SELHALF(x, v, off, fl, sl, rl, rn, rf) \
	CMPQ DX, $127 \
	JB sl \
	CMPQ DX, $0x7fffffff \
	JA sl \
	LEAQ 16(R12), AX \
	CMPQ SI, AX \
	JB sl \
	CMPQ DX, $1023 \
	JBE rf \
	HALF(x, v, off, rl, rn) \
fl:

// TRY makes try t of a half block stored at BX (its value at off; BX is
// 64-byte aligned, so the half's store splits no cache line):
// i -= (v & mask) <= i, without a branch on the outcome, then a jump to
// nb when i fell below floor (a new band, or done: rare). The halves'
// one-by-one paths (sla, slb) are TRY written out 16 times: two cycles a
// try on i's chain (CMP, ADC) and no loop branch, where a loop measured
// about four.
#define TRY(off, nb) \
	MOVL off(BX), R9 \
	ANDQ DX, R9 \
	CMPQ SI, R9 \
	ADCQ $-1, SI \
	CMPQ SI, R12 \
	JB nb

// BAND is TRY's rare case for try t: done when i is 0 (R8 = t), else the
// mask and floor halve and the tries go on at nx.
#define BAND(t, nx) \
	TESTQ SI, SI \
	JNZ 3(PC) \
	MOVQ t, R8 \
	JMP sdone \
	SHRQ $1, DX \
	SHRQ $1, R12 \
	JMP nx

// func skipVec(st *vecState, i, mask uint64, blocks, from int) (t, iOut, maskOut uint64)
//
// SI = i, DX = mask, R12 = floor = (mask+1)/2, R13 = blocks left. The 32
// tries of a block are the dwords of the two output registers, in order
// (the lower half of each draw first). The first block's tries before
// from (0–32) are not made: they belong to what the lanes drew before.
// Not NOSPLIT: its stack check is SkipShuffles' preemption point (see
// vecBlocks).
TEXT ·skipVec(SB), $192-64
	MOVQ st+0(FP), DI
	MOVQ i+8(FP), SI
	MOVQ mask+16(FP), DX
	MOVQ blocks+24(FP), R13
	LOADLANES
	LEAQ 1(DX), R12
	SHRQ $1, R12
	VMOVDQU32 iota32<>+0(SB), Z13
	VMOVDQU32 pref16<>+0(SB), Z14
	LEAQ 63(SP), BX // the one-by-one halves' buffer, 64-byte aligned
	ANDQ $-64, BX
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
	SELHALF(Z24, Z29, 0, sfa, sla, sra, srna, rfa)
	SELHALF(Z25, Z30, 64, sfb, slb, srb, srnb, rfb)
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

// Halves a and b counted with the tighter rejection test (SELHALF's rf).
rfa:
	HALFL(Z24, Z29, 0, lra, lrna)
	JMP sfa
rfb:
	HALFL(Z25, Z30, 64, lrb, lrnb)
	JMP sfb

// Half a's tries one by one (SELHALF's sl).
sla:
	VMOVDQU64 Z24, 0(BX)
	TRY(0, sba0)
sna0:
	TRY(4, sba1)
sna1:
	TRY(8, sba2)
sna2:
	TRY(12, sba3)
sna3:
	TRY(16, sba4)
sna4:
	TRY(20, sba5)
sna5:
	TRY(24, sba6)
sna6:
	TRY(28, sba7)
sna7:
	TRY(32, sba8)
sna8:
	TRY(36, sba9)
sna9:
	TRY(40, sba10)
sna10:
	TRY(44, sba11)
sna11:
	TRY(48, sba12)
sna12:
	TRY(52, sba13)
sna13:
	TRY(56, sba14)
sna14:
	TRY(60, sba15)
sna15:
	VPBROADCASTD DX, Z15
	JMP sfa
sba0:
	BAND($0, sna0)
sba1:
	BAND($1, sna1)
sba2:
	BAND($2, sna2)
sba3:
	BAND($3, sna3)
sba4:
	BAND($4, sna4)
sba5:
	BAND($5, sna5)
sba6:
	BAND($6, sna6)
sba7:
	BAND($7, sna7)
sba8:
	BAND($8, sna8)
sba9:
	BAND($9, sna9)
sba10:
	BAND($10, sna10)
sba11:
	BAND($11, sna11)
sba12:
	BAND($12, sna12)
sba13:
	BAND($13, sna13)
sba14:
	BAND($14, sna14)
sba15:
	BAND($15, sna15)

// Half b's tries one by one (SELHALF's sl).
slb:
	VMOVDQU64 Z25, 64(BX)
	TRY(64, sbb0)
snb0:
	TRY(68, sbb1)
snb1:
	TRY(72, sbb2)
snb2:
	TRY(76, sbb3)
snb3:
	TRY(80, sbb4)
snb4:
	TRY(84, sbb5)
snb5:
	TRY(88, sbb6)
snb6:
	TRY(92, sbb7)
snb7:
	TRY(96, sbb8)
snb8:
	TRY(100, sbb9)
snb9:
	TRY(104, sbb10)
snb10:
	TRY(108, sbb11)
snb11:
	TRY(112, sbb12)
snb12:
	TRY(116, sbb13)
snb13:
	TRY(120, sbb14)
snb14:
	TRY(124, sbb15)
snb15:
	VPBROADCASTD DX, Z15
	JMP sfb
sbb0:
	BAND($16, snb0)
sbb1:
	BAND($17, snb1)
sbb2:
	BAND($18, snb2)
sbb3:
	BAND($19, snb3)
sbb4:
	BAND($20, snb4)
sbb5:
	BAND($21, snb5)
sbb6:
	BAND($22, snb6)
sbb7:
	BAND($23, snb7)
sbb8:
	BAND($24, snb8)
sbb9:
	BAND($25, snb9)
sbb10:
	BAND($26, snb10)
sbb11:
	BAND($27, snb11)
sbb12:
	BAND($28, snb12)
sbb13:
	BAND($29, snb13)
sbb14:
	BAND($30, snb14)
sbb15:
	BAND($31, snb15)

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
