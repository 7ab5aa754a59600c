/*
 * cmd_batch.c - `docpipe batch -m MODEL -i requests.jsonl -o results.jsonl [--seqs N] [-c N]
 *               [-t N] [--device D] [--think]`: OpenAI-batch requests through the engine with
 * continuous batching (the way `vllm run-batch` reads and writes them).
 *
 * Input lines: {"custom_id", "method": "POST", "url": "/v1/chat/completions" (body.messages) or
 * "/v1/completions" (body.prompt), "body": {max_tokens, temperature, top_p, top_k, min_p, seed,
 * stop}}. Output lines, in completion order, one per request: {"id", "custom_id",
 * "response": {"status_code": 200, "body": {... "choices": [...], "usage": {...}}}, "error":
 * null}, or a response-less line with "error": {"code", "message"} for a malformed request
 * (naming its line number) or one whose prompt cannot fit the context
 * (context_length_exceeded). The others still run.
 *
 * DESIGN (scheduler): --seqs slots; a free slot admits the next request; every step builds one
 * batch with one token for each decoding slot and the next prompt piece of each prefilling
 * slot. Prompt pieces are cut at fixed 256-token offsets of the request's own prompt, never by
 * what else is in the step, so a request computes exactly the same numbers alone or among 63
 * others: its output does not depend on batch composition or admission order.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "open_context.h"
#include "exit_codes.h"
#include "batch_request.h"
#include "completion.h"
#include "platform.h"
#include "scheduler.h"
#include "sha256.h"
#include "utf8.h"


#define PIECE PL_SCHED_PIECE

typedef struct req {
    pl_batch_req b;           /* the line as read (custom_id, line, sampling, stop) */
    eng_tokens prompt;
    eng_tokens *inputs;       /* /v1/embeddings: each input's ids */
    float *vecs;              /* [n_inputs][n_embd] */
    size_t next, n_done;      /* inputs handed to a sequence, and embedded */
    int32_t n_tokens;
    bool thinking;            /* a chat request rendered with thinking on: reasoning_content apart */
    char *err_code, *err_msg; /* set when the request is refused */
} req;

static void req_free(req *r) {
    if (!r) return;
    for (size_t i = 0; r->inputs && i < r->b.n_inputs; i++) eng_tokens_free(&r->inputs[i]);
    free(r->inputs);
    free(r->vecs);
    pl_batch_req_free(&r->b);
    eng_tokens_free(&r->prompt);
    free(r->err_code);
    free(r->err_msg);
    free(r);
}

static req *refuse(req *r, const char *code, const char *msg) {
    r->err_code = strdup(code);
    r->err_msg = strdup(msg);
    return r;
}

