/*
 * fuzz_grammar.c - libFuzzer target: any bytes as a GBNF grammar (--grammar-file, a job's
 * grammar). The grammar check returns DP_OK or a refusal that says why; never a crash, hang
 * or leak, whatever the nesting, repetition counts, escapes or rule references.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dp_err err = {0};
    if (eng_grammar_check((const char *)data, size, &err) != DP_OK && !err.msg[0])
        __builtin_trap(); /* every refusal says why */
    return 0;
}
