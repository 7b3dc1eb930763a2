//go:build amd64 && !purego

#include "textflag.h"

// func axpyNegSSE(w, x *float32, n int, a float32)
// w[i] -= a*x[i] for i < n: 16 lanes per iteration, then 4, then 1.
TEXT ·axpyNegSSE(SB), NOSPLIT, $0-28
	MOVQ  w+0(FP), DI
	MOVQ  x+8(FP), SI
	MOVQ  n+16(FP), CX
	MOVSS a+24(FP), X0
	SHUFPS $0x00, X0, X0

loop16:
	CMPQ CX, $16
	JLT  loop4
	MOVUPS (SI), X1
	MOVUPS 16(SI), X2
	MOVUPS 32(SI), X3
	MOVUPS 48(SI), X4
	MULPS  X0, X1
	MULPS  X0, X2
	MULPS  X0, X3
	MULPS  X0, X4
	MOVUPS (DI), X5
	MOVUPS 16(DI), X6
	MOVUPS 32(DI), X7
	MOVUPS 48(DI), X8
	SUBPS  X1, X5
	SUBPS  X2, X6
	SUBPS  X3, X7
	SUBPS  X4, X8
	MOVUPS X5, (DI)
	MOVUPS X6, 16(DI)
	MOVUPS X7, 32(DI)
	MOVUPS X8, 48(DI)
	ADDQ   $64, SI
	ADDQ   $64, DI
	SUBQ   $16, CX
	JMP    loop16

loop4:
	CMPQ CX, $4
	JLT  loop1
	MOVUPS (SI), X1
	MULPS  X0, X1
	MOVUPS (DI), X5
	SUBPS  X1, X5
	MOVUPS X5, (DI)
	ADDQ   $16, SI
	ADDQ   $16, DI
	SUBQ   $4, CX
	JMP    loop4

loop1:
	CMPQ CX, $0
	JLE  done
	MOVSS (SI), X1
	MULSS X0, X1
	MOVSS (DI), X5
	SUBSS X1, X5
	MOVSS X5, (DI)
	ADDQ  $4, SI
	ADDQ  $4, DI
	DECQ  CX
	JMP   loop1

done:
	RET
