/*
 * kernels_amx.h - the AMX int8 tile GEMM (kernels_amx.c, built when the compiler knows AMX:
 * DP_HAVE_AMX_BUILD). Private to the CPU backend; eng_amx_init asks the kernel for the tile
 * state before the first use.
 */
#ifndef ENG_CPU_KERNELS_AMX_H
#define ENG_CPU_KERNELS_AMX_H

#include "kernels.h"

void eng_amx_init(void);
eng_gemm_fn eng_gemm_amx(int wt);
size_t eng_gemm_ws_amx(int64_t k, int n_tok);

#endif /* ENG_CPU_KERNELS_AMX_H */
