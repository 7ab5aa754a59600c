/*
 * run.c - `docpipe run JOB.yaml`: opens the state (lock, checkpoint, fingerprints), the sinks
 * and the model, starts the four stage threads and supervises them (signals, progress, exit
 * code). The protocol is docs/operations.md's "What a run guarantees"; docs/operations.md is
 * the user's view of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "exit_codes.h"
#include "job_grammar.h"
#include "layout.h"
#include "metrics.h"
#include "open_context.h"
#include "preflight.h"
#include "progress.h"
#include "rng.h"
#include "run_internal.h"
#include "say.h"
#include "sha256.h"

/* How long outputs.sqlite may be locked by another process before the run gives up (exit 75). */
#define DB_BUSY_MS 10000


/* ---- Shared helpers for the stages -------------------------------------------------------- */

void pl_run_fail(pl_run *r, dp_status st, const dp_err *err, int outcome) {
    dp_mutex_lock(&r->mu);
    if (!r->fail_status) {
        r->fail_status = st ? st : DP_ERROR;
        r->fail_err = *err;
        r->fail_exit = outcome;
    }
    r->stopping = 1;
    dp_mutex_unlock(&r->mu);
    pl_queue_abort(r->q_docs, DP_ECANCELED);
    pl_queue_abort(r->q_items, DP_ECANCELED);
    pl_queue_abort(r->q_done, DP_ECANCELED);
}

void pl_run_stop(pl_run *r) {
    r->stopping = 1;
    /* the writer keeps draining q_done: complete documents still get committed */
    pl_queue_abort(r->q_docs, DP_ECANCELED);
    pl_queue_abort(r->q_items, DP_ECANCELED);
}

void pl_unit_free(pl_run *r, pl_unit *u) {
    if (!u) return;
    dp_mutex_lock(&r->mu);
    u->prev->next = u->next;
    u->next->prev = u->prev;
    dp_mutex_unlock(&r->mu);
    for (size_t i = 0; i < u->n_res; i++) {
        free(u->res[i].text);
        free(u->res[i].err_msg);
        pl_span_free(&u->res[i].span);
        free(u->res[i].vec);
    }
    free(u->res);
    free(u->err_msg);
    free(u->path);
    free(u->raw_path);
    free(u->out_rel);
    free(u);
}

void pl_item_free(void *p) {
    pl_item *it = p;
    if (!it) return;
    eng_tokens_free(&it->prompt);
    free(it->err_msg);
    pl_span_free(&it->span);
    free(it);
}

void pl_span_free(pl_span *s) {
    free(s->text);
    free(s->headings);
    memset(s, 0, sizeof(*s));
}

void pl_doc_free(void *p) {
    pl_doc *d = p;
    if (!d) return;
    pl_doc_text_free(&d->text);
    free(d);
}

eng_sampler_params pl_run_sampler(const pl_run *r, const char *custom_id) {
    eng_sampler_params sp = eng_sampler_default_params();
    const job_spec *j = &r->job;
    sp.temp = (float)j->generation.temperature;
    sp.top_k = (int32_t)j->generation.top_k;
    sp.top_p = (float)j->generation.top_p;
    sp.min_p = (float)j->generation.min_p;
    sp.repeat_penalty = (float)j->generation.repeat_penalty;
    sp.penalty_last_n = (int32_t)j->generation.repeat_last_n;
    sp.presence_penalty = (float)j->generation.presence_penalty;
    sp.frequency_penalty = (float)j->generation.frequency_penalty;
    uint64_t x = (uint64_t)j->generation.seed;
    for (const char *c = custom_id; *c; c++) x = (x ^ (uint8_t)*c) * 0x100000001b3ull;
    sp.seed = dp_splitmix64(&x);
    return sp;
}

/* ---- Set-up ------------------------------------------------------------------------------ */

static char *dir_of(const char *path) {
    char d[4096];
    dp_path_dir(path, d, sizeof(d));
    return strdup(d);
}

static void sha_hex_of(dp_sha256 *h, char out[65]) {
    uint8_t d[32];
    dp_sha256_final(h, d);
    dp_sha256_hex(d, out);
}

static void add_field(dp_sha256 *h, const char *s) { dp_sha256_update(h, s ? s : "\x01(none)", (s ? strlen(s) : 7) + 1); }

