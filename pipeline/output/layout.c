/*
 * layout.c - see layout.h.
 */
#include "layout.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform.h"

static char *fmt(const char *f, ...) DP_PRINTF(1, 2);
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    const int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!p) return NULL;
    va_start(ap, f);
    vsnprintf(p, (size_t)n + 1, f, ap);
    va_end(ap);
    return p;
}

dp_status pl_layout_make(const pl_layout_job *j, uint32_t si, uint32_t sn, pl_layout *l) {
    memset(l, 0, sizeof(*l));
    char part[64] = ""; /* "part-I-of-N." before a shard's output names */
    if (sn) snprintf(part, sizeof(part), "part-%u-of-%u.", si, sn);
    l->state_dir = sn ? fmt("%s/shard-%u-of-%u", j->state_dir, si, sn) : strdup(j->state_dir);
    if (l->state_dir) {
        l->lock = fmt("%s/job.lock", l->state_dir);
        l->checkpoint = fmt("%s/checkpoint.json", l->state_dir);
        l->ledger = fmt("%s/ledger.jsonl", l->state_dir);
    }
    l->manifest = fmt("%s/manifest.json", j->state_dir);
    char od[4096];
    dp_path_dir(j->jsonl, od, sizeof(od));
    const char *gz = j->gzip ? ".gz" : "";
    l->results = sn ? fmt("%s/%sjsonl%s", od, part, gz) : fmt("%s%s", j->jsonl, gz);
    l->errors = fmt("%s/%serrors.jsonl", od, part);
    l->status = fmt("%s/%sstatus.json", od, part);
    bool ok = l->state_dir && l->lock && l->checkpoint && l->ledger && l->manifest && l->results && l->errors &&
              l->status;
    if (j->metrics) { /* a shard's beside the job's, as its other outputs are */
        char md[4096];
        dp_path_dir(j->metrics, md, sizeof(md));
        const char *base = strrchr(j->metrics, '/');
        ok = ok && (l->metrics = fmt("%s/%s%s", md, part, base ? base + 1 : j->metrics));
    }
    if (j->intermediate) ok = ok && (l->intermediate = fmt("%s%s", j->intermediate, gz));
    if (ok) return DP_OK;
    pl_layout_free(l);
    return DP_ENOMEM;
}

void pl_layout_free(pl_layout *l) {
    if (!l) return;
    char **p[] = {&l->state_dir, &l->lock,   &l->checkpoint, &l->ledger,  &l->manifest,
                  &l->results,   &l->errors, &l->status,     &l->metrics, &l->intermediate};
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
        free(*p[i]);
        *p[i] = NULL;
    }
}

dp_status pl_layout_path(const pl_layout_job *j, uint32_t si, uint32_t sn, pl_layout_file f, char *buf, size_t cap) {
    pl_layout l;
    if (cap) buf[0] = 0;
    dp_status st = pl_layout_make(j, si, sn, &l);
    if (st) return st;
    const char *p[] = {[PL_FILE_STATE_DIR] = l.state_dir, [PL_FILE_LOCK] = l.lock,
                       [PL_FILE_CHECKPOINT] = l.checkpoint, [PL_FILE_LEDGER] = l.ledger,
                       [PL_FILE_MANIFEST] = l.manifest, [PL_FILE_RESULTS] = l.results,
                       [PL_FILE_ERRORS] = l.errors, [PL_FILE_STATUS] = l.status};
    const int n = snprintf(buf, cap, "%s", p[f]);
    pl_layout_free(&l);
    return n < 0 || (size_t)n >= cap ? DP_ERANGE : DP_OK;
}