/* Parses one request line into token ids; refusals are returned as requests with err_code. */
static req *parse_request(const eng_model *m, const char *line, size_t len, int lineno, int32_t n_ctx, bool think) {
    req *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    dp_err err = {0};
    if (pl_batch_req_parse(line, len, lineno, n_ctx, &r->b, &err)) return refuse(r, "invalid_request", err.msg);
    const eng_tokenizer *tok = eng_model_get_tokenizer(m);
    dp_status st;
    if (r->b.embed) { /* tokenized as llama-server's /v1/embeddings: add_special, special parsing on */
        const size_t E = eng_model_get_info(m)->n_embd;
        r->inputs = calloc(r->b.n_inputs, sizeof(*r->inputs));
        r->vecs = malloc(r->b.n_inputs * E * sizeof(float));
        if (!r->inputs || !r->vecs) return refuse(r, "server_error", "out of memory");
        for (size_t i = 0; i < r->b.n_inputs; i++) {
            if (eng_tokenize(tok, NULL, r->b.inputs[i], strlen(r->b.inputs[i]), true, true, &r->inputs[i], &err)) {
                dp_err_prefix(&err, "line %d: body.input[%zu]", lineno, i);
                return refuse(r, "invalid_request", err.msg);
            }
            char msg[160];
            if (r->inputs[i].n > (size_t)n_ctx) {
                snprintf(msg, sizeof(msg), "line %d: body.input[%zu] has %zu tokens; the context holds %d", lineno, i,
                         r->inputs[i].n, (int)n_ctx);
                return refuse(r, "context_length_exceeded", msg);
            }
            r->n_tokens += (int32_t)r->inputs[i].n;
        }
        return r;
    }
    if (r->b.chat) {
        /* only the chat frame is read for special tokens: "<|im_end|>" typed into a message
         * stays text, as in docpipe run */
        dp_buf b;
        dp_buf_init(&b, (size_t)1 << 28);
        size_t (*spans)[2] = calloc(r->b.n_msgs ? r->b.n_msgs : 1, sizeof(*spans));
        /* the request's own enable_thinking wins over --think */
        const bool t = r->b.think >= 0 ? r->b.think == 1 : think;
        r->thinking = t;
        st = spans ? eng_chat_render_spans(eng_model_chat_kind(m), r->b.msgs, r->b.n_msgs, true, t, &b, spans, &err)
                   : dp_err_set(&err, DP_ENOMEM, "out of memory");
        const char *d = (const char *)b.data;
        size_t at = 0;
        for (size_t i = 0; !st && i <= r->b.n_msgs; i++) {
            const size_t frame_end = i < r->b.n_msgs ? spans[i][0] : b.len;
            if (frame_end > at) st = eng_tokenize(tok, NULL, d + at, frame_end - at, at == 0, true, &r->prompt, &err);
            if (!st && i < r->b.n_msgs && spans[i][1])
                st = eng_tokenize(tok, NULL, d + spans[i][0], spans[i][1], false, false, &r->prompt, &err);
            if (i < r->b.n_msgs) at = spans[i][0] + spans[i][1];
        }
        free(spans);
        dp_buf_free(&b);
    } else {
        st = eng_tokenize(tok, NULL, r->b.prompt, strlen(r->b.prompt), true, true, &r->prompt, &err);
    }
    if (st) {
        dp_err_prefix(&err, "line %d", lineno);
        return refuse(r, "invalid_request", err.msg);
    }
    char msg[128];
    if (r->prompt.n == 0 || (int64_t)r->prompt.n + 1 > n_ctx) {
        snprintf(msg, sizeof(msg), "line %d: the prompt has %zu tokens; it cannot fit the context of %d", lineno,
                 r->prompt.n, (int)n_ctx);
        return refuse(r, "context_length_exceeded", msg);
    }
    if ((int64_t)r->prompt.n + r->b.max_tokens > n_ctx) r->b.max_tokens = n_ctx - (int32_t)r->prompt.n;
    return r;
}

/* One result line, flushed (a line is whole in the file once the call returns); 0 or the
 * errno of a failed write, so a full disk stops the run at once instead of after every request
 * has been computed for nothing. */
static int write_line(FILE *out, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    if (!s) return ENOMEM;
    errno = 0;
    const bool ok = fputs(s, out) >= 0 && fputc('\n', out) != EOF && fflush(out) == 0;
    free(s);
    return ok ? 0 : errno ? errno : EIO;
}

/* The grammars of a batch's requests, compiled once per distinct text (requests repeat a schema). */
typedef struct gcache {
    char **text;
    eng_grammar **g;
    size_t n, cap;
} gcache;

static eng_grammar *gcache_get(gcache *gc, const eng_model *m, const char *gbnf, dp_err *err) {
    for (size_t i = 0; i < gc->n; i++)
        if (!strcmp(gc->text[i], gbnf)) return gc->g[i];
    if (gc->n == gc->cap) {
        size_t cap = gc->cap ? gc->cap * 2 : 8;
        char **t = realloc(gc->text, cap * sizeof(*t));
        if (t) gc->text = t;
        eng_grammar **g = t ? realloc(gc->g, cap * sizeof(*g)) : NULL;
        if (!g) return dp_err_set(err, DP_ENOMEM, "out of memory"), NULL;
        gc->g = g, gc->cap = cap;
    }
    eng_grammar *g = NULL;
    if (eng_grammar_compile(eng_model_get_tokenizer(m), gbnf, strlen(gbnf), &g, err)) return NULL;
    if (!(gc->text[gc->n] = strdup(gbnf))) {
        eng_grammar_free(g);
        return dp_err_set(err, DP_ENOMEM, "out of memory"), NULL;
    }
    gc->g[gc->n++] = g;
    return g;
}

static void gcache_free(gcache *gc) {
    for (size_t i = 0; i < gc->n; i++) free(gc->text[i]), eng_grammar_free(gc->g[i]);
    free(gc->text);
    free(gc->g);
}

typedef struct batch_run {
    FILE *out;
    FILE *errs;            /* failed requests, as OpenAI's error file (may be out itself) */
    const char *model;
    char fingerprint[20]; /* system_fingerprint of every result */
    char id_prefix[24];   /* batch_req_ ids: unique to this batch, numbered within it */
    long n_id, n_ok, n_engine_err;
    int werr; /* the errno of the first failed write, 0 while none failed */
    const char *werr_file;
    const char *out_path, *errs_path;
} batch_run;