/* The settings that change results, besides model and templates. */
static void settings_fingerprint(const job_spec *j, const char *gbnf, char out[65]) {
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "context=%lld max_tokens=%lld temperature=%.9g top_k=%lld top_p=%.9g min_p=%.9g repeat_penalty=%.9g "
             "repeat_last_n=%lld presence=%.9g frequency=%.9g seed=%lld thinking=%d chunk_max=%lld overlap=%lld mode=%d",
             (long long)j->model.context, (long long)j->generation.max_tokens, j->generation.temperature,
             (long long)j->generation.top_k, j->generation.top_p, j->generation.min_p, j->generation.repeat_penalty,
             (long long)j->generation.repeat_last_n, j->generation.presence_penalty, j->generation.frequency_penalty,
             (long long)j->generation.seed, j->generation.thinking, (long long)j->chunking.max_tokens,
             (long long)j->chunking.overlap, (int)j->chunking.mode);
    dp_sha256 h;
    dp_sha256_init(&h);
    add_field(&h, buf);
    /* a Q8_0 KV cache changes the numbers (f16, the default, adds nothing: older checkpoints
     * still match) */
    if (j->model.kv_type) add_field(&h, "kv_type=q8_0");
    /* stop strings end answers early (none: nothing added, so older checkpoints still match) */
    for (size_t i = 0; i < j->generation.n_stop; i++) {
        add_field(&h, "stop");
        add_field(&h, j->generation.stop[i]);
    }
    /* the grammar generation follows (none: nothing added, as before) */
    if (gbnf) {
        add_field(&h, "grammar");
        add_field(&h, gbnf);
    }
    /* a converter's command makes the text the model reads (none: nothing added, as before) */
    for (size_t c = 0; c < j->n_converters; c++) {
        add_field(&h, j->converters[c].ext);
        for (size_t a = 0; a < j->converters[c].argc; a++) add_field(&h, j->converters[c].argv[a]);
    }
    sha_hex_of(&h, out);
}

static void templates_fingerprint(const job_spec *j, char out[65]) {
    dp_sha256 h;
    dp_sha256_init(&h);
    if (j->task == JOB_TASK_EMBED) { /* what an embedded chunk is made of (a generation job's hash is as before) */
        char buf[96];
        snprintf(buf, sizeof(buf), "task=embed pooling=%d normalize=%d", (int)j->embedding.pooling,
                 (int)j->embedding.normalize);
        add_field(&h, buf);
        add_field(&h, j->embedding.instruction);
    }
    add_field(&h, j->prompts.system);
    add_field(&h, j->prompts.template_);
    add_field(&h, j->prompts.reduce_template);
    sha_hex_of(&h, out);
}

void pl_run_free(pl_run *r) {
    while (r->reg.next && r->reg.next != &r->reg) pl_unit_free(r, r->reg.next);
    pl_queue_free(r->q_docs);
    pl_queue_free(r->q_items);
    pl_queue_free(r->q_done);
    if (r->results.path) pl_sink_close(&r->results, NULL);
    if (r->inter.path) pl_sink_close(&r->inter, NULL);
    if (r->errors.path) pl_sink_close(&r->errors, NULL);
    if (r->ledger_sink.path) pl_sink_close(&r->ledger_sink, NULL);
    pl_db_close(r->db); /* (what is not committed is rolled back) */
    pl_ledger_free(r->ledger);
    pl_checkpoint_free(&r->ck);
    eng_context_free(r->ctx);
    eng_grammar_free(r->grammar);
    free(r->gbnf);
    eng_model_free(r->model);
    dp_lock_release(&r->lock);
    free(r->state_dir);
    free(r->checkpoint_path);
    free(r->ledger_path);
    free(r->lock_path);
    free(r->results_path);
    free(r->errors_path);
    free(r->inter_path);
    free(r->status_path);
    free(r->metrics_path);
    dp_mutex_free(&r->mu);
    job_spec_free(&r->job);
}

/* Which shard this run is: --shard I/N, else Slurm's array variables, else Kubernetes'
 * JOB_COMPLETION_INDEX (the count from --shards or the manifest). Returns an exit code. */
static int resolve_shard(pl_run *r, const pl_run_opts *o) {
    uint32_t i = o->shard_i, n = o->shard_n, mn = 0;
    const pl_layout_job lj = {r->job.state_dir, r->job.outputs.jsonl, false, NULL, NULL};
    pl_layout l;
    dp_err err = {0};
    char mpath[4400] = "";
    dp_status st = pl_layout_make(&lj, 0, 0, &l);
    if (!st) {
        snprintf(mpath, sizeof(mpath), "%s", l.manifest);
        st = pl_manifest_shards(mpath, &mn, &err);
    } else dp_err_set(&err, st, "out of memory");
    pl_layout_free(&l);
    if (st && st != DP_ENOENT) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
        return PL_EXIT_DATAERR;
    }
    const char *sid = getenv("SLURM_ARRAY_TASK_ID"), *scnt = getenv("SLURM_ARRAY_TASK_COUNT");
    const char *smin = getenv("SLURM_ARRAY_TASK_MIN"), *jci = getenv("JOB_COMPLETION_INDEX");
    const char *from = "--shard";
    if (!n && sid && scnt) {
        i = (uint32_t)(atol(sid) - (smin ? atol(smin) : 0)), n = (uint32_t)atol(scnt);
        from = "SLURM_ARRAY_TASK_ID";
    } else if (!n && jci) {
        i = (uint32_t)atol(jci), n = o->shards ? o->shards : mn;
        from = "JOB_COMPLETION_INDEX";
        if (!n) {
            pl_say(PL_SAY_ERROR, "error", NULL, "JOB_COMPLETION_INDEX is set but the number of shards is unknown: pass "
                    "--shards N or run docpipe plan %s --shards N first", r->job.file);
            return PL_EXIT_USAGE;
        }
    }
    if (!n) return 0;
    if (i >= n) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s gives shard %u of %u (shards are numbered 0..%u)", from, i, n, n - 1);
        return PL_EXIT_USAGE;
    }
    if (mn != n) {
        if (!mn)
            pl_say(PL_SAY_ERROR, "error", NULL,
                   "shard %u/%u: %s is missing; run docpipe plan %s --shards %u "
                   "first (merge checks the shards against it)",
                   i, n, mpath, r->job.file, n);
        else
            pl_say(PL_SAY_ERROR, "error", NULL, "shard %u/%u: the manifest in %s has %u shards", i, n, r->job.state_dir,
                   mn);
        return PL_EXIT_CONFIG;
    }
    r->shard_i = i, r->shard_n = n;
    return 0;
}

