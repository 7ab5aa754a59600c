/*
 * open_context.c - see open_context.h.
 */
#include "open_context.h"

dp_status pl_context_open(eng_model *m, const eng_context_params *cp, uint64_t mem, eng_context **out, dp_err *err) {
    eng_context_params p = *cp;
    *out = NULL;
    if (p.n_kv_blocks == 0) {
        dp_status st = eng_context_fit_budget(m, &p, mem, err);
        if (st) return st;
    }
    return eng_context_new(m, &p, out, err);
}
