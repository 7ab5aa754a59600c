/*
 * say.c - see say.h.
 */
#include "say.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "platform.h"
#include "utf8.h"

static atomic_bool g_json;
static const char *const k_levels[] = {"error", "warn", "info", "debug"};

static void emit(int level, const char *event, json_t *fields, const char *msg) {
    char now[32];
    dp_time_format(dp_time_wall(), false, now);
    if (!atomic_load(&g_json)) {
        fprintf(stderr, "%s %-5s docpipe: %s\n", now, k_levels[level & 3], msg);
        json_decref(fields);
        return;
    }
    /* a message may quote bytes that are not UTF-8 (a hostile file name): repaired, not lost */
    json_t *m = json_string(msg);
    if (!m) {
        const size_t n = strlen(msg);
        uint8_t *fixed = malloc(3 * n + 1);
        const size_t fl = fixed ? dp_utf8_repair((const uint8_t *)msg, n, fixed, NULL) : 0;
        m = json_stringn(fixed ? (const char *)fixed : "", fl);
        free(fixed);
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "time", now, "level", k_levels[level & 3], "event", event,
                          "message", m ? m : json_string(""));
    if (!o) o = json_object();
    if (fields) json_object_update_missing(o, fields);
    json_decref(fields);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(o);
    /* one write per line: lines from several threads never interleave */
    if (s) fprintf(stderr, "%s\n", s);
    free(s);
}

/* The engine's log lines (-v, -vv) as JSON too. */
static void engine_line(dp_log_level level, const char *line, void *ud) {
    (void)ud;
    emit((int)level, "engine", NULL, line);
}

void pl_say_json(bool on) {
    atomic_store(&g_json, on);
    dp_log_set_callback(on ? engine_line : NULL, NULL);
}

bool pl_say_is_json(void) { return atomic_load(&g_json); }

void pl_say(pl_say_level level, const char *event, json_t *fields, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    emit((int)level, event, fields, msg);
}