/* Paths and the checks that need no model. Returns an exit code (0 = go on). */
static int open_job(pl_run *r, const char *job_path, const pl_run_opts *o) {
    dp_err err = {0};
    dp_status st = job_load(job_path, &r->job, &err);
    if (st) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
        return st == DP_ENOENT || st == DP_EACCES ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
    }
    /* command-line overrides of the job's model section (-m, -t, -c) */
    job_spec *jm = &r->job;
    if (o->model) {
        char *m = strdup(o->model);
        if (!m) return PL_EXIT_SOFTWARE;
        free(jm->model.path);
        jm->model.path = m;
        jm->model.path_line = jm->model.path_col = 0; /* messages name -m, not the job file */
    }
    if (o->threads) jm->model.threads = o->threads;
    if (o->context) {
        if (jm->task == JOB_TASK_GENERATE && (int64_t)o->context <= jm->generation.max_tokens) {
            pl_say(PL_SAY_ERROR, "error", NULL, "-c %u leaves no room for the prompt: generation.max_tokens is %lld",
                    o->context, (long long)jm->generation.max_tokens);
            return PL_EXIT_USAGE;
        }
        jm->model.context = o->context;
    }
    int rc = resolve_shard(r, o);
    if (rc) return rc;
    const job_spec *j = &r->job;
    if (j->outputs.intermediate && r->shard_n) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s: outputs.intermediate is not supported in a sharded run yet "
               "(merge combines the main outputs only); leave it out for --shard", j->file);
        return PL_EXIT_CONFIG;
    }
    if (j->outputs.sqlite && r->shard_n) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s: outputs.sqlite is not supported in a sharded run yet (every shard "
               "would write one database, and a shard cannot tell a deleted document from another shard's); leave it "
               "out for --shard", j->file);
        return PL_EXIT_CONFIG;
    }
    const pl_layout_job lj = {j->state_dir, j->outputs.jsonl, j->outputs.gzip, j->outputs.metrics,
                              j->outputs.intermediate};
    pl_layout l;
    if (pl_layout_make(&lj, r->shard_i, r->shard_n, &l)) {
        pl_say(PL_SAY_ERROR, "error", NULL, "out of memory");
        return PL_EXIT_SOFTWARE;
    }
    /* the run owns the strings from here (pl_run_free) */
    r->state_dir = l.state_dir, r->checkpoint_path = l.checkpoint, r->ledger_path = l.ledger, r->lock_path = l.lock;
    r->results_path = l.results, r->errors_path = l.errors, r->status_path = l.status;
    r->metrics_path = l.metrics, r->inter_path = l.intermediate;
    free(l.manifest);
    if (r->metrics_path) r->last_success = pl_metrics_last_success(r->metrics_path);
    return pl_preflight(j, PL_PREFLIGHT_RUN, "docpipe");
}

/* Takes the job lock. */
static int lock_job(pl_run *r) {
    dp_err err = {0};
    dp_status st = dp_mkdir_p(r->state_dir, &err);
    if (st) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
        return pl_exit_for_write(st);
    }
    st = dp_lock_acquire(&r->lock, r->lock_path, &err);
    if (st == DP_EBUSY) {
        char note[128];
        dp_lock_read_note(r->lock_path, note, sizeof(note));
        char *nl = strchr(note, '\n');
        if (nl) *nl = 0;
        pl_say(PL_SAY_ERROR, "error", NULL, "job %s is already running (%s; lock %s); try again when it has finished",
                r->job.file, note[0] ? note : "pid unknown", r->lock_path);
        return PL_EXIT_TEMPFAIL;
    }
    if (st) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
        return pl_exit_for_write(st);
    }
    char note[64];
    snprintf(note, sizeof(note), "pid %d\n", dp_getpid());
    dp_lock_write_note(&r->lock, note, NULL);
    return 0;
}

/* Moves path aside as path.old-STAMP (never deletes); prints what it did. */
static int move_aside(const char *path, const char *stamp) {
    if (!dp_path_exists(path)) return 0;
    size_t n = strlen(path) + strlen(stamp) + 8;
    char *to = malloc(n);
    if (!to) return PL_EXIT_SOFTWARE;
    snprintf(to, n, "%s.old-%s", path, stamp);
    dp_err err = {0};
    dp_status st = dp_rename(path, to, &err);
    if (!st) pl_say(PL_SAY_INFO, "restart", NULL, "--restart: moved %s to %s", path, to);
    else pl_say(PL_SAY_ERROR, "error", NULL, "--restart: %s", dp_err_msg(&err));
    free(to);
    return st ? PL_EXIT_IOERR : 0;
}