/* "batch_req_" + this batch's prefix + the line's number in the output: unique across batches
 * (as OpenAI's ids are), ordered within one. */
static void batch_id(batch_run *br, char out[64]) { snprintf(out, 64, "batch_req_%s%06ld", br->id_prefix, ++br->n_id); }

static int write_error(batch_run *br, const req *r) {
    json_t *o = json_object();
    char id[64];
    batch_id(br, id);
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "custom_id", json_string(r->b.custom_id));
    json_object_set_new(o, "response", json_null());
    json_t *e = json_object();
    json_object_set_new(e, "code", json_string(r->err_code));
    json_object_set_new(e, "message", json_string(r->err_msg));
    json_object_set_new(e, "line", json_integer(r->b.line));
    json_object_set_new(o, "error", e);
    return write_line(br->errs, o);
}

static void drop_req(void *r) { req_free(r); }

/* The next request line of data from *pos (trailing CR and blanks cut; *len 0 for a blank
 * line), counting lines in *lineno. NULL at the end of data. */
static const char *next_line(const char *data, size_t n, size_t *pos, int *lineno, size_t *len) {
    if (*pos >= n) return NULL;
    const char *ls = data + *pos, *nl = memchr(ls, '\n', n - *pos);
    size_t ll = nl ? (size_t)(nl - ls) : n - *pos;
    *pos += ll + (nl ? 1 : 0);
    (*lineno)++;
    while (ll && (ls[ll - 1] == '\r' || ls[ll - 1] == ' ')) ll--;
    *len = ll;
    return ls;
}

/* The prompt head the first two valid requests share (a common system message), computed once
 * and copied into every request that starts with it, in whole pieces, so each request's numbers
 * are the same as without sharing (and for any --seqs or order). DOCPIPE_NO_PREFIX=1 turns it
 * off. */
static dp_status shared_head(const eng_model *m, pl_sched *sch, const char *data, size_t len, int32_t n_ctx,
                             bool think, dp_err *err) {
    req *first[2] = {NULL, NULL};
    int n = 0, lineno = 0;
    size_t pos = 0, ll = 0;
    for (const char *ls; n < 2 && (ls = next_line(data, len, &pos, &lineno, &ll));) {
        if (!ll) continue;
        req *r = parse_request(m, ls, ll, lineno, n_ctx, think);
        if (r && !r->err_code) first[n++] = r;
        else req_free(r);
    }
    dp_status st = DP_OK;
    int32_t shared = 0;
    if (n == 2) st = pl_sched_share_head(sch, &first[0]->prompt, &first[1]->prompt, 0, n_ctx, &shared, err);
    req_free(first[0]);
    req_free(first[1]);
    return st;
}


/* A successful request's line: {id, custom_id, response, error: null}; takes resp, frees r. */
static void write_response(batch_run *br, req *r, json_t *resp) {
    char id[64];
    batch_id(br, id);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "custom_id", json_string(r->b.custom_id));
    json_object_set_new(o, "response", resp);
    json_object_set_new(o, "error", json_null());
    const int e = write_line(br->out, o);
    if (e && !br->werr) br->werr = e, br->werr_file = br->out_path;
    br->n_ok += !e;
    req_free(r);
}

static void write_result(void *cb, const pl_gen_out *g) {
    batch_run *br = cb;
    req *r = g->user;
    if (g->error) { /* the engine refused the step's results */
        free(r->err_code);
        free(r->err_msg);
        r->err_code = strdup("engine_error");
        r->err_msg = strdup(g->error);
        const int e = write_error(br, r);
        if (e && !br->werr) br->werr = e, br->werr_file = br->errs_path;
        br->n_engine_err++;
        req_free(r);
        return;
    }
    pl_completion c = {r->b.custom_id, r->b.model ? r->b.model : br->model, br->fingerprint, r->b.chat, g->text,
                       g->len, g->finish, g->n_prompt, g->n_gen, dp_time_wall(), r->thinking};
    write_response(br, r, pl_completion_response(&c));
}

/* The endpoint of the batch: the first line that reads as a request decides, as a Batch API batch
 * has one endpoint; true for /v1/embeddings. */
static bool embeddings_batch(const char *data, size_t len, int32_t n_ctx) {
    size_t pos = 0, ll = 0;
    int lineno = 0;
    for (const char *ls; (ls = next_line(data, len, &pos, &lineno, &ll));) {
        if (!ll) continue;
        pl_batch_req b;
        dp_err err = {0};
        const bool ok = pl_batch_req_parse(ls, ll, lineno, n_ctx, &b, &err) == DP_OK, embed = b.embed;
        pl_batch_req_free(&b);
        if (ok) return embed;
    }
    return false;
}

