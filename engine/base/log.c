/*
 * log.c - the logging sink.
 *
 * DESIGN: the level and callback are process-wide and set once at start-up (by main) before
 * threads exist; they are read with relaxed atomics so a late change is harmless. Each line is
 * formatted into a stack buffer and written with one fputs, so lines from different threads
 * do not interleave mid-line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static _Atomic int g_level = DP_LOG_LEVEL_WARN;
static dp_log_fn g_fn;   /* set before threads start */
static void *g_fn_ud;

void dp_log_set_level(dp_log_level level) { atomic_store_explicit(&g_level, (int)level, memory_order_relaxed); }

dp_log_level dp_log_get_level(void) {
    return (dp_log_level)atomic_load_explicit(&g_level, memory_order_relaxed);
}

void dp_log_set_callback(dp_log_fn fn, void *ud) {
    g_fn = fn;
    g_fn_ud = ud;
}

dp_status dp_log_level_parse(const char *s, dp_log_level *out) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (dp_log_level)i;
            return DP_OK;
        }
    }
    return DP_EINVAL;
}

void dp_log_write(dp_log_level level, const char *func, const char *fmt, ...) {
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    char line[2048];
    int n = snprintf(line, sizeof(line), "%s: ", func);
    if (n < 0 || (size_t)n >= sizeof(line)) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (g_fn) {
        g_fn(level, line, g_fn_ud);
        return;
    }
    char out[2100];
    snprintf(out, sizeof(out), "docpipe: %s: %s\n", tags[level & 3], line);
    fputs(out, stderr);
}