static int restart(pl_run *r) {
    char stamp[32], t[32];
    dp_time_format(dp_time_wall(), false, t);
    size_t k = 0;
    for (const char *c = t; *c; c++)
        if (*c != '-' && *c != ':') stamp[k++] = *c;
    stamp[k] = 0;
    int rc;
    if ((rc = move_aside(r->results_path, stamp)) || (rc = move_aside(r->errors_path, stamp)) ||
        (rc = move_aside(r->status_path, stamp)) || (rc = move_aside(r->ledger_path, stamp)) ||
        (rc = move_aside(r->checkpoint_path, stamp)) || (r->inter_path && (rc = move_aside(r->inter_path, stamp))))
        return rc;
    if (r->job.outputs.per_document_dir && (rc = move_aside(r->job.outputs.per_document_dir, stamp))) return rc;
    dp_err err = {0};
    const char *dirs[2] = {r->state_dir, NULL};
    char *od = dir_of(r->results_path);
    dirs[1] = od;
    for (int i = 0; i < 2; i++)
        if (dirs[i] && dp_dir_sync(dirs[i], &err)) {
            pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
            free(od);
            return PL_EXIT_IOERR;
        }
    free(od);
    return 0;
}

static const char *changed(const pl_fingerprint *a, const pl_fingerprint *b) {
    if (strcmp(a->model, b->model)) return "the model file";
    if (strcmp(a->templates, b->templates)) return "the prompts (system, template or reduce_template)";
    if (strcmp(a->settings, b->settings)) return "the generation, chunking, model.context or model.kv_type settings";
    return NULL;
}

/* Checkpoint, sinks and ledger: fresh or resumed. Returns an exit code (0 = go on). */
/* True when path's first n bytes hash to sha (hex). */
static bool prefix_matches(const char *path, uint64_t n, const char *sha) {
    dp_err err = {0};
    return pl_file_check_prefix(path, n, sha, &err) == DP_OK;
}

/* outputs.sqlite: opened (created) for this job; refused when it belongs to another model or
 * schema. A crash between the database's commit and checkpoint.json's replacement leaves the
 * database one commit ahead: when the sinks on disk hold exactly what that newer checkpoint
 * says (they were synced before the database committed), it becomes the checkpoint. */
static int open_db(pl_run *r, bool may_adopt) {
    const job_spec *j = &r->job;
    if (!j->outputs.sqlite) return 0;
    dp_err err = {0};
    dp_stat_info si = {0};
    (void)dp_stat(j->model.path, true, &si, NULL);
    const bool embed = j->task == JOB_TASK_EMBED;
    char *dd = dir_of(j->outputs.sqlite);
    dp_status st = dd ? dp_mkdir_p(dd, &err) : DP_ENOMEM;
    free(dd);
    if (st) {
        pl_say(PL_SAY_ERROR, "error", NULL, "outputs.sqlite: %s", dp_err_msg(&err));
        return pl_exit_for_write(st);
    }
    const pl_db_info info = {r->fp.model, j->model.path, si.size, si.mtime_ns, embed ? "embed" : "generate",
                             embed ? (int32_t)eng_model_get_info(r->model)->n_embd : 0,
                             embed ? eng_pooling_name(r->pooling) : NULL, embed && j->embedding.normalize};
    const char *busy = getenv("DOCPIPE_SQLITE_BUSY_MS"); /* (tests: a short wait) */
    st = pl_db_open(j->outputs.sqlite, &info, busy && atoi(busy) > 0 ? atoi(busy) : DB_BUSY_MS, &r->db, &err);
    if (st) {
        pl_say(PL_SAY_ERROR, "error", NULL, "outputs.sqlite: %s", dp_err_msg(&err));
        return st == DP_EBUSY ? PL_EXIT_TEMPFAIL : st == DP_EFORMAT ? PL_EXIT_CONFIG : pl_exit_for_write(st);
    }
    char *stored = NULL;
    if (!may_adopt || pl_db_stored_checkpoint(r->db, &stored, &err) || !stored) return 0;
    pl_checkpoint dck;
    if (!pl_checkpoint_parse(stored, strlen(stored), j->outputs.sqlite, &dck, &err) && dck.commits > r->ck.commits &&
        !changed(&dck.fp, &r->fp) && !strcmp(dck.results_path, r->ck.results_path) &&
        prefix_matches(r->results_path, dck.results_bytes, dck.results_sha256) &&
        prefix_matches(r->errors_path, dck.errors_bytes, dck.errors_sha256) &&
        prefix_matches(r->ledger_path, dck.ledger_bytes, dck.ledger_sha256) &&
        (!r->inter_path || prefix_matches(r->inter_path, dck.inter_bytes, dck.inter_sha256))) {
        if ((st = pl_checkpoint_write(r->checkpoint_path, &dck, &err))) {
            pl_checkpoint_free(&dck);
            free(stored);
            pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
            return pl_exit_for_write(st);
        }
        pl_say(PL_SAY_INFO, "checkpoint", NULL, "%s holds a newer commit than %s (the last run stopped between the "
               "two): resuming from it", j->outputs.sqlite, r->checkpoint_path);
        pl_checkpoint_free(&r->ck);
        r->ck = dck;
    } else {
        pl_checkpoint_free(&dck);
    }
    free(stored);
    return 0;
}

