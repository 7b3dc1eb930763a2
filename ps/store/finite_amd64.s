//go:build amd64 && !purego

#include "textflag.h"

// func maxHiSSE(x *float32, n int) uint32
// Returns the largest high half-word without the sign, (bits>>16)&0x7fff,
// of x[i], i < n (0 for n = 0). A single is non-finite exactly when that
// half-word is at least 0x7f80 (exponent all ones), and |x| < the single
// with bits (h+1)<<16 otherwise. Each lane is masked to its 15 high
// magnitude bits (the low word to zero) and folded into a running signed
// 16-bit maximum (PMAXSW, SSE2): two vector operations per four values.
// 16 lanes per iteration into four accumulators, then 4, then 1; the four
// 32-bit lanes of the result are folded into one at the end.
TEXT ·maxHiSSE(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ $0x7fff0000, AX
	MOVQ AX, X0
	PSHUFD $0x00, X0, X0
	PXOR X4, X4
	PXOR X5, X5
	PXOR X6, X6
	PXOR X7, X7
	XORQ BX, BX

loop16:
	CMPQ CX, $16
	JLT  loop4
	MOVOU (SI), X1
	MOVOU 16(SI), X2
	MOVOU 32(SI), X3
	MOVOU 48(SI), X8
	PAND  X0, X1
	PAND  X0, X2
	PAND  X0, X3
	PAND  X0, X8
	PMAXSW X1, X4
	PMAXSW X2, X5
	PMAXSW X3, X6
	PMAXSW X8, X7
	ADDQ  $64, SI
	SUBQ  $16, CX
	JMP   loop16

loop4:
	CMPQ CX, $4
	JLT  loop1
	MOVOU (SI), X1
	PAND  X0, X1
	PMAXSW X1, X4
	ADDQ  $16, SI
	SUBQ  $4, CX
	JMP   loop4

loop1:
	CMPQ CX, $0
	JLE  done
	MOVL (SI), DX
	ANDL $0x7fff0000, DX
	CMPL DX, BX
	CMOVLHI DX, BX
	ADDQ $4, SI
	DECQ CX
	JMP  loop1

done:
	PMAXSW X5, X4
	PMAXSW X7, X6
	PMAXSW X6, X4
	// fold the four 32-bit lanes: each is h<<16 with h < 0x8000
	PSHUFD $0x4e, X4, X1
	PMAXSW X1, X4
	PSHUFD $0xb1, X4, X1
	PMAXSW X1, X4
	MOVQ X4, AX
	ANDL $0x7fff0000, AX
	CMPL AX, BX
	CMOVLHI AX, BX
	SHRL $16, BX
	MOVL BX, ret+16(FP)
	RET
