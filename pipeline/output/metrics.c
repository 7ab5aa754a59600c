/*
 * metrics.c - see metrics.h. Format: Prometheus text exposition 0.0.4 (HELP, TYPE, samples).
 */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynbuf.h"
#include "platform.h"
#include "sink.h"

/* A label value as the format wants it: backslash, quote and newline escaped. */
static void label(const char *v, char *out, size_t cap) {
    size_t o = 0;
    for (; *v && o + 3 < cap; v++) {
        if (*v == '\\' || *v == '"') out[o++] = '\\', out[o++] = *v;
        else if (*v == '\n') out[o++] = '\\', out[o++] = 'n';
        else out[o++] = *v;
    }
    out[o] = 0;
}

static void gauge(dp_buf *b, const pl_metrics *m, const char *name, const char *help, const char *extra, double v) {
    char job[512];
    label(m->job, job, sizeof(job));
    if (help) dp_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    dp_buf_printf(b, "%s{job=\"%s\"%s%s%s%s} %.17g\n", name, job, m->shard ? ",shard=\"" : "",
                  m->shard ? m->shard : "", m->shard ? "\"" : "", extra ? extra : "", v);
}

dp_status pl_metrics_write(const char *path, const pl_metrics *m, dp_err *err) {
    dp_buf b;
    dp_buf_init(&b, 1 << 20);
    gauge(&b, m, "docpipe_run_documents", "Documents of the current (or last) run, by outcome.", ",outcome=\"ok\"",
          (double)m->docs_ok);
    gauge(&b, m, "docpipe_run_documents", NULL, ",outcome=\"failed\"", (double)m->docs_failed);
    gauge(&b, m, "docpipe_run_documents", NULL, ",outcome=\"skipped\"", (double)m->docs_skipped);
    gauge(&b, m, "docpipe_run_requests", "Model requests finished by the run.", NULL, (double)m->requests);
    gauge(&b, m, "docpipe_run_prompt_tokens", "Prompt tokens the run decoded.", NULL, (double)m->prompt_tokens);
    gauge(&b, m, "docpipe_run_generated_tokens", "Tokens the run generated.", NULL, (double)m->generated_tokens);
    gauge(&b, m, "docpipe_run_generated_tokens_per_second", "Generated tokens per second of wall time.", NULL,
          m->seconds > 0 ? (double)m->generated_tokens / m->seconds : 0);
    gauge(&b, m, "docpipe_run_start_timestamp_seconds", "When the run started (Unix time).", NULL, m->start);
    gauge(&b, m, "docpipe_run_end_timestamp_seconds", "When the run ended (Unix time; 0 while it runs).", NULL,
          m->end);
    gauge(&b, m, "docpipe_run_running", "1 while the run works, 0 when it has ended.", NULL, m->exit_code < 0);
    gauge(&b, m, "docpipe_run_exit_code", "The run's exit code (-1 while it runs; 0 ok, 3 some documents failed).",
          NULL, m->exit_code);
    gauge(&b, m, "docpipe_state_documents", "Documents finished by every run of this state, by outcome.",
          ",outcome=\"ok\"", (double)m->state_docs_ok);
    gauge(&b, m, "docpipe_state_documents", NULL, ",outcome=\"failed\"", (double)m->state_docs_failed);
    gauge(&b, m, "docpipe_last_success_timestamp_seconds",
          "When a run last finished its whole listing (exit 0 or 3; Unix time, 0: never).", NULL, m->last_success);
    dp_status st = b.data ? pl_write_atomic(path, b.data, b.len, err) : dp_err_set(err, DP_ENOMEM, "out of memory");
    dp_buf_free(&b);
    return st;
}

double pl_metrics_last_success(const char *path) {
    char *data = NULL;
    size_t len = 0;
    if (dp_file_read_all(path, 1 << 20, &data, &len, NULL)) return 0;
    double v = 0;
    const char *p = strstr(data, "\ndocpipe_last_success_timestamp_seconds{");
    const char *close = p ? strchr(p, '}') : NULL;
    if (close) v = strtod(close + 1, NULL);
    free(data);
    return v > 0 ? v : 0;
}