static int open_state(pl_run *r, bool restart_requested) {
    dp_err err = {0};
    const job_spec *j = &r->job;
    if (pl_model_sha256(j->model.path, r->state_dir, r->fp.model, &err)) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
        return PL_EXIT_CONFIG;
    }
    if (j->model.sha256 && strcmp(j->model.sha256, r->fp.model)) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s: model.sha256 is %s but %s has sha256 %s", j->file, j->model.sha256,
                j->model.path, r->fp.model);
        return PL_EXIT_CONFIG;
    }
    pl_system_fingerprint(r->fp.model, r->sys_fingerprint);
    templates_fingerprint(j, r->fp.templates);
    settings_fingerprint(j, r->gbnf, r->fp.settings);
    const char *res_rel = pl_job_rel(r, r->results_path), *err_rel = pl_job_rel(r, r->errors_path);
    int rc;
    if (restart_requested && (rc = restart(r))) return rc;
    dp_status st = pl_checkpoint_read(r->checkpoint_path, &r->ck, &err);
    if (st && st != DP_ENOENT) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s (outputs untouched; move the state folder aside or run with --restart)",
                dp_err_msg(&err));
        return st == DP_EFORMAT ? PL_EXIT_DATAERR : PL_EXIT_IOERR;
    }
    if ((rc = open_db(r, st == DP_OK && !restart_requested))) return rc;
    if (st == DP_ENOENT) {
        /* fresh: the checkpoint comes first, so a crash before the outputs exist is resumable */
        pl_checkpoint_free(&r->ck);
        memset(&r->ck, 0, sizeof(r->ck));
        r->ck.fp = r->fp;
        r->ck.results_path = strdup(res_rel);
        r->ck.errors_path = strdup(err_rel);
        r->ck.gzip = j->outputs.gzip;
        uint8_t d[32];
        dp_sha256_digest("", 0, d); /* the sinks are empty */
        dp_sha256_hex(d, r->ck.results_sha256);
        memcpy(r->ck.errors_sha256, r->ck.results_sha256, 65);
        memcpy(r->ck.ledger_sha256, r->ck.results_sha256, 65);
        if (r->inter_path) {
            memcpy(r->ck.inter_sha256, r->ck.results_sha256, 65);
            if (!(r->ck.inter_path = strdup(pl_job_rel(r, r->inter_path)))) return PL_EXIT_SOFTWARE;
        }
        for (int i = 0; i < 3; i++) {
            const char *p = i == 2 ? r->inter_path : i ? r->errors_path : r->results_path;
            if (!p) continue;
            if (dp_path_exists(p)) {
                pl_say(PL_SAY_ERROR, "error", NULL,
                       "%s already exists and no checkpoint in %s owns it; move it away, choose "
                       "another outputs.jsonl, or run with --restart (which moves it aside)",
                       p, r->state_dir);
                return PL_EXIT_CANTCREAT;
            }
        }
        char *od = dir_of(r->results_path);
        st = od ? dp_mkdir_p(od, &err) : DP_ENOMEM;
        free(od);
        if (!st) st = pl_checkpoint_write(r->checkpoint_path, &r->ck, &err);
        if (st) {
            pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
            return pl_exit_for_write(st);
        }
        if ((st = pl_sink_open(&r->results, r->results_path, j->outputs.gzip, true, 0, NULL, &err)) ||
            (st = pl_sink_open(&r->errors, r->errors_path, false, true, 0, NULL, &err)) ||
            (st = pl_sink_open(&r->ledger_sink, r->ledger_path, false, false, 0, NULL, &err)) ||
            (r->inter_path && (st = pl_sink_open(&r->inter, r->inter_path, j->outputs.gzip, true, 0, NULL, &err)))) {
            pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
            return pl_exit_for_write(st);
        }
    } else {
        const char *what = changed(&r->ck.fp, &r->fp);
        if (what) {
            pl_say(PL_SAY_ERROR, "error", NULL,
                   "%s changed since the checkpoint in %s: results made with the old one would "
                   "mix with new ones. Run with --restart to start over (old outputs are moved aside, not "
                   "deleted), or undo the change",
                   what, r->checkpoint_path);
            return PL_EXIT_CONFIG;
        }
        const char *inter_rel = r->inter_path ? pl_job_rel(r, r->inter_path) : NULL;
        if (strcmp(r->ck.results_path, res_rel) || strcmp(r->ck.errors_path, err_rel) ||
            r->ck.gzip != j->outputs.gzip || !r->ck.inter_path != !inter_rel ||
            (inter_rel && strcmp(r->ck.inter_path, inter_rel))) {
            pl_say(PL_SAY_ERROR, "error", NULL,
                   "the outputs changed since the checkpoint in %s (it wrote %s); run with "
                   "--restart to start over, or undo the change",
                   r->checkpoint_path, r->ck.results_path);
            return PL_EXIT_CONFIG;
        }
        /* resume: check every sink against its hash, then cut it back to what the checkpoint covers */
        if ((st = pl_sink_open(&r->results, r->results_path, j->outputs.gzip, false, r->ck.results_bytes,
                               r->ck.results_sha256, &err)) ||
            (st = pl_sink_open(&r->errors, r->errors_path, false, false, r->ck.errors_bytes, r->ck.errors_sha256,
                               &err)) ||
            (st = pl_sink_open(&r->ledger_sink, r->ledger_path, false, false, r->ck.ledger_bytes, r->ck.ledger_sha256,
                               &err)) ||
            (r->inter_path && (st = pl_sink_open(&r->inter, r->inter_path, j->outputs.gzip, false, r->ck.inter_bytes,
                                                 r->ck.inter_sha256, &err)))) {
            pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
            return st == DP_EFORMAT ? PL_EXIT_DATAERR : pl_exit_for_write(st);
        }
    }
    /* (no hash to compare: pl_sink_open checked these very bytes a moment ago) */
    if ((st = pl_ledger_load(r->ledger_path, r->ck.ledger_bytes, NULL, &r->ledger, &err))) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&err));
        return st == DP_EFORMAT ? PL_EXIT_DATAERR : PL_EXIT_IOERR;
    }
    r->ck.runs++;
    r->ck.complete = false;
    return 0;
}

