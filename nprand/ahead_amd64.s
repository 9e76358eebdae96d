#include "textflag.h"

// func countTopVec(top *uint16, ks *[16]int64, blocks int, w uint64, step16, tBase int64, hitT *int64, maxHits int) (below, done, nHits int)
//
// Z13/Z14: ks (the lines of lanes 0–7/8–15); Z15: 0; Z28: w; Z29: step16; Z30:
// 0..7. SI = the next block's values, CX = blocks, R8 = done, R9 =
// below, R10 = indices stored, R11 = the block's first index, R14 = the
// most indices stored before a block with some (maxHits - 16).
TEXT ·countTopVec(SB), NOSPLIT, $0-88
	MOVQ top+0(FP), SI
	MOVQ ks+8(FP), DI
	VMOVDQU64 0(DI), Z13
	VMOVDQU64 64(DI), Z14
	VPBROADCASTQ w+24(FP), Z28
	VPBROADCASTQ step16+32(FP), Z29
	VMOVDQU64 aheadIota<>+0(SB), Z30
	VPXORQ Z15, Z15, Z15
	MOVQ blocks+16(FP), CX
	XORQ R8, R8
	XORQ R9, R9
	XORQ R10, R10
	MOVQ tBase+40(FP), R11
	MOVQ hitT+48(FP), R12
	MOVQ maxHits+56(FP), R14
	SUBQ $16, R14

tblock:
	CMPQ R8, CX
	JGE tdone
	VPMOVZXWQ 0(SI), Z24
	VPMOVZXWQ 16(SI), Z25
	VPSLLQ $37, Z24, Z24
	VPSLLQ $37, Z25, Z25
	VPSUBQ Z13, Z24, Z26 // d = value - line
	VPSUBQ Z14, Z25, Z27
	VPCMPUQ $1, Z28, Z26, K3 // uint64(d) < w: undecided
	VPCMPUQ $1, Z28, Z27, K4
	KORTESTW K3, K4
	JNZ thit

tcount:
	VPCMPQ $1, Z15, Z26, K1 // d < 0: below the line
	VPCMPQ $1, Z15, Z27, K2
	KMOVW K1, AX
	KMOVW K2, DX
	SHLL $8, DX
	ORL DX, AX
	POPCNTL AX, AX
	ADDQ AX, R9
	VPSUBQ Z29, Z13, Z13
	VPSUBQ Z29, Z14, Z14
	ADDQ $32, SI
	INCQ R8
	ADDQ $16, R11
	JMP tblock

thit:
	CMPQ R10, R14
	JGT tdone
	VPBROADCASTQ R11, Z31
	VPADDQ Z30, Z31, Z31
	VPCOMPRESSQ Z31, K3, (R12)(R10*8)
	KMOVW K3, AX
	POPCNTL AX, AX
	ADDQ AX, R10
	MOVQ $8, AX
	VPBROADCASTQ AX, Z16
	VPADDQ Z16, Z31, Z31
	VPCOMPRESSQ Z31, K4, (R12)(R10*8)
	KMOVW K4, AX
	POPCNTL AX, AX
	ADDQ AX, R10
	JMP tcount

tdone:
	VMOVDQU64 Z13, 0(DI)
	VMOVDQU64 Z14, 64(DI)
	MOVQ R9, below+64(FP)
	MOVQ R8, done+72(FP)
	MOVQ R10, nHits+80(FP)
	VZEROUPPER
	RET

DATA aheadIota<>+0(SB)/8, $0
DATA aheadIota<>+8(SB)/8, $1
DATA aheadIota<>+16(SB)/8, $2
DATA aheadIota<>+24(SB)/8, $3
DATA aheadIota<>+32(SB)/8, $4
DATA aheadIota<>+40(SB)/8, $5
DATA aheadIota<>+48(SB)/8, $6
DATA aheadIota<>+56(SB)/8, $7
GLOBL aheadIota<>(SB), RODATA|NOPTR, $64

#include "vec_amd64.h"

// func fillTopVec(st *vecState, groups int, top *uint16, ck *uint64)
//
// Makes groups groups of 4 blocks of 16 draws on st's lanes: at the
// start of each group, lane 0's limbs (the state of the group's first
// draw) go to ck (3 words); each draw's top 16 bits of 53 (the output
// >> 48) go to top. The lanes are left at the next draw.
TEXT ·fillTopVec(SB), NOSPLIT, $0-32
	MOVQ st+0(FP), DI
	MOVQ groups+8(FP), CX
	MOVQ top+16(FP), SI
	MOVQ ck+24(FP), R8
	LOADLANES

fgroup:
	TESTQ CX, CX
	JZ fdone
	VMOVQ X0, 0(R8)
	VMOVQ X2, 8(R8)
	VMOVQ X4, 16(R8)
	ADDQ $24, R8
	MOVQ $4, DX

fblock:
	OUT(Z0, Z2, Z4, Z24, Z26)
	OUT(Z1, Z3, Z5, Z25, Z27)
	VPSRLQ $48, Z24, Z24
	VPSRLQ $48, Z25, Z25
	VPMOVQW Z24, 0(SI)
	VPMOVQW Z25, 16(SI)
	ADDQ $32, SI
	STEP(Z0, Z2, Z4, Z16, Z17, Z18, Z19)
	STEP(Z1, Z3, Z5, Z20, Z21, Z22, Z23)
	DECQ DX
	JNZ fblock
	DECQ CX
	JMP fgroup

fdone:
	STORELANES
	VZEROUPPER
	RET
