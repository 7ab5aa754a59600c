/*
 * cmd_query.c - `docpipe query DB.sqlite "QUESTION" [-k N] [--hybrid] [--json] [-m MODEL]
 *               [--instruct TEXT] [-t N] [--device D]`: the chunks of an outputs.sqlite
 *               database nearest to a question.
 *
 * DESIGN: the question is embedded exactly as the job embedded chunks (the model, pooling and
 * normalization the database records; the tokenizer's own BOS/EOS), with the model the database
 * was made with: a file whose size and mtime still match the database's record is trusted,
 * another is hashed and must have the same sha256, because vectors of two models cannot be
 * compared. Every stored vector is scored with the engine's SIMD scan (eng_scorer) and the k best
 * kept (rank.c); --hybrid fuses that ranking with FTS5's BM25 ranking of the question's words by
 * reciprocal rank fusion, which finds exact names and codes that embeddings blur.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
#include "exit_codes.h"
#include "help.h"
#include "open_context.h"
#include "platform.h"
#include "rank.h"
#include "sqlite_read.h"
#include "state.h"

/* candidates each ranking gives the fusion */
#define FUSE_DEPTH 100

typedef struct hit {
    int64_t chunk_id;
    double score;
    int vec_rank, text_rank; /* 1-based, 0: not in that ranking */
    float cosine;
} hit;

/* The model the database was made with: the recorded file, or -m after checking it is the same. */
static int check_model(const char *db_path, const pl_db_meta *m, const char *given, const char **use) {
    *use = given ? given : m->model_path;
    dp_stat_info si;
    dp_err err = {0};
    if (dp_stat(*use, true, &si, &err)) {
        fprintf(stderr, "docpipe query: %s (the model %s was made with; give its path with -m)\n", dp_err_msg(&err),
                db_path);
        return PL_EXIT_CONFIG;
    }
    if (!given && si.size == m->model_size && si.mtime_ns == m->model_mtime) return PL_EXIT_OK;
    char sha[65];
    if (pl_file_sha256(*use, sha, &err)) {
        fprintf(stderr, "docpipe query: %s\n", dp_err_msg(&err));
        return PL_EXIT_CONFIG;
    }
    if (strcmp(sha, m->model_sha256)) {
        fprintf(stderr, "docpipe query: %s is not the model %s was made with (sha256 %.16s..., the database's %.16s...): "
                "vectors of two models cannot be compared\n", *use, db_path, sha, m->model_sha256);
        return PL_EXIT_CONFIG;
    }
    return PL_EXIT_OK;
}