static int open_model(pl_run *r, const pl_run_opts *o) {
    dp_err err = {0};
    const job_spec *j = &r->job;
    if (eng_model_load(j->model.path, &r->model, &err)) {
        if (j->model.path_line)
            pl_say(PL_SAY_ERROR, "error", NULL, "%s:%d:%d: model.path: %s", j->file, j->model.path_line,
                   j->model.path_col, dp_err_msg(&err));
        else pl_say(PL_SAY_ERROR, "error", NULL, "-m: %s", dp_err_msg(&err));
        return PL_EXIT_CONFIG;
    }
    r->tok = eng_model_get_tokenizer(r->model);
    r->chat = eng_model_chat_kind(r->model);
    r->n_ctx = (int32_t)j->model.context;
    r->n_ctx_train = (int32_t)eng_model_get_info(r->model)->n_ctx_train;
    const char *base = strrchr(j->model.path, '/');
    snprintf(r->model_name, sizeof(r->model_name), "%s", base ? base + 1 : j->model.path);
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = (uint32_t)j->model.context;
    cp.n_seq_max = (uint32_t)j->model.max_sequences + 1; /* + the shared prompt head */
    if (j->task == JOB_TASK_EMBED) {
        static const eng_pooling by_job[] = {ENG_POOLING_NONE, ENG_POOLING_MEAN, ENG_POOLING_CLS, ENG_POOLING_LAST};
        r->pooling = by_job[j->embedding.pooling];
        if (r->pooling == ENG_POOLING_NONE) {
            r->pooling = eng_model_pooling(r->model, ENG_POOLING_LAST);
            if (eng_model_get_info(r->model)->pooling_type < ENG_POOLING_MEAN)
                pl_say(PL_SAY_WARN, "warning", NULL, "%s names no pooling; using last (set embedding.pooling)",
                       j->model.path);
        }
        cp.pooling = r->pooling;
        cp.n_seq_max = (uint32_t)j->model.max_sequences; /* no shared head: no prompt */
    }
    cp.n_threads = (int)j->model.threads;
    cp.device = o->device >= 0 ? (dp_device)o->device : j->model.device;
    cp.kv_type = j->model.kv_type ? ENG_TYPE_Q8_0 : ENG_TYPE_F16;
    uint32_t ub = (uint32_t)j->model.max_sequences * 256u;
    cp.n_ubatch = ub > 2048 ? 2048 : ub < 256 ? 256 : ub;
    r->n_ubatch = (int32_t)cp.n_ubatch;
    if (pl_context_open(r->model, &cp, o->mem, &r->ctx, &err)) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s: %s", j->file, dp_err_msg(&err));
        return PL_EXIT_CONFIG;
    }
    {
        dp_buf g;
        dp_buf_init(&g, (size_t)1 << 26);
        dp_status st = pl_job_grammar(j, &g, &err);
        if (!st && g.len) {
            st = eng_grammar_compile(r->tok, (const char *)g.data, g.len, &r->grammar, &err);
            r->gbnf = (char *)g.data; /* NUL-terminated */
        } else {
            dp_buf_free(&g);
        }
        if (st) {
            pl_say(PL_SAY_ERROR, "error", NULL, "%s:%d:%d: %s", j->file, j->generation.rf_line, j->generation.rf_col,
                   dp_err_msg(&err));
            return st == DP_ENOENT || st == DP_EIO ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
        }
    }
    r->map_spec = (pl_prompt_spec){r->chat, j->prompts.system, j->prompts.template_, j->generation.thinking};
    /* without a reduce_template, the template itself combines the chunk results */
    r->do_reduce = j->chunking.mode == JOB_CHUNK_MAP_REDUCE;
    r->reduce_spec = (pl_prompt_spec){r->chat, j->prompts.system,
                                      j->prompts.reduce_template ? j->prompts.reduce_template : j->prompts.template_,
                                      j->generation.thinking};
    return 0;
}

