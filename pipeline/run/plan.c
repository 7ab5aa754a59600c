/*
 * plan.c - `docpipe plan` and `docpipe status`: both drive the run's own reader stage, so they
 * list, filter and skip exactly as `docpipe run` would.
 *
 *   plan    loads the model (for its tokenizer), chunks every document that a run would
 *           process, counts requests and prompt tokens, and estimates the time from a short
 *           measured benchmark of the model on this machine.
 *   status  reads the state folder (checkpoint and ledger) and hashes the inputs, without the
 *           model: done, failed, skipped and pending documents.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "platform.h"
#include "chunker.h"
#include "sink.h"
#include "exit_codes.h"
#include "layout.h"
#include "open_context.h"
#include "run_internal.h"


/* A file of this job's layout (layout.h): the whole run's (n 0) or shard i of n's. */
static void layout_file(const pl_run *r, uint32_t i, uint32_t n, pl_layout_file f, char *buf, size_t cap) {
    const pl_layout_job lj = {r->job.state_dir, r->job.outputs.jsonl, r->job.outputs.gzip, NULL, NULL};
    pl_layout_path(&lj, i, n, f, buf, cap); /* (an empty path on failure: the read then fails, naming nothing) */
}

static int load(pl_run *r, const char *job_path) {
    pl_run_init(r);
    dp_err err = {0};
    dp_status st = job_load(job_path, &r->job, &err);
    if (st) {
        fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
        return st == DP_ENOENT || st == DP_EACCES ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
    }
    char path[4200];
    layout_file(r, 0, 0, PL_FILE_CHECKPOINT, path, sizeof(path));
    st = pl_checkpoint_read(path, &r->ck, &err);
    if (st && st != DP_ENOENT) {
        fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
        return PL_EXIT_DATAERR;
    }
    layout_file(r, 0, 0, PL_FILE_LEDGER, path, sizeof(path));
    if ((st = pl_ledger_load(path, st ? 0 : r->ck.ledger_bytes, st ? NULL : r->ck.ledger_sha256, &r->ledger, &err))) {
        fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
        return st == DP_EFORMAT ? PL_EXIT_DATAERR : PL_EXIT_IOERR;
    }
    return 0;
}


typedef void (*doc_fn)(pl_run *r, pl_doc *d, void *ud);
typedef struct plan_counts plan_counts;
static void plan_chunks(pl_run *r, pl_doc *d, plan_counts *c);

/* Runs the reader stage and hands every document to fn in listing order. */
static int each_doc(pl_run *r, doc_fn fn, void *ud) {
    if (pl_queue_new(4, pl_doc_free, &r->q_docs)) return PL_EXIT_SOFTWARE;
    dp_thread th;
    dp_err err = {0};
    if (dp_thread_create(&th, pl_stage_read, r, &err)) {
        fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
        return PL_EXIT_OSERR;
    }
    void *p;
    while (pl_queue_pop(r->q_docs, &p) == DP_OK) {
        pl_doc *d = p;
        fn(r, d, ud);
        pl_unit_free(r, d->u);
        pl_doc_text_free(&d->text);
        free(d);
    }
    dp_thread_join(&th);
    if (r->fail_status) {
        fprintf(stderr, "docpipe: %s\n", dp_err_msg(&r->fail_err));
        return r->fail_exit ? r->fail_exit : PL_EXIT_NOINPUT;
    }
    return 0;
}

/* ---- status ------------------------------------------------------------------------------ */

typedef struct status_counts {
    uint64_t done, pending, unreadable, standing;
} status_counts;

static void count_status(pl_run *r, pl_doc *d, void *ud) {
    (void)r;
    status_counts *c = ud;
    if (d->u->skipped && d->u->failed_before) {
        if (c->standing++ < 20) printf("  failed before, unchanged since (not retried; --retry-failed does): %s\n",
                                       d->u->path);
    }
    if (d->u->skipped) c->done++;
    else if (!d->u->sha[0] || !strncmp(d->u->sha, "stat:", 5)) c->unreadable++; /* (not read: no content hash) */
    else c->pending++;
}

