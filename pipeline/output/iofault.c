/*
 * iofault.c - see iofault.h.
 */
#include "iofault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"

static struct {
    int parsed;
    char op[16];
    long nth;
    int action; /* 0 none, 1 kill, 2 ENOSPC, 3 EIO */
    long count, matched;
    int tripped;
} g;

static void parse(void) {
    g.parsed = 1;
    const char *e = getenv("DOCPIPE_FAULT");
    char act[16];
    if (!e || sscanf(e, "%15[a-z]:%ld:%15s", g.op, &g.nth, act) != 3 || g.nth < 1) return;
    g.action = !strcmp(act, "kill") ? 1 : !strcmp(act, "ENOSPC") ? 2 : !strcmp(act, "EIO") ? 3 : 0;
}

long pl_io_count(void) { return g.count; }

dp_status pl_io_point(const char *op, const char *path, dp_err *err) {
    /* the writer thread is the only caller, so no lock is needed */
    if (!g.parsed) parse();
    g.count++;
    if (!g.action) return DP_OK;
    if (strcmp(g.op, "any") && strcmp(g.op, op)) return DP_OK;
    if (!g.tripped && ++g.matched < g.nth) return DP_OK;
    g.tripped = 1;
    if (g.action == 1) dp_crash_now();
    if (g.action == 2) return dp_err_set(err, DP_ENOSPC, "%s: %s failed: no space left on device (injected)", path, op);
    return dp_err_set(err, DP_EIO, "%s: %s failed: input/output error (injected)", path, op);
}

void pl_pause_after_listing(void) {
    const char *path = getenv("DOCPIPE_PAUSE_AFTER_LISTING");
    if (!path || !*path) return;
    FILE *f = dp_fopen(path, "w");
    if (!f) return;
    fclose(f);
    for (int waited = 0; waited < 60000 && dp_path_exists(path) && !dp_stop_requests(); waited += 10)
        dp_sleep_ms(10);
}