void pl_run_metrics(pl_run *r, int outcome) {
    if (!r->metrics_path) return;
    char job[256], shard[32];
    const char *base = strrchr(r->job.file, '/');
    snprintf(job, sizeof(job), "%s", base ? base + 1 : r->job.file);
    char *dot = strrchr(job, '.');
    if (dot && dot != job) *dot = 0;
    snprintf(shard, sizeof(shard), "%u/%u", r->shard_i, r->shard_n);
    const double now = (double)dp_time_wall();
    dp_mutex_lock(&r->mu);
    const uint64_t ran = r->n_docs_done - r->n_docs_skipped;
    pl_metrics m = {job, r->shard_n ? shard : NULL, ran - r->n_docs_failed, r->n_docs_failed, r->n_docs_skipped,
                    r->n_requests_done, r->n_prompt_tokens, r->n_gen_tokens, r->ck.docs_ok, r->ck.docs_failed,
                    (double)r->start_wall, outcome >= 0 ? now : 0, (double)(dp_time_ns() - r->t0) / 1e9,
                    outcome >= 0 ? pl_exit_code(outcome) : -1,
                    r->last_success};
    dp_mutex_unlock(&r->mu);
    dp_err err = {0};
    char md[4096];
    dp_path_dir(r->metrics_path, md, sizeof(md));
    dp_status st = dp_mkdir_p(md, &err);
    if (!st) st = pl_metrics_write(r->metrics_path, &m, &err);
    if (st && !r->metrics_warned) {
        r->metrics_warned = true;
        pl_say(PL_SAY_WARN, "warning", NULL, "outputs.metrics not written (the run goes on): %s", dp_err_msg(&err));
    }
}

void pl_run_init(pl_run *r) {
    memset(r, 0, sizeof(*r));
    dp_mutex_init(&r->mu);
    r->reg.next = r->reg.prev = &r->reg;
    r->lock.handle = -1;
    r->results.f.handle = r->errors.f.handle = r->ledger_sink.f.handle = r->inter.f.handle = -1;
    r->t0 = dp_time_ns();
    r->start_wall = dp_time_wall();
    dp_time_format(r->start_wall, true, r->date);
}

/* The counters the progress line shows (r->mu held). */
static pl_progress_snapshot progress_snapshot(const pl_run *r) {
    return (pl_progress_snapshot){
        .files = r->n_files, .listing_done = r->listing_done, .docs_listed = r->n_docs_listed,
        .docs_done = r->n_docs_done, .docs_skipped = r->n_docs_skipped, .docs_failed = r->n_docs_failed,
        .requests_done = r->n_requests_done, .gen_tokens = r->n_gen_tokens, .prompt_tokens = r->n_prompt_tokens,
        .computed_tokens = r->n_computed_tokens, .counts_tokens = r->job.task != JOB_TASK_EMBED,
        .chunking_done = r->chunking_done, .queued_requests = r->n_queued_requests,
        .queued_prompt_tokens = r->n_queued_prompt_tokens, .prefix_saved = r->n_prefix_saved,
        .max_gen = r->job.generation.max_tokens};
}