/* A sharded job: each shard's state folder, against the manifest's documents. */
static void status_shards(const pl_run *r, uint32_t n) {
    char path[4400];
    layout_file(r, 0, 0, PL_FILE_MANIFEST, path, sizeof(path));
    json_t *man = json_load_file(path, 0, NULL);
    json_t *docs = json_object_get(man, "documents");
    printf("sharded: %u shards (manifest %s, %zu documents)\n", n, path, json_array_size(docs));
    for (uint32_t i = 0; i < n; i++) {
        uint64_t in_shard = 0, done = 0, unread = 0;
        pl_checkpoint ck;
        pl_ledger *l = NULL;
        dp_err err = {0};
        layout_file(r, i, n, PL_FILE_CHECKPOINT, path, sizeof(path));
        const bool started = pl_checkpoint_read(path, &ck, &err) == DP_OK;
        layout_file(r, i, n, PL_FILE_LEDGER, path, sizeof(path));
        if (pl_ledger_load(path, started ? ck.ledger_bytes : 0, started ? ck.ledger_sha256 : NULL, &l, &err)) {
            printf("  shard %u: %s\n", i, dp_err_msg(&err));
            pl_ledger_free(l);
            if (started) pl_checkpoint_free(&ck);
            continue;
        }
        size_t k;
        json_t *d;
        json_array_foreach(docs, k, d) {
            if ((uint32_t)json_integer_value(json_object_get(d, "shard")) != i) continue;
            in_shard++;
            const char *dp = json_string_value(json_object_get(d, "path")),
                       *sha = json_string_value(json_object_get(d, "sha256"));
            if (!sha || !sha[0]) unread++; /* unreadable when planned: an error record every run */
            else done += dp && pl_ledger_get(l, dp, sha) != PL_LEDGER_NONE;
        }
        printf("  shard %u: %llu documents, %llu done (%zu ok, %zu failed), %llu pending, %llu unreadable; %s\n", i,
               (unsigned long long)in_shard, (unsigned long long)done, pl_ledger_count(l, PL_LEDGER_OK),
               pl_ledger_count(l, PL_LEDGER_FAILED), (unsigned long long)(in_shard - done - unread),
               (unsigned long long)unread,
               !started ? "not started" : ck.complete ? "complete" : "interrupted or running");
        pl_ledger_free(l);
        if (started) pl_checkpoint_free(&ck);
    }
    json_decref(man);
}

/* The outputs against the hashes the checkpoint recorded: status is where a damaged state
 * should show first, before a run refuses it. */
static int check_outputs(const pl_run *r) {
    if (!r->ck.results_path) return 0;
    /* the files the checkpoint itself names (relative to the job's folder, as run wrote them),
     * rather than names derived again from the job */
    const char *rel[3] = {r->ck.results_path, r->ck.errors_path, r->ck.inter_path},
               *want[3] = {r->ck.results_sha256, r->ck.errors_sha256, r->ck.inter_sha256};
    const uint64_t bytes[3] = {r->ck.results_bytes, r->ck.errors_bytes, r->ck.inter_bytes};
    for (int i = 0; i < 3; i++) {
        if (!rel[i] || !want[i][0]) continue;
        char path[8400];
        if (dp_path_is_absolute(rel[i]) || !r->job.dir[0]) snprintf(path, sizeof(path), "%s", rel[i]);
        else snprintf(path, sizeof(path), "%s/%s", r->job.dir, rel[i]);
        dp_err err = {0};
        dp_status st = pl_file_check_prefix(path, bytes[i], want[i], &err);
        if (st) {
            fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
            return st == DP_EFORMAT ? PL_EXIT_DATAERR : PL_EXIT_IOERR;
        }
    }
    return 0;
}

