// Shared macros of the vector kernels (vec_amd64.s, vec_shuffle_amd64.s).
// Sixteen PCG64 lanes live in Z0–Z5 as limbs of 52, 52 and 24 bits
// (Z0/Z1: bits 0–51 of lanes 0–7/8–15, Z2/Z3: bits 52–103, Z4/Z5: bits
// 104–127, junk allowed above bit 24), the 16-step map's multiplier in
// Z6–Z8 and addend in Z9–Z11 (broadcast limbs), the 52-bit mask in Z12.

// LOADLANES loads vecState (DI) into Z0–Z12.
#define LOADLANES \
	VMOVDQU64 0(DI), Z0 \
	VMOVDQU64 64(DI), Z1 \
	VMOVDQU64 128(DI), Z2 \
	VMOVDQU64 192(DI), Z3 \
	VMOVDQU64 256(DI), Z4 \
	VMOVDQU64 320(DI), Z5 \
	VPBROADCASTQ 384(DI), Z6 \
	VPBROADCASTQ 392(DI), Z7 \
	VPBROADCASTQ 400(DI), Z8 \
	VPBROADCASTQ 408(DI), Z9 \
	VPBROADCASTQ 416(DI), Z10 \
	VPBROADCASTQ 424(DI), Z11 \
	MOVQ $0x000fffffffffffff, AX \
	VPBROADCASTQ AX, Z12

// STORELANES stores Z0–Z5 into vecState (DI).
#define STORELANES \
	VMOVDQU64 Z0, 0(DI) \
	VMOVDQU64 Z1, 64(DI) \
	VMOVDQU64 Z2, 128(DI) \
	VMOVDQU64 Z3, 192(DI) \
	VMOVDQU64 Z4, 256(DI) \
	VMOVDQU64 Z5, 320(DI)

// STEP advances 8 lanes (a0, a1, a2) by the 16-step map, mod 2^128:
// r0 = c0 + lo(a0m0); r1 = c1 + hi(a0m0) + lo(a0m1) + lo(a1m0);
// r2 = c2 + hi(a0m1) + hi(a1m0) + lo(a1m1) + lo(a0m2) + lo(a2m0) (terms
// from bit 156 on vanish mod 2^128), then the carries. r0–r2 and t are
// scratch.
#define STEP(a0, a1, a2, r0, r1, r2, t) \
	VMOVDQA64 Z9, r0 \
	VPMADD52LUQ Z6, a0, r0 \
	VMOVDQA64 Z10, r1 \
	VPMADD52HUQ Z6, a0, r1 \
	VPMADD52LUQ Z7, a0, r1 \
	VPMADD52LUQ Z6, a1, r1 \
	VMOVDQA64 Z11, r2 \
	VPMADD52HUQ Z7, a0, r2 \
	VPMADD52HUQ Z6, a1, r2 \
	VPMADD52LUQ Z7, a1, r2 \
	VPMADD52LUQ Z8, a0, r2 \
	VPMADD52LUQ Z6, a2, r2 \
	VPSRLQ $52, r0, t \
	VPADDQ t, r1, r1 \
	VPANDQ Z12, r0, a0 \
	VPSRLQ $52, r1, t \
	VPADDQ t, r2, a2 \
	VPANDQ Z12, r1, a1

// OUT computes PCG64's output of 8 lanes into x: rotate right
// (hi ^ lo) by hi >> 58, where hi ^ lo = a0 ^ rotl(a1, 52) ^ (a2 << 40)
// and hi >> 58 = a2 >> 18 (mod 64, as the rotate takes it).
#define OUT(a0, a1, a2, x, t) \
	VPROLQ $52, a1, x \
	VPSLLQ $40, a2, t \
	VPTERNLOGQ $0x96, a0, t, x \
	VPSRLQ $18, a2, t \
	VPRORVQ t, x, x

// ACCEPTED leaves in AX the mask of the accepted tries among the 16
// dwords of x (a half block, i in SI): try t is certainly accepted when
// its value is <= i - t and certainly rejected when > i (the first test
// made as value + t <= i: the sum is formed off i's chain, which then
// runs broadcast, compare, mask, popcount, one subtraction shorter than
// with i - t; callers keep the mask below 2^31, so the sum cannot wrap;
// measured 1-2% faster on a 4096-sample span); the tries
// between are resolved in order, without branches on the outcome
// (RESOLVE). Whether there are any is a KTESTW (carry: the possibly
// accepted K3 lie within the certainly accepted K1), one mask move fewer
// than comparing the masks in general registers (measured 1-2% faster).
// v, off and base: a scratch register for the values and where RESOLVE
// stores them; rl and rn: labels unique to the call site. The shared part of skipVec's
// HALF (vec_amd64.s) and shuffleVec's HALFJ (vec_shuffle_amd64.s).
#define ACCEPTED(x, v, off, base, rl, rn) \
	VPANDD Z15, x, v \
	VPADDD Z13, v, Z26 \
	VPBROADCASTD SI, Z28 \
	VPCMPUD $2, Z28, Z26, K1 \
	VPCMPUD $2, Z28, v, K3 \
	KMOVW K1, AX \
	KTESTW K3, K1 \
	JCS rn \
	RESOLVE(v, off, base, rl) \
rn:

// ACCEPTEDL is ACCEPTED with a tighter test for rejection: try t is
// certainly rejected when its value is > i - L(t), L(t) the certainly
// accepted tries before it (they are accepted, so at least L(t) tries
// before t are). L(t) is the popcount of K1 below bit t (the mask
// broadcast to every dword, ANDed with the prefix masks 2^t - 1 in Z14,
// VPOPCNTD), off i's chain, which stays ACCEPTED's. About a quarter as
// many halves have undecided tries (each a mispredicted branch and the
// resolution), for four more vector instructions a half: skipVec uses it
// in the narrow bands (masks <= 1023), where undecided tries are frequent
// (up to one half in four with mask 127 to 1023).
#define ACCEPTEDL(x, v, off, base, rl, rn) \
	VPANDD Z15, x, v \
	VPADDD Z13, v, Z26 \
	VPBROADCASTD SI, Z28 \
	VPCMPUD $2, Z28, Z26, K1 \
	KMOVW K1, AX \
	VPBROADCASTMW2D K1, Z27 \
	VPANDD Z14, Z27, Z27 \
	VPOPCNTD Z27, Z27 \
	VPADDD v, Z27, Z27 \
	VPCMPUD $2, Z28, Z27, K3 \
	KTESTW K3, K1 \
	JCS rn \
	RESOLVE(v, off, base, rl) \
rn:

// RESOLVE makes the undecided tries of a half in order (AX: the
// certainly accepted, K3: the possibly accepted, i in SI; v, stored at
// off(base): the values): try t is accepted iff its value is <= i - the
// tries accepted before it, set in AX with a conditional move. skipVec
// passes its 64-byte-aligned buffer (BX) as base, so the store splits no
// cache line and the loads that follow it can be forwarded from it;
// shuffleVec, whose BX is its output, the stack.
#define RESOLVE(v, off, base, rl) \
	KMOVW K3, CX \
	XORQ AX, CX \
	VMOVDQU32 v, off(base) \
rl: \
	TZCNTQ CX, R8 \
	MOVL off(base)(R8*4), R9 \
	BLSMSKQ CX, R10 \
	ANDQ AX, R10 \
	POPCNTQ R10, R10 \
	MOVQ SI, R11 \
	SUBQ R10, R11 \
	MOVQ AX, R10 \
	BTSQ R8, R10 \
	CMPQ R9, R11 \
	CMOVQLS R10, AX \
	BLSRQ CX, CX \
	JNZ rl
