//go:build amd64 && !purego

#include "textflag.h"

// func anyNonFiniteSSE(x *float32, n int) bool
// Reports whether some x[i], i < n, is NaN or ±Inf. A single is
// non-finite exactly when its high 16 bits without the sign are at least
// 0x7f80 (exponent all ones). Each lane's high word is masked to its 15
// magnitude bits (the low word to zero) and folded into a running signed
// 16-bit maximum (PMAXSW, SSE2): two vector operations per four values.
// 16 lanes per iteration into four accumulators, then 4, then 1.
TEXT ·anyNonFiniteSSE(SB), NOSPLIT, $0-17
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
	ANDL $0x7f800000, DX
	CMPL DX, $0x7f800000
	JNE  next
	MOVQ $1, BX
next:
	ADDQ $4, SI
	DECQ CX
	JMP  loop1

done:
	PMAXSW X5, X4
	PMAXSW X7, X6
	PMAXSW X6, X4
	// a word > 0x7f7f marks a non-finite lane
	MOVQ $0x7f7f7f7f, AX
	MOVQ AX, X1
	PSHUFD $0x00, X1, X1
	PCMPGTW X1, X4
	PMOVMSKB X4, AX
	ORQ  BX, AX
	SETNE ret+16(FP)
	RET