/* The question's vector (dim floats into q). */
static int embed_question(const char *model_path, const pl_db_meta *m, const char *question, const char *instruct,
                          uint32_t threads, int device, float *q) {
    dp_err err = {0};
    eng_model *model = NULL;
    eng_context *c = NULL;
    eng_tokens ids = {0};
    int rc = PL_EXIT_OK;
    if (eng_model_load(model_path, &model, &err)) {
        fprintf(stderr, "docpipe query: %s\n", dp_err_msg(&err));
        return PL_EXIT_CONFIG;
    }
    if ((int32_t)eng_model_get_info(model)->n_embd != m->dim) {
        fprintf(stderr, "docpipe query: %s has dimension %u, the database %d\n", model_path,
                eng_model_get_info(model)->n_embd, m->dim);
        rc = PL_EXIT_CONFIG;
        goto done;
    }
    eng_pooling pooling = ENG_POOLING_LAST;
    if (m->pooling[0] && !eng_pooling_parse(m->pooling, &pooling)) pooling = ENG_POOLING_LAST;
    dp_buf text;
    dp_buf_init(&text, (size_t)1 << 24);
    if (instruct) dp_buf_printf(&text, "Instruct: %s\nQuery: ", instruct);
    dp_buf_append(&text, question, strlen(question));
    /* as the job embedded its chunks: the tokenizer's BOS/EOS, no control tokens from text */
    dp_status st = eng_tokenize(eng_model_get_tokenizer(model), NULL, (const char *)text.data, text.len, true, false,
                                &ids, &err);
    dp_buf_free(&text);
    if (st || !ids.n) {
        fprintf(stderr, "docpipe query: %s\n", st ? dp_err_msg(&err) : "the question is empty");
        rc = st ? PL_EXIT_SOFTWARE : PL_EXIT_USAGE;
        goto done;
    }
    eng_context_params cp = eng_context_default_params();
    cp.n_ctx = (uint32_t)(ids.n < 64 ? 64 : ids.n);
    cp.n_seq_max = 1;
    cp.n_ubatch = cp.n_ctx < 2048 ? cp.n_ctx : 2048;
    cp.n_threads = (int)threads;
    cp.device = (dp_device)device;
    cp.pooling = pooling;
    if (pl_context_open(model, &cp, 0, &c, &err) ||
        eng_decode_sequence(c, 0, ids.ids, (int32_t)ids.n, 0, &err) ||
        eng_get_embedding(c, 0, m->normalized, q, &err)) {
        fprintf(stderr, "docpipe query: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_SOFTWARE;
    }
done:
    eng_tokens_free(&ids);
    eng_context_free(c);
    eng_model_free(model);
    return rc;
}

static void print_hit(const hit *h, const pl_db_hit *c, size_t rank, bool hybrid) {
    json_error_t je;
    json_t *hp = json_loads(c->heading_path, 0, &je);
    printf("%zu. %s:%d-%d", rank, c->path, c->line_start, c->line_end);
    if (c->page_start) printf(" (page %d-%d)", c->page_start, c->page_end);
    printf("  score %.4f", h->score);
    if (hybrid) {
        printf(" (cosine %.4f, vector ", (double)h->cosine);
        printf(h->vec_rank ? "#%d" : "-", h->vec_rank);
        printf(", text ");
        printf(h->text_rank ? "#%d)" : "-)", h->text_rank);
    }
    printf("\n");
    if (json_array_size(hp)) {
        printf("   ");
        for (size_t i = 0; i < json_array_size(hp); i++)
            printf("%s%s", i ? " > " : "", json_string_value(json_array_get(hp, i)));
        printf("\n");
    }
    json_decref(hp);
    /* the chunk on a few lines: whitespace runs folded, at most 400 bytes (cut at a character) */
    printf("   ");
    size_t shown = 0;
    bool space = false;
    for (const unsigned char *p = (const unsigned char *)c->text; *p && shown < 400; p++) {
        if (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == '\f') {
            space = shown > 0;
            continue;
        }
        if (space) putchar(' '), shown++, space = false;
        putchar(*p);
        shown++;
        if (shown >= 400) /* finish the UTF-8 character */
            while ((p[1] & 0xC0) == 0x80) putchar(*++p);
    }
    printf("%s\n\n", shown >= 400 ? " ..." : "");
}

static json_t *hit_json(const hit *h, const pl_db_hit *c, size_t rank, bool hybrid) {
    json_error_t je;
    json_t *hp = json_loads(c->heading_path, 0, &je);
    json_t *o = json_pack("{s:I, s:f, s:f, s:s, s:I, s:i, s:i, s:o, s:s}", "rank", (json_int_t)rank, "score", h->score,
                          "cosine", (double)h->cosine, "path", c->path, "chunk_id", (json_int_t)h->chunk_id,
                          "line_start", c->line_start, "line_end", c->line_end, "heading_path",
                          hp ? hp : json_array(), "text", c->text);
    if (o && c->page_start) {
        json_object_set_new(o, "page_start", json_integer(c->page_start));
        json_object_set_new(o, "page_end", json_integer(c->page_end));
    }
    if (o && hybrid) {
        json_object_set_new(o, "vector_rank", h->vec_rank ? json_integer(h->vec_rank) : json_null());
        json_object_set_new(o, "text_rank", h->text_rank ? json_integer(h->text_rank) : json_null());
    }
    return o;
}

int pl_cmd_query(int argc, char **argv) {
    const char *db_path = NULL, *question = NULL, *model = NULL, *instruct = NULL;
    uint32_t k = 10, threads = 0;
    bool hybrid = false, as_json = false;
    int device = DP_DEVICE_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, val = true;
        if (!strcmp(a, "-k") || !strcmp(a, "--top")) ok = pl_parse_u32(a, v, 1, 1000, &k);
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--instruct")) instruct = v;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) ok = pl_parse_u32(a, v, 1, 1024, &threads);
        else if (!strcmp(a, "--device")) ok = pl_parse_device(v, &device);
        else if (!strcmp(a, "--hybrid")) hybrid = true, val = false;
        else if (!strcmp(a, "--json")) as_json = true, val = false;
        else if (a[0] == '-' && a[1]) {
            pl_unknown_option("query", a);
            return PL_EXIT_USAGE;
        } else {
            val = false;
            if (!db_path) db_path = a;
            else if (!question) question = a;
            else {
                fprintf(stderr, "docpipe query: one question at a time (quote it: \"...\")\n");
                return PL_EXIT_USAGE;
            }
        }
        if (val && !v) {
            fprintf(stderr, "docpipe query: %s needs a value\n", a);
            return PL_EXIT_USAGE;
        }
        if (!ok) return PL_EXIT_USAGE;
        if (val) i++;
    }
    if (!db_path || !question) {
        fprintf(stderr, "usage: docpipe query DB.sqlite \"QUESTION\" [-k N] [--hybrid] [--json] [-m MODEL] "
                        "[--instruct TEXT] [-t N] [--device cpu|cuda|auto]\n");
        return PL_EXIT_USAGE;
    }
    dp_err err = {0};
    pl_db_reader *rd = NULL;
    pl_db_meta meta;
    if (pl_db_reader_open(db_path, &rd, &meta, &err)) {
        fprintf(stderr, "docpipe query: %s\n", dp_err_msg(&err));
        return err.code == DP_ENOENT ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR;
    }
    int rc = PL_EXIT_OK;
    float *q = NULL, *rows = NULL, *scores = NULL;
    int64_t *ids = NULL, *text_ids = NULL;
    size_t n = 0, n_text = 0, *best = NULL;
    hit *hits = NULL;
    eng_scorer *sc = NULL;
    const char *use = NULL;
    if (strcmp(meta.task, "embed")) {
        fprintf(stderr, "docpipe query: %s was written by a task: %s job; it has no vectors (task: embed makes "
                "them)\n", db_path, meta.task);
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    if ((rc = check_model(db_path, &meta, model, &use))) goto done;
    q = malloc((size_t)meta.dim * sizeof(float));
    if (!q) {
        rc = PL_EXIT_SOFTWARE;
        goto done;
    }
    if ((rc = embed_question(use, &meta, question, instruct, threads, device, q))) goto done;
    const uint64_t t0 = dp_time_ns();
    if (pl_db_load_vectors(rd, meta.dim, &rows, &ids, &n, &err) ||
        (hybrid && pl_db_fts(rd, question, FUSE_DEPTH, &text_ids, &n_text, &err))) {
        fprintf(stderr, "docpipe query: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    const uint64_t t1 = dp_time_ns();
    const size_t depth = hybrid ? FUSE_DEPTH : k;
    scores = malloc((n ? n : 1) * sizeof(float));
    best = malloc((depth ? depth : 1) * sizeof(size_t));
    hits = calloc(depth + FUSE_DEPTH, sizeof(hit));
    if (!scores || !best || !hits || eng_scorer_new((int)threads, &sc, &err)) {
        rc = PL_EXIT_SOFTWARE;
        goto done;
    }
    eng_scorer_dot(sc, q, rows, n, meta.dim, scores);
    if (!meta.normalized) { /* cosine: the stored vectors were not normalized */
        double qq = 0;
        for (int32_t i = 0; i < meta.dim; i++) qq += (double)q[i] * q[i];
        for (size_t r = 0; r < n; r++) {
            double rr = 0;
            for (int32_t i = 0; i < meta.dim; i++) rr += (double)rows[r * (size_t)meta.dim + i] * rows[r * (size_t)meta.dim + i];
            scores[r] = rr > 0 && qq > 0 ? (float)(scores[r] / sqrt(rr * qq)) : 0.f;
        }
    }
    const size_t nb = pl_top_k(scores, n, depth, best);
    const uint64_t t2 = dp_time_ns();
    size_t n_hits = 0;
    if (!hybrid) {
        for (size_t i = 0; i < nb; i++)
            hits[n_hits++] = (hit){ids[best[i]], scores[best[i]], (int)i + 1, 0, scores[best[i]]};
    } else {
        int64_t *vec_ids = malloc((nb ? nb : 1) * sizeof(int64_t)), fused[FUSE_DEPTH * 2];
        double fs[FUSE_DEPTH * 2];
        if (!vec_ids) {
            rc = PL_EXIT_SOFTWARE;
            goto done;
        }
        for (size_t i = 0; i < nb; i++) vec_ids[i] = ids[best[i]];
        const int64_t *lists[2] = {vec_ids, text_ids};
        const size_t lens[2] = {nb, n_text};
        const size_t nf = pl_rrf(lists, lens, 2, k, fused, fs);
        for (size_t i = 0; i < nf; i++) {
            hit h = {fused[i], fs[i], 0, 0, NAN};
            for (size_t j = 0; j < nb; j++)
                if (vec_ids[j] == fused[i]) h.vec_rank = (int)j + 1, h.cosine = scores[best[j]];
            for (size_t j = 0; j < n_text; j++)
                if (text_ids[j] == fused[i]) h.text_rank = (int)j + 1;
            if (!h.vec_rank) { /* a text match beyond the vector shortlist: its cosine still means something */
                for (size_t j = 0; j < n; j++)
                    if (ids[j] == fused[i]) h.cosine = scores[j];
            }
            hits[n_hits++] = h;
        }
        free(vec_ids);
    }
    json_t *out = as_json ? json_array() : NULL;
    for (size_t i = 0; i < n_hits && !rc; i++) {
        pl_db_hit c;
        if (pl_db_chunk_get(rd, hits[i].chunk_id, &c, &err)) {
            fprintf(stderr, "docpipe query: %s\n", dp_err_msg(&err));
            rc = PL_EXIT_DATAERR;
            break;
        }
        if (out) json_array_append_new(out, hit_json(&hits[i], &c, i + 1, hybrid));
        else print_hit(&hits[i], &c, i + 1, hybrid);
        pl_db_hit_free(&c);
    }
    if (out && !rc) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:o}", "query", question, "database", db_path, "mode",
                              hybrid ? "hybrid" : "vector", "chunks", (json_int_t)n, "results", out);
        char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        json_decref(out);
    }
    if (!rc)
        fprintf(stderr, "docpipe query: %zu chunks; read in %.0f ms, scanned and ranked in %.1f ms%s\n", n,
                (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6, n_hits ? "" : "; nothing found");
done:
    eng_scorer_free(sc);
    free(q);
    free(rows);
    free(ids);
    free(text_ids);
    free(scores);
    free(best);
    free(hits);
    pl_db_meta_free(&meta);
    pl_db_reader_close(rd);
    return rc;
}