int pl_status_job(const char *job_path) {
    pl_run r;
    int rc = load(&r, job_path);
    if (!rc) rc = check_outputs(&r);
    if (!rc) {
        char mp[4400];
        uint32_t n = 0;
        dp_err err = {0};
        layout_file(&r, 0, 0, PL_FILE_MANIFEST, mp, sizeof(mp));
        if (pl_manifest_shards(mp, &n, &err) == DP_OK && n > 0) {
            status_shards(&r, n);
            if (!r.ck.results_path) { /* no unsharded run of this job: nothing more to say */
                pl_run_free(&r);
                return 0;
            }
        }
    }
    status_counts c = {0};
    r.hash_only = true; /* pending or done needs the content hash only, not the text */
    if (!rc) rc = each_doc(&r, count_status, &c);
    if (!rc) {
        if (!r.ck.results_path) printf("%s: no run yet (no checkpoint in %s)\n", job_path, r.job.state_dir);
        else
            printf("%s: %lld run%s, last one %s; results %s (%llu bytes committed)\n", job_path, (long long)r.ck.runs,
                   r.ck.runs == 1 ? "" : "s", r.ck.complete ? "complete" : "interrupted or still running",
                   r.ck.results_path, (unsigned long long)r.ck.results_bytes);
        printf("documents: %llu done (%llu ok, %llu failed), %llu pending, %llu unreadable now\n",
               (unsigned long long)c.done, (unsigned long long)pl_ledger_count(r.ledger, PL_LEDGER_OK),
               (unsigned long long)pl_ledger_count(r.ledger, PL_LEDGER_FAILED), (unsigned long long)c.pending,
               (unsigned long long)c.unreadable);
        if (c.standing > 20) printf("  ... and %llu more that failed before\n", (unsigned long long)(c.standing - 20));
        printf("records: %llu results, %llu errors\n", (unsigned long long)r.ck.records,
               (unsigned long long)r.ck.errors);
        printf("skipped by the next run (unchanged): %llu; to process: %llu\n", (unsigned long long)c.done,
               (unsigned long long)(c.pending + c.unreadable));
    }
    pl_run_free(&r);
    return rc;
}

/* ---- plan -------------------------------------------------------------------------------- */

typedef struct plan_counts {
    eng_tok_ws *ws;
    uint64_t docs, skipped, failed, chunks, multi, prompt_tokens, content_tokens;
    int32_t longest;
    uint32_t shards;
    json_t *manifest;            /* documents, when sharding */
    uint64_t *shard_docs, *shard_tokens;
} plan_counts;

static void plan_doc(pl_run *r, pl_doc *d, void *ud) {
    plan_counts *c = ud;
    c->docs++;
    uint32_t shard = 0;
    const uint64_t tokens_before = c->prompt_tokens;
    if (c->shards) {
        shard = pl_shard_of(d->u->sha, d->u->path, c->shards);
        json_array_append_new(json_object_get(c->manifest, "documents"),
                              json_pack("{s:s, s:I, s:s, s:i}", "path", d->u->path, "size", (json_int_t)d->u->size,
                                        "sha256", d->u->sha, "shard", (int)shard));
        c->shard_docs[shard]++;
    }
    plan_chunks(r, d, c);
    if (c->shards) c->shard_tokens[shard] += c->prompt_tokens - tokens_before;
}

static void plan_chunks(pl_run *r, pl_doc *d, plan_counts *c) {
    if (d->u->skipped) {
        c->skipped++;
        return;
    }
    if (d->u->err_code) {
        c->failed++;
        return;
    }
    dp_err err = {0};
    int32_t ov = 0;
    const int32_t budget = pl_content_budget(r, c->ws, &r->map_spec, d->u, &ov, &err);
    if (budget < 8) {
        c->failed++;
        return;
    }
    int32_t overlap = (int32_t)r->job.chunking.overlap;
    if (overlap >= budget / 2) overlap = budget / 2 - 1;
    pl_chunks ch = {0};
    if (pl_chunk_text(r->tok, c->ws, d->text.text, d->text.len, budget, overlap, &ch, &err) || ch.n == 0) {
        c->failed++;
    } else {
        c->chunks += ch.n;
        c->multi += ch.n > 1;
        for (size_t k = 0; k < ch.n; k++) {
            c->content_tokens += (uint64_t)ch.v[k].n_tokens;
            c->prompt_tokens += (uint64_t)(ch.v[k].n_tokens + ov);
            if (ch.v[k].n_tokens + ov > c->longest) c->longest = ch.v[k].n_tokens + ov;
        }
    }
    pl_chunks_free(&ch);
}