int pl_run_job(const char *job_path, const pl_run_opts *o) {
    pl_run *r = calloc(1, sizeof(*r));
    if (!r) return PL_EXIT_SOFTWARE;
    pl_run_init(r);
    r->retry_failed = o->retry_failed;
    int rc;
    if ((rc = open_job(r, job_path, o)) || (rc = lock_job(r))) { /* (locked: the metrics are another run's) */
        pl_run_free(r);
        free(r);
        return rc;
    }
    /* the model first: the database sink needs its dimension before the state is opened */
    if ((rc = open_model(r, o)) || (rc = open_state(r, o->restart))) {
        pl_run_metrics(r, rc);
        pl_run_free(r);
        free(r);
        return rc;
    }
    pl_run_metrics(r, -1);
    dp_stop_signals_install(pl_exit_code(PL_EXIT_TEMPFAIL));
    const size_t seqs = (size_t)r->job.model.max_sequences;
    if (pl_queue_new(4, pl_doc_free, &r->q_docs) || pl_queue_new(2 * seqs + 8, pl_item_free, &r->q_items) ||
        pl_queue_new(4 * seqs + 64, NULL, &r->q_done)) {
        pl_run_free(r);
        free(r);
        return PL_EXIT_SOFTWARE;
    }
    pl_progress pg;
    /* earlier runs' pace gives an ETA before this run's first document finishes */
    r->work_seconds_before = r->ck.work_seconds;
    const uint64_t done_before = r->ck.docs_ok + r->ck.docs_failed;
    pl_progress_init(&pg, o->quiet, o->progress,
                     r->ck.work_seconds > 1 && done_before ? (double)done_before / r->ck.work_seconds : 0);
    r->t_work0 = dp_time_ns();
    dp_thread th[4];
    dp_thread_fn fns[4] = {pl_stage_read, pl_stage_chunk,
                           r->job.task == JOB_TASK_EMBED ? pl_stage_embed : pl_stage_infer, pl_stage_write};
    int started = 0;
    dp_err err = {0};
    for (; started < 4; started++)
        if (dp_thread_create(&th[started], fns[started], r, &err)) {
            pl_run_fail(r, DP_ERROR, &err, PL_EXIT_OSERR);
            break;
        }
    /* supervise until the writer (the last stage) has finished */
    bool stop_seen = false;
    for (bool done = started < 4; !done;) {
        dp_sleep_ms(50);
        if (!stop_seen && dp_stop_requests() > 0) {
            stop_seen = true;
            pl_progress_message(&pg, "stopping: committing finished documents (a second Ctrl-C quits at once; the "
                                "run stays resumable)");
            pl_run_stop(r);
        }
        dp_mutex_lock(&r->mu);
        pl_progress_snapshot s = progress_snapshot(r);
        done = r->writer_done;
        dp_mutex_unlock(&r->mu);
        pl_progress_update(&pg, &s, false);
    }
    for (int i = 0; i < started; i++) dp_thread_join(&th[i]);
    pl_progress_snapshot s = progress_snapshot(r);
    pl_progress_update(&pg, &s, true);
    const double secs = (double)(dp_time_ns() - r->t0) / 1e9;
    const uint64_t ran = r->n_docs_done - r->n_docs_skipped;
    if (r->fail_status) {
        pl_say(PL_SAY_ERROR, "error", NULL, "%s", dp_err_msg(&r->fail_err));
        if (r->fail_exit == PL_EXIT_IOERR)
            pl_say(PL_SAY_INFO, "resume_hint", NULL,
                   "the checkpoint still describes the last commit; fix the cause and run the job "
                   "again to resume");
        rc = r->fail_exit ? r->fail_exit : PL_EXIT_SOFTWARE;
    } else if (stop_seen) {
        pl_say(PL_SAY_WARN, "interrupted", NULL,
               "interrupted by signal %d: %llu documents committed in this run; run the job again "
               "to resume",
               dp_stop_signal(), (unsigned long long)ran);
        rc = PL_EXIT_TEMPFAIL;
    } else if (r->n_files == 0) {
        pl_say(PL_SAY_ERROR, "error", NULL,
               "no input documents: the input folders have no file matching the include and "
               "exclude globs");
        rc = PL_EXIT_NOINPUT;
    } else {
        /* a document that failed in an earlier run (and did not change) still counts: a resumed run
         * reports the same outcome as an uninterrupted one */
        rc = r->n_docs_failed || r->n_failed_before ? PL_EXIT_PARTIAL : PL_EXIT_OK;
    }
    const bool embed = r->job.task == JOB_TASK_EMBED; /* an embedding job generates nothing: say what it read */
    const uint64_t shown = embed ? r->n_prompt_tokens : r->n_gen_tokens;
    if (!o->quiet || rc)
        pl_say(rc == PL_EXIT_OK                                  ? PL_SAY_INFO
               : rc == PL_EXIT_PARTIAL || rc == PL_EXIT_TEMPFAIL ? PL_SAY_WARN
                                                                 : PL_SAY_ERROR,
               "summary",
               json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:s, s:i}", "documents",
                         (json_int_t)r->n_docs_done, "done", (json_int_t)(ran - r->n_docs_failed), "results",
                         (json_int_t)r->n_records, "failed", (json_int_t)r->n_docs_failed, "skipped",
                         (json_int_t)r->n_docs_skipped, "failed_before", (json_int_t)r->n_failed_before,
                         "prompt_tokens", (json_int_t)r->n_prompt_tokens, "generated_tokens",
                         (json_int_t)r->n_gen_tokens, "seconds", (double)(int64_t)(secs * 10) / 10, "results_file",
                         r->results_path, "errors_file", r->errors_path, "exit_code", pl_exit_code(rc)),
               "%llu documents in %.1f s: %llu done (%llu results), %llu failed (see %s), %llu "
               "skipped (unchanged since an earlier run, %llu of them failed there); %llu tokens %s (%.1f "
               "tok/s); results in %s",
               (unsigned long long)r->n_docs_done, secs, (unsigned long long)(ran - r->n_docs_failed),
               (unsigned long long)r->n_records, (unsigned long long)r->n_docs_failed, r->errors_path,
               (unsigned long long)r->n_docs_skipped, (unsigned long long)r->n_failed_before,
               (unsigned long long)shown, embed ? "embedded" : "generated", secs > 0 ? (double)shown / secs : 0.0,
               r->results_path);
    if (!o->quiet && r->n_prefix_tokens)
        pl_say(PL_SAY_INFO, "shared_prefix", NULL,
               "shared prompt head of %llu tokens computed once: %llu prompt tokens not recomputed",
               (unsigned long long)r->n_prefix_tokens, (unsigned long long)r->n_prefix_saved);
    if (rc == PL_EXIT_OK || rc == PL_EXIT_PARTIAL) r->last_success = (double)dp_time_wall();
    pl_run_metrics(r, rc);
    pl_run_free(r);
    free(r);
    return rc;
}