/* The request counts of a batch, for the summary and the exit code. */
typedef struct batch_counts {
    long n_err, n_skipped, n_failed_before;
} batch_counts;

/* --resume: whether line lineno (request r) was written by the run this one resumes (then r is
 * freed and counted as skipped), and the custom_id rule: one request per custom_id. */
static bool skip_or_check(req *r, int lineno, json_t *done, json_t *seen, batch_counts *k) {
    char lk[32];
    snprintf(lk, sizeof(lk), "#%d", lineno);
    if (json_object_get(done, lk) || (*r->b.custom_id && !r->err_code && json_object_get(done, r->b.custom_id))) {
        /* written by the run this one resumes; its custom_id still counts as used */
        if (*r->b.custom_id && !json_object_get(seen, r->b.custom_id))
            json_object_set_new(seen, r->b.custom_id, json_integer(lineno));
        k->n_failed_before += json_object_get(done, lk) != NULL;
        req_free(r);
        k->n_skipped++;
        return true;
    }
    /* results are matched to requests by custom_id, so it must be unique (as the Batch API
     * requires): a later line with a used one is refused */
    json_t *first = *r->b.custom_id ? json_object_get(seen, r->b.custom_id) : NULL;
    if (first && !r->err_code) {
        char msg[256];
        snprintf(msg, sizeof(msg), "line %d: custom_id \"%.64s\" is already used on line %d", lineno, r->b.custom_id,
                 (int)json_integer_value(first));
        refuse(r, "invalid_request", msg);
    } else if (!first && *r->b.custom_id) {
        json_object_set_new(seen, r->b.custom_id, json_integer(lineno));
    }
    return false;
}

/* An /v1/embeddings batch: every request's inputs, each a sequence of the embedding context,
 * decoded up to `seqs` at a time in one call (a request's inputs may span calls); a request's
 * response is written once all its inputs are embedded. A vector does not depend on what it was
 * decoded with (the engine's batch invariance). DP_OK, or a failure in err (br->werr set when a
 * write failed). */
static dp_status embed_batch(eng_model *m, eng_context *c, batch_run *br, const char *data, size_t len,
                             int32_t n_ctx, int32_t seqs, json_t *done, json_t *seen, batch_counts *k, dp_err *err) {
    const size_t E = eng_model_get_info(m)->n_embd;
    req **fly = calloc((size_t)seqs + 1, sizeof(*fly)), *cur = NULL;
    struct slot {
        req *r;
        size_t i;
    } *slot = calloc((size_t)seqs, sizeof(*slot));
    int32_t *tok = NULL;
    size_t tok_cap = 0, n_fly = 0, pos = 0, ll = 0;
    int lineno = 0;
    bool eof = false;
    dp_status st = fly && slot ? DP_OK : dp_err_set(err, DP_ENOMEM, "out of memory");
    while (!st && !br->werr) {
        size_t ns = 0, ntok = 0;
        while (ns < (size_t)seqs && !br->werr) {
            if (!cur) {
                const char *ls = eof ? NULL : next_line(data, len, &pos, &lineno, &ll);
                if (!ls) {
                    eof = true;
                    break;
                }
                if (!ll) continue;
                req *r = parse_request(m, ls, ll, lineno, n_ctx, false);
                if (!r) {
                    st = dp_err_set(err, DP_ENOMEM, "out of memory");
                    break;
                }
                if (skip_or_check(r, lineno, done, seen, k)) continue;
                if (!r->err_code && !r->b.embed) {
                    char msg[160];
                    snprintf(msg, sizeof(msg), "line %d: this batch is /v1/embeddings (its first request); a batch has "
                             "one endpoint", lineno);
                    refuse(r, "invalid_request", msg);
                }
                if (r->err_code) {
                    const int e = write_error(br, r);
                    if (e && !br->werr) br->werr = e, br->werr_file = br->errs_path;
                    k->n_err++;
                    req_free(r);
                    continue;
                }
                cur = fly[n_fly++] = r;
            }
            slot[ns++] = (struct slot){cur, cur->next};
            ntok += cur->inputs[cur->next].n;
            if (++cur->next == cur->b.n_inputs) cur = NULL;
        }
        if (st || br->werr || !ns) break;
        if (3 * ntok > tok_cap) {
            int32_t *t = realloc(tok, 3 * ntok * sizeof(int32_t));
            if (!t) {
                st = dp_err_set(err, DP_ENOMEM, "out of memory");
                break;
            }
            tok = t, tok_cap = 3 * ntok;
        }
        int32_t *p = tok + ntok, *s = p + ntok, n = 0;
        for (size_t j = 0; j < ns; j++) {
            const eng_tokens *in = &slot[j].r->inputs[slot[j].i];
            eng_seq_clear(c, (int32_t)j);
            for (size_t t = 0; t < in->n; t++, n++) tok[n] = in->ids[t], p[n] = (int32_t)t, s[n] = (int32_t)j;
        }
        const eng_batch b = {n, tok, p, s, NULL};
        if ((st = eng_decode(c, &b, err))) break;
        for (size_t j = 0; j < ns && !st; j++) {
            st = eng_get_embedding(c, (int32_t)j, true, slot[j].r->vecs + slot[j].i * E, err);
            slot[j].r->n_done++;
        }
        /* write the requests whose inputs are all embedded, in input order */
        size_t w = 0;
        for (size_t j = 0; j < n_fly && !st; j++) {
            req *r = fly[j];
            if (r->n_done < r->b.n_inputs) {
                fly[w++] = r;
                continue;
            }
            write_response(br, r,
                           pl_embedding_response(r->b.custom_id, r->b.model ? r->b.model : br->model, br->fingerprint,
                                                 r->vecs, r->b.n_inputs, E, r->b.base64, r->n_tokens, dp_time_wall()));
        }
        n_fly = w;
    }
    for (size_t j = 0; j < n_fly; j++) req_free(fly[j]);
    free(fly);
    free(slot);
    free(tok);
    return st;
}