/* Prefill and decode rates of this model here: one 256-token prompt per slot, then 8 decode
 * steps over every slot (what a run's steady state looks like). */
static void measure(pl_run *r, double *pp, double *tg) {
    const int32_t seqs = (int32_t)r->job.model.max_sequences, n = 256 < r->n_ctx - 16 ? 256 : r->n_ctx - 16;
    int32_t *tok = malloc((size_t)n * 3 * sizeof(int32_t));
    dp_err err = {0};
    *pp = *tg = 0;
    if (!tok) return;
    int32_t *pos = tok + n, *seq = pos + n;
    const int32_t V = (int32_t)eng_model_get_info(r->model)->n_vocab;
    for (int32_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 7919u + 13u) % (uint32_t)V), pos[i] = i, seq[i] = 0;
    uint64_t t = dp_time_ns();
    eng_batch b = {n, tok, pos, seq, NULL};
    if (eng_decode(r->ctx, &b, &err)) goto out;
    *pp = n / ((double)(dp_time_ns() - t) / 1e9);
    /* decode: every slot at position n */
    for (int32_t k = 1; k < seqs; k++) eng_seq_clear(r->ctx, k);
    int32_t m = 0;
    for (int32_t k = 0; k < seqs && k < n; k++) tok[k] = 1, pos[k] = k == 0 ? n : 0, seq[k] = k, m++;
    t = dp_time_ns();
    int steps = 0;
    for (; steps < 8; steps++) {
        eng_batch d = {m, tok, pos, seq, NULL};
        if (eng_decode(r->ctx, &d, &err)) break;
        for (int32_t k = 0; k < m; k++) pos[k]++;
    }
    if (steps) *tg = (double)steps * m / ((double)(dp_time_ns() - t) / 1e9);
out:
    free(tok);
}

