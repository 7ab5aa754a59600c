/*
 * fuzz_state.c - libFuzzer target: any bytes as a checkpoint.json and as a ledger.jsonl (the
 * state a resume trusts only after parsing it strictly, docs/testing.md, fuzzing). Either is accepted
 * or refused with a message naming the file; never a crash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof(path), "/tmp/dp-fuzz-state-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    pl_checkpoint c;
    dp_err err = {0};
    if (pl_checkpoint_read(path, &c, &err) == DP_OK) pl_checkpoint_free(&c);
    else if (!strstr(err.msg, path)) __builtin_trap();
    pl_ledger *l = NULL;
    err.msg[0] = 0;
    if (pl_ledger_load(path, size, NULL, &l, &err) != DP_OK && !err.msg[0]) __builtin_trap();
    pl_ledger_free(l);
    remove(path);
    return 0;
}