/* All of standard input (for -i -), at most 2 GiB. */
static dp_status read_stdin(char **data, size_t *len, dp_err *err) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, stdin)) > 0;) {
        n += got;
        if (n == cap) {
            char *g = cap < ((size_t)1 << 31) ? realloc(buf, 2 * cap + 1) : NULL;
            if (!g) {
                free(buf);
                return dp_err_set(err, DP_ENOMEM, "standard input: more than 2 GiB, or out of memory");
            }
            buf = g, cap *= 2;
        }
    }
    if (!buf) return dp_err_set(err, DP_ENOMEM, "out of memory");
    if (ferror(stdin)) {
        free(buf);
        return dp_err_set(err, DP_EIO, "standard input: read error");
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return DP_OK;
}

/* --resume: what an earlier run of the batch wrote to path. A torn last line (the run died in a
 * write) is cut off; every whole line must be a record. Results are remembered by custom_id,
 * errors by their input line ("#N"), so neither is computed or written again; each result's
 * system_fingerprint (the model and docpipe version that wrote it) goes into fps with the first
 * place it appears, "path:line". */
static int load_done(const char *path, json_t *done, json_t *fps, long *n_done) {
    if (!dp_path_exists(path)) return 0;
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    if (dp_file_read_all(path, (size_t)1 << 31, &data, &len, &err)) {
        fprintf(stderr, "docpipe batch: --resume: %s\n", dp_err_msg(&err));
        return PL_EXIT_NOINPUT;
    }
    size_t whole = len;
    while (whole && data[whole - 1] != '\n') whole--;
    int rc = 0, lineno = 0;
    for (size_t p = 0; p < whole && !rc;) {
        const char *ls = data + p, *nl = memchr(ls, '\n', whole - p);
        lineno++;
        json_t *o = json_loadb(ls, (size_t)(nl - ls), 0, NULL);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        json_t *e = json_object_get(o, "error");
        if (!o || !cid) {
            fprintf(stderr, "docpipe batch: --resume: %s:%d is not a batch record; it is not this batch's output\n",
                    path, lineno);
            rc = PL_EXIT_DATAERR;
        } else if (json_is_object(e)) {
            char key[32];
            snprintf(key, sizeof(key), "#%lld", (long long)json_integer_value(json_object_get(e, "line")));
            json_object_set_new(done, key, json_true());
            (*n_done)++;
        } else {
            json_object_set_new(done, cid, json_true());
            (*n_done)++;
            const char *fp = json_string_value(
                json_object_get(json_object_get(json_object_get(o, "response"), "body"), "system_fingerprint"));
            if (fp && !json_object_get(fps, fp)) {
                char at[4200];
                snprintf(at, sizeof(at), "%s:%d", path, lineno);
                json_object_set_new(fps, fp, json_string(at));
            }
        }
        json_decref(o);
        p = (size_t)(nl - data) + 1;
    }
    free(data);
    if (!rc && whole < len) { /* the torn line goes; the rest stays as written */
        dp_file f = {.handle = -1};
        if (dp_file_open(&f, path, DP_FILE_WRITE, &err) || dp_file_truncate(&f, whole, &err) ||
            dp_file_datasync(&f, &err)) {
            fprintf(stderr, "docpipe batch: --resume: %s\n", dp_err_msg(&err));
            rc = PL_EXIT_IOERR;
        }
        dp_file_close(&f, NULL);
    }
    return rc;
}