static int write_manifest(pl_run *r, plan_counts *c) {
    char path[4200];
    layout_file(r, 0, 0, PL_FILE_MANIFEST, path, sizeof(path));
    json_object_set_new(c->manifest, "version", json_integer(1));
    json_object_set_new(c->manifest, "shards", json_integer(c->shards));
    json_object_set_new(c->manifest, "job", json_string(r->job.file));
    char *s = json_dumps(c->manifest, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    dp_err err = {0};
    dp_status st = s ? dp_mkdir_p(r->job.state_dir, &err) : DP_ENOMEM;
    if (!st) st = pl_write_atomic(path, s, strlen(s), &err);
    free(s);
    if (st) {
        fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
        return st == DP_ENOSPC || st == DP_EIO ? PL_EXIT_IOERR : PL_EXIT_CANTCREAT;
    }
    printf("manifest: %s (%llu documents in %u shards, by content hash: adding files never moves existing ones)\n",
           path, (unsigned long long)c->docs, c->shards);
    for (uint32_t i = 0; i < c->shards; i++)
        printf("  shard %u: %llu documents, %llu prompt tokens\n", i, (unsigned long long)c->shard_docs[i],
               (unsigned long long)c->shard_tokens[i]);
    return 0;
}

int pl_plan_job(const char *job_path, bool bench, uint32_t shards) {
    pl_run r;
    int rc = load(&r, job_path);
    if (!rc && shards) {
        /* a manifest lists every document, whatever a single run did before */
        pl_ledger_free(r.ledger);
        dp_err e2 = {0};
        pl_ledger_load("", 0, NULL, &r.ledger, &e2);
    }
    dp_err err = {0};
    if (!rc && eng_model_load(r.job.model.path, &r.model, &err)) {
        fprintf(stderr, "docpipe: %s: model.path: %s\n", job_path, dp_err_msg(&err));
        rc = PL_EXIT_CONFIG;
    }
    plan_counts c = {0};
    c.shards = shards;
    if (shards) {
        c.manifest = json_pack("{s:[]}", "documents");
        c.shard_docs = calloc(shards, sizeof(uint64_t));
        c.shard_tokens = calloc(shards, sizeof(uint64_t));
        if (!c.manifest || !c.shard_docs || !c.shard_tokens) rc = PL_EXIT_SOFTWARE;
    }
    if (!rc) {
        r.tok = eng_model_get_tokenizer(r.model);
        r.chat = eng_model_chat_kind(r.model);
        r.n_ctx = (int32_t)r.job.model.context;
        r.n_ctx_train = (int32_t)eng_model_get_info(r.model)->n_ctx_train;
        r.map_spec = (pl_prompt_spec){r.chat, r.job.prompts.system, r.job.prompts.template_, r.job.generation.thinking};
        if (eng_tok_ws_new(&c.ws)) rc = PL_EXIT_SOFTWARE;
    }
    if (!rc) rc = each_doc(&r, plan_doc, &c);
    eng_tok_ws_free(c.ws);
    if (!rc && shards) rc = write_manifest(&r, &c);
    json_decref(c.manifest);
    free(c.shard_docs);
    free(c.shard_tokens);
    if (rc) {
        pl_run_free(&r);
        return rc;
    }
    const uint64_t reduce = r.job.chunking.mode == JOB_CHUNK_MAP_REDUCE ? c.multi : 0;
    const uint64_t requests = c.chunks + reduce;
    printf("%s: %llu documents: %llu to process, %llu skipped (done in an earlier run), %llu that will fail "
           "(unreadable, unsupported, too large, empty)\n", job_path, (unsigned long long)c.docs,
           (unsigned long long)(c.docs - c.skipped - c.failed), (unsigned long long)c.skipped,
           (unsigned long long)c.failed);
    printf("requests: %llu map/chunk + about %llu reduce; prompt tokens: %llu (content %llu), longest prompt %d of "
           "the %lld-token context\n", (unsigned long long)c.chunks, (unsigned long long)reduce,
           (unsigned long long)c.prompt_tokens, (unsigned long long)c.content_tokens, c.longest,
           (long long)r.job.model.context);
    const bool embed = r.job.task == JOB_TASK_EMBED; /* prompt processing only */
    const uint64_t gen_max = embed ? 0 : (uint64_t)r.job.generation.max_tokens;
    if (embed)
        printf("embedding: %llu vectors of %u dimensions, nothing generated\n", (unsigned long long)c.chunks,
               (unsigned)eng_model_get_info(r.model)->n_embd);
    else
        printf("generation: at most %llu tokens (max_tokens %lld per request)\n",
               (unsigned long long)(requests * gen_max), (long long)r.job.generation.max_tokens);
    if (bench && requests) {
        eng_context_params cp = eng_context_default_params();
        cp.n_ctx = (uint32_t)r.job.model.context;
        cp.n_seq_max = (uint32_t)r.job.model.max_sequences;
        cp.n_threads = (int)r.job.model.threads;
        cp.device = r.job.model.device;
        cp.kv_type = r.job.model.kv_type ? ENG_TYPE_Q8_0 : ENG_TYPE_F16;
        if (pl_context_open(r.model, &cp, 0, &r.ctx, &err)) {
            fprintf(stderr, "docpipe: %s\n", dp_err_msg(&err));
            pl_run_free(&r);
            return PL_EXIT_CONFIG;
        }
        double pp = 0, tg = 0;
        measure(&r, &pp, &tg);
        if (pp > 0 && tg > 0) {
            const double t_pp = (double)c.prompt_tokens / pp;
            const double t_tg = (double)(requests * gen_max) / tg;
            printf("measured here (%s, %lld sequences): prefill %.1f tok/s, decode %.1f tok/s over all sequences\n",
                   eng_context_backend_name(r.ctx), (long long)r.job.model.max_sequences, pp, tg);
            if (embed) printf("estimated time: %.0f s (%.1f h)\n", t_pp, t_pp / 3600);
            else
                printf("estimated time: %.0f s prefill + at most %.0f s generation = at most %.0f s (%.1f h); less "
                       "when answers end before max_tokens\n", t_pp, t_tg, t_pp + t_tg, (t_pp + t_tg) / 3600);
        }
    }
    pl_run_free(&r);
    return PL_EXIT_OK;
}
