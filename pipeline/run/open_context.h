/*
 * open_context.h - the one way every command (run, plan, batch, generate, eval, perplexity, bench)
 * opens a context on a loaded model: its KV cache sized within the memory budget
 * (eng_context_fit_budget: the machine's available memory, or the GPU's free memory, unless
 * a budget is given), so no command can ask for more than the machine has.
 */
#ifndef PL_OPEN_CONTEXT_H
#define PL_OPEN_CONTEXT_H

#include <stdint.h>

#include "engine.h"

/* A context for m with the settings of *cp (n_kv_blocks 0: as many KV blocks as every sequence
 * needs at full context, fewer when the budget holds fewer; DP_ENOMEM naming the numbers when
 * not one sequence at full context fits). mem: the budget in bytes, 0 = what is available. */
dp_status pl_context_open(eng_model *m, const eng_context_params *cp, uint64_t mem, eng_context **out, dp_err *err);

#endif /* PL_OPEN_CONTEXT_H */