int pl_cmd_batch(int argc, char **argv) {
    const char *model = NULL, *in = NULL, *outp = NULL, *errp = NULL;
    uint32_t seqs = 8, n_ctx = 4096, threads = 0;
    uint64_t mem = 0;       /* 0 = what the machine has available */
    uint32_t kv_blocks = 0; /* 0 = from the memory budget */
    int device = DP_DEVICE_AUTO;
    bool think = false, resume = false;
    pl_kv_opts kv = PL_KV_OPTS_INIT;
    bool kv_bad = false;
    int kv_type = ENG_TYPE_F16;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) ok = (model = v) != NULL;
        else if (!strcmp(o, "-i") || !strcmp(o, "--input")) ok = (in = v) != NULL;
        else if (!strcmp(o, "-o") || !strcmp(o, "--output")) ok = (outp = v) != NULL;
        else if (!strcmp(o, "--errors")) ok = (errp = v) != NULL;
        else if (!strcmp(o, "--seqs")) ok = pl_parse_u32(o, v, 1, 4096, &seqs);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) ok = pl_parse_u32(o, v, 64, 1u << 24, &n_ctx);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) ok = pl_parse_u32(o, v, 1, 1024, &threads);
        else if (!strcmp(o, "--device")) ok = pl_parse_device(v, &device);
        else if (pl_kv_option(&kv, o, v, &kv_bad)) ok = !kv_bad;
        else if (!strcmp(o, "--mem")) ok = pl_parse_size(o, v, &mem);
        else if (!strcmp(o, "--kv-blocks")) ok = pl_parse_u32(o, v, 1, 1u << 24, &kv_blocks);
        else if (!strcmp(o, "--think")) think = true, takes = false;
        else if (!strcmp(o, "--resume")) resume = true, takes = false;
        else {
            pl_unknown_option("batch", o);
            goto usage;
        }
        if (!ok) return PL_EXIT_USAGE;
        if (takes) i++;
    }
    if (!model || !in || !outp) goto usage;
    if (!pl_kv_type(&kv, &kv_type)) return PL_EXIT_USAGE;
    dp_err err = {0};
    char *data = NULL;
    size_t len = 0;
    if (!strcmp(in, "-") ? read_stdin(&data, &len, &err) : dp_file_read_all(in, (size_t)1 << 31, &data, &len, &err)) {
        fprintf(stderr, "docpipe batch: %s\n", dp_err_msg(&err));
        return PL_EXIT_NOINPUT;
    }
    /* failed requests go to their own file, as OpenAI's batches do: --errors, else beside the
     * output (results.jsonl -> results.errors.jsonl); with -o - they follow the results */
    char errs_default[4200];
    if (!errp) {
        if (!strcmp(outp, "-")) {
            errp = "-";
        } else {
            const size_t n = strlen(outp);
            const bool jl = n > 6 && !strcmp(outp + n - 6, ".jsonl");
            snprintf(errs_default, sizeof(errs_default), "%.*s.errors.jsonl", (int)(jl ? n - 6 : n), outp);
            errp = errs_default;
        }
    }
    json_t *done = json_object(); /* --resume: custom_ids with a result, "#LINE" of errors */
    json_t *fps = json_object();  /* --resume: the results' system_fingerprints, where first seen */
    long n_done = 0;
    if (resume) {
        int r1 = 0;
        if (!strcmp(outp, "-")) {
            fprintf(stderr, "docpipe batch: --resume needs the output file (-o FILE), not standard output\n");
            r1 = PL_EXIT_USAGE;
        }
        if (!r1) r1 = load_done(outp, done, fps, &n_done);
        if (!r1 && strcmp(errp, outp) && strcmp(errp, "-")) r1 = load_done(errp, done, fps, &n_done);
        if (r1) {
            json_decref(done);
            json_decref(fps);
            free(data);
            return r1;
        }
    }
    eng_model *m = NULL;
    eng_context *c = NULL;
    req *waiting = NULL; /* the next request, when the KV cache has no room for it yet */
    gcache gc = {0};     /* the requests' grammars */
    if (eng_model_load(model, &m, &err)) {
        fprintf(stderr, "docpipe batch: %s\n", dp_err_msg(&err));
        free(data);
        json_decref(done);
        json_decref(fps);
        return PL_EXIT_CONFIG;
    }
    /* the file's name, however its path was spelled ("C:\\m\\x.gguf" on Windows too): it is in
     * the fingerprint, which a resume compares */
    char mpath[4096];
    snprintf(mpath, sizeof(mpath), "%s", model);
    dp_path_to_slashes(mpath);
    const char *mname = strrchr(mpath, '/') ? strrchr(mpath, '/') + 1 : mpath;
    char fingerprint[20];
    {
        /* the fingerprint from what identifies the model without hashing gigabytes: its name,
         * size and type */
        dp_stat_info si = {0};
        dp_stat(model, true, &si, NULL);
        char ident[4200];
        snprintf(ident, sizeof(ident), "%s %llu %u", mname, (unsigned long long)si.size,
                 eng_model_get_info(m)->file_type);
        pl_system_fingerprint(ident, fingerprint);
    }
    /* a resumed batch is one batch: results another model (or another docpipe) wrote are not
     * appended to, so the file never mixes the answers of two */
    const char *fk;
    json_t *fat;
    json_object_foreach(fps, fk, fat) {
        if (strcmp(fk, fingerprint)) {
            fprintf(stderr,
                    "docpipe batch: --resume: %s was written with system_fingerprint %s, another model file or "
                    "docpipe version than this run's (%s); resume with the model that began the batch, or write "
                    "to a new file\n",
                    json_string_value(fat), fk, fingerprint);
            eng_model_free(m);
            free(data);
            json_decref(done);
            json_decref(fps);
            return PL_EXIT_DATAERR;
        }
    }
    json_decref(fps);
    /* a batch has one endpoint: an /v1/embeddings batch runs in an embedding context (pooling
     * from the model file, else the last token's), every other on the scheduler */
    const bool embed = embeddings_batch(data, len, (int32_t)n_ctx);
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_seq_max = seqs + (embed ? 0 : 1); /* + the shared prompt head */
    if (embed) cp.pooling = eng_model_pooling(m, ENG_POOLING_LAST);
    cp.n_threads = (int)threads;
    cp.device = (dp_device)device;
    cp.kv_type = kv_type;
    cp.n_ubatch = seqs * PIECE < 4096 ? seqs * PIECE : 4096;
    if (cp.n_ubatch < PIECE) cp.n_ubatch = PIECE;
    cp.n_kv_blocks = kv_blocks; /* 0: sized from the budget */
    if (pl_context_open(m, &cp, mem, &c, &err)) {
        fprintf(stderr, "docpipe batch: %s\n", dp_err_msg(&err));
        eng_model_free(m);
        free(data);
        json_decref(done);
        return PL_EXIT_CONFIG;
    }
    FILE *out = !strcmp(outp, "-") ? stdout : dp_fopen(outp, resume ? "a" : "w");
    FILE *errs = !strcmp(errp, outp) || !strcmp(errp, "-") ? out : dp_fopen(errp, resume ? "a" : "w");
    if (!out || !errs) {
        fprintf(stderr, "docpipe batch: cannot create %s\n", !out ? outp : errp);
        if (out && out != stdout) fclose(out);
        eng_context_free(c);
        eng_model_free(m);
        free(data);
        json_decref(done);
        return PL_EXIT_CANTCREAT;
    }
    batch_run br = {.out = out, .errs = errs, .model = mname, .out_path = outp, .errs_path = errp};
    memcpy(br.fingerprint, fingerprint, sizeof(br.fingerprint));
    {
        /* the id prefix from this process and moment */
        char seed[128];
        snprintf(seed, sizeof(seed), "%d %llu %s", dp_getpid(), (unsigned long long)dp_time_ns(), in);
        uint8_t d[32];
        char hex[65];
        dp_sha256_digest(seed, strlen(seed), d);
        dp_sha256_hex(d, hex);
        snprintf(br.id_prefix, sizeof(br.id_prefix), "%.12s_", hex);
    }
    pl_sched *sch = NULL;
    json_t *seen = json_object(); /* custom_id -> the line that used it first */
    batch_counts k = {0, 0, 0};
    size_t pos = 0;
    int lineno = 0;
    int rc = PL_EXIT_OK;
    uint64_t t0 = dp_time_ns();
    if (embed) {
        if (embed_batch(m, c, &br, data, len, (int32_t)n_ctx, (int32_t)seqs, done, seen, &k, &err)) goto fail;
        if (br.werr) goto write_failed;
    } else {
    if (pl_sched_new(c, m, (int32_t)seqs, (int32_t)cp.n_ubatch, &sch, &err)) goto fail;
    if (shared_head(m, sch, data, len, (int32_t)n_ctx, think, &err)) goto fail;
    for (;;) {
        /* admit: fill free slots with the next runnable requests, in input order */
        size_t ll = 0;
        const char *ls;
        while (pl_sched_free_slots(sch)) {
            req *r = waiting;
            waiting = NULL;
            if (!r) {
                if (!(ls = next_line(data, len, &pos, &lineno, &ll))) break;
                if (!ll || !(r = parse_request(m, ls, ll, lineno, (int32_t)n_ctx, think))) continue;
                if (skip_or_check(r, lineno, done, seen, &k)) continue;
                if (!r->err_code && r->b.embed) {
                    char msg[160];
                    snprintf(msg, sizeof(msg), "line %d: this batch is for completions (its first request); a batch "
                             "has one endpoint", lineno);
                    refuse(r, "invalid_request", msg);
                }
            }
            eng_grammar *gram = NULL;
            if (!r->err_code && r->b.gbnf && !(gram = gcache_get(&gc, m, r->b.gbnf, &err))) {
                dp_err_prefix(&err, "line %d: body.response_format", lineno);
                refuse(r, "invalid_request", err.msg);
            }
            if (!r->err_code) {
                pl_gen_req g = {r->prompt.ids, (int32_t)r->prompt.n, r->b.max_tokens, r->b.sp,
                                (const char *const *)r->b.stop, r->b.n_stop, r, gram, gram && r->thinking};
                dp_status a = pl_sched_admit(sch, &g, &err);
                if (a == DP_EBUSY) { /* wait for finished requests to free KV blocks */
                    waiting = r;
                    break;
                }
                if (a == DP_ERANGE) {
                    r->err_code = strdup("context_length_exceeded");
                    r->err_msg = strdup(dp_err_msg(&err));
                } else if (a) {
                    req_free(r);
                    goto fail;
                } else {
                    continue;
                }
            }
            const int e = write_error(&br, r);
            if (e && !br.werr) br.werr = e, br.werr_file = br.errs_path;
            k.n_err++;
            req_free(r);
            if (br.werr) break;
        }
        if (br.werr) goto write_failed;
        dp_status st = pl_sched_step(sch, write_result, &br, &err);
        if (br.werr) goto write_failed;
        if (st == DP_EOF && !waiting) break;
        if (st) goto fail;
    }
    }
    k.n_err += br.n_engine_err;
    if (embed)
        fprintf(stderr, "batch: %ld results, %ld errors in %.1f s (%s, embeddings, pooling %s, %u sequences at once)\n",
                br.n_ok, k.n_err, (double)(dp_time_ns() - t0) / 1e9, eng_context_backend_name(c),
                eng_pooling_name(cp.pooling), seqs);
    else
        fprintf(stderr, "batch: %ld results, %ld errors in %.1f s (%s, %u slots; %llu prompt tokens from the shared "
                "head)\n", br.n_ok, k.n_err, (double)(dp_time_ns() - t0) / 1e9, eng_context_backend_name(c), seqs,
                (unsigned long long)pl_sched_prefix_saved(sch));
    if (resume) fprintf(stderr, "batch: --resume: %ld requests already written were skipped\n", k.n_skipped);
    /* a resumed batch ends as the uninterrupted one would: 3 while any request failed */
    if (k.n_err || k.n_failed_before) rc = PL_EXIT_PARTIAL;
    goto done;
fail:
    fprintf(stderr, "docpipe batch: %s\n", dp_err_msg(&err));
    rc = PL_EXIT_CONFIG;
    goto done;
write_failed:
    fprintf(stderr, "docpipe batch: cannot write %s: %s; stopped\n", br.werr_file ? br.werr_file : outp,
            strerror(br.werr));
    rc = PL_EXIT_IOERR;
done:
    req_free(waiting);
    json_decref(seen);
    json_decref(done);
    if (sch) pl_sched_cancel_all(sch, drop_req);
    pl_sched_free(sch);
    gcache_free(&gc); /* after the scheduler: its matchers point into the grammars */
    if (errs != out && fclose(errs) != 0) rc = PL_EXIT_IOERR;
    if (out == stdout ? fflush(out) != 0 : fclose(out) != 0) rc = PL_EXIT_IOERR;
    eng_context_free(c);
    eng_model_free(m);
    free(data);
    return rc;
usage:
    fprintf(stderr, "usage: docpipe batch -m MODEL.gguf -i requests.jsonl|- -o results.jsonl|- [--errors FILE] [--seqs N] "
                    "[-c N] [-t N] [--mem SIZE | --kv-blocks N] [--resume]\n");
    return PL_EXIT_USAGE;
}
