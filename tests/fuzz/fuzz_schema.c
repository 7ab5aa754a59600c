/*
 * fuzz_schema.c - libFuzzer target: any bytes as a JSON Schema for structured output
 * (docs/testing.md, fuzzing). The compiler returns a grammar or a refusal that says why; never
 * a crash, hang or leak, whatever the nesting, $ref cycles or patterns. A grammar it returns
 * must pass the grammar check: an accepted schema whose grammar is refused is a compiler bug
 * (users would see "a bug; please report it").
 */
#include <stdint.h>
#include <stdio.h>

#include "dynbuf.h"
#include "engine.h"
#include "json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dp_buf g;
    dp_buf_init(&g, (size_t)1 << 22);
    dp_err err = {0};
    if (pl_schema_to_gbnf((const char *)data, size, &g, &err) == DP_OK) {
        if (eng_grammar_check((const char *)g.data, g.len, &err) != DP_OK) {
            fprintf(stderr, "fuzz_schema: an accepted schema made a grammar that is refused: %s\n", err.msg);
            __builtin_trap();
        }
    } else if (!err.msg[0]) {
        __builtin_trap(); /* every refusal says why */
    }
    dp_buf_free(&g);
    return 0;
}
