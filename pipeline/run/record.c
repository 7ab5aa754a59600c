/*
 * record.c - the JSON lines docpipe run writes (docs/output.md): OpenAI batch
 * results with our provenance in "meta", and error records of the same shape.
 *
 * Model output and document paths are untrusted: text is repaired to valid UTF-8 (U+FFFD),
 * and jansson escapes everything JSON needs (control characters, quotes, U+2028).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "run_internal.h"
#include "utf8.h"

const char *pl_chunk_stage(const pl_run *r) {
    return r->job.task == JOB_TASK_EMBED ? "embed" : r->job.chunking.mode == JOB_CHUNK_PER_CHUNK ? "chunk" : "map";
}

void pl_custom_id(const pl_run *r, const pl_unit *u, const pl_result *res, char out[64]) {
    if (!res) snprintf(out, 64, "%s-%s-error", u->key, u->err_stage ? u->err_stage : "doc");
    else if (res->level > 0) snprintf(out, 64, "%s-r%d.%d-reduce", u->key, res->level, res->index);
    else snprintf(out, 64, "%s-c%d-%s", u->key, res->index, pl_chunk_stage(r));
}

static json_t *text_value(const char *s, size_t n) {
    uint8_t *fixed = malloc(3 * n + 1);
    if (!fixed) return json_string("");
    size_t fl = dp_utf8_repair((const uint8_t *)(s ? s : ""), s ? n : 0, fixed, NULL);
    json_t *v = json_stringn((const char *)fixed, fl);
    free(fixed);
    return v ? v : json_string("");
}

/* The bytes of s as base64. */
static json_t *base64_value(const char *s) {
    const size_t n = strlen(s);
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    if (!o) return json_string("");
    pl_base64((const uint8_t *)s, n, o);
    json_t *j = json_string(o);
    free(o);
    return j;
}

json_t *pl_span_headings(const pl_span *sp) {
    json_t *hp = json_array();
    const char *h = sp->headings;
    for (int32_t i = 0; i < sp->n_headings; i++, h += strlen(h) + 1) json_array_append_new(hp, text_value(h, strlen(h)));
    return hp;
}

static json_t *meta(const pl_run *r, const pl_unit *u, const pl_result *res) {
    const bool per_chunk = r->job.chunking.mode == JOB_CHUNK_PER_CHUNK;
    const bool embed = r->job.task == JOB_TASK_EMBED;
    json_t *m = json_object();
    json_object_set_new(m, "source_path", text_value(u->path, strlen(u->path)));
    if (u->raw_path) json_object_set_new(m, "source_path_b64", base64_value(u->raw_path)); /* the name's bytes */
    json_object_set_new(m, "doc_sha256", json_string(strncmp(u->sha, "stat:", 5) ? u->sha : "")); /* not read */
    if (res) {
        json_object_set_new(m, "chunk_index", json_integer(res->index));
        json_object_set_new(m, "chunk_count", json_integer(res->count));
        json_object_set_new(m, "stage", json_string(res->level ? "reduce" : pl_chunk_stage(r)));
        if (res->level) json_object_set_new(m, "reduce_level", json_integer(res->level));
        if (!per_chunk) json_object_set_new(m, "final", json_boolean(res->final));
        /* a paged document (PDF): the pages this record read; a reduce step read them all */
        const int32_t pf = res->level ? 1 : res->page_first, pl = res->level ? u->n_pages : res->page_last;
        if (u->n_pages && pf > 0) {
            json_object_set_new(m, "page_start", json_integer(pf));
            json_object_set_new(m, "page_end", json_integer(pl));
        }
        if (u->n_pages) json_object_set_new(m, "pages", json_integer(u->n_pages));
        const pl_span *sp = &res->span;
        if (!res->level && sp->text) { /* the chunk, so the record stands on its own */
            json_object_set_new(m, "byte_start", json_integer((json_int_t)sp->byte_start));
            json_object_set_new(m, "byte_end", json_integer((json_int_t)sp->byte_end));
            json_object_set_new(m, "line_start", json_integer(sp->line_start));
            json_object_set_new(m, "line_end", json_integer(sp->line_end));
            json_object_set_new(m, "heading_path", pl_span_headings(sp));
            json_object_set_new(m, "chunk_tokens", json_integer(sp->n_tokens));
            json_object_set_new(m, "text", text_value(sp->text, sp->len));
        }
    } else {
        json_object_set_new(m, "stage", json_string(u->err_stage ? u->err_stage : "read"));
    }
    if (!embed) json_object_set_new(m, "template_sha256", json_string(r->fp.templates));
    json_object_set_new(m, "model_sha256", json_string(r->fp.model));
    if (embed) json_object_set_new(m, "pooling", json_string(eng_pooling_name(r->pooling)));
    else json_object_set_new(m, "seed", json_integer(r->job.generation.seed));
    if (u->format) json_object_set_new(m, "input_format", json_string(u->format));
    if (u->n_replaced) json_object_set_new(m, "replaced_invalid_utf8", json_integer((json_int_t)u->n_replaced));
    if (res && !res->err_code) {
        json_t *t = json_object();
        json_object_set_new(t, "queue", json_real((double)(int64_t)(res->queue_ms * 10) / 10));
        json_object_set_new(t, "prefill", json_real((double)(int64_t)(res->prefill_ms * 10) / 10));
        if (!embed) json_object_set_new(t, "decode", json_real((double)(int64_t)(res->decode_ms * 10) / 10));
        json_object_set_new(m, "timing_ms", t);
    }
    return m;
}

static char *dump(json_t *o) {
    /* 9 significant digits: every float32 of a vector reads back exactly */
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    return s;
}

static json_t *error_obj(const char *code, const char *msg) {
    json_t *e = json_object();
    json_object_set_new(e, "code", json_string(code));
    json_object_set_new(e, "message", text_value(msg ? msg : "", msg ? strlen(msg) : 0));
    return e;
}

char *pl_record_line(const pl_run *r, const pl_unit *u, const pl_result *res) {
    char cid[64], id[80];
    pl_custom_id(r, u, res, cid);
    snprintf(id, sizeof(id), "batch_req_%s", cid);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "custom_id", json_string(cid));
    if (res->err_code) {
        json_object_set_new(o, "response", json_null());
        json_object_set_new(o, "error", error_obj(res->err_code, res->err_msg));
    } else if (r->job.task == JOB_TASK_EMBED) {
        json_object_set_new(o, "response",
                            pl_embedding_response(cid, r->model_name, r->sys_fingerprint, res->vec, 1, (size_t)res->dim,
                                                  false, res->n_prompt, dp_time_wall()));
        json_object_set_new(o, "error", json_null());
    } else {
        const pl_completion c = {.custom_id = cid,
                                 .model = r->model_name,
                                 .fingerprint = r->sys_fingerprint,
                                 .chat = true,
                                 .text = res->text,
                                 .len = res->len,
                                 .finish = res->finish,
                                 .n_prompt = res->n_prompt,
                                 .n_gen = res->n_gen,
                                 .created = dp_time_wall(),
                                 .thinking = r->job.generation.thinking};
        json_t *resp = pl_completion_response(&c);
        json_object_set_new(o, "response", resp);
        json_object_set_new(o, "error", json_null());
    }
    json_object_set_new(o, "meta", meta(r, u, res));
    return dump(o);
}

char *pl_record_doc_error(const pl_run *r, const pl_unit *u) {
    char cid[64], id[80];
    pl_custom_id(r, u, NULL, cid);
    snprintf(id, sizeof(id), "batch_req_%s", cid);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "custom_id", json_string(cid));
    json_object_set_new(o, "response", json_null());
    json_object_set_new(o, "error", error_obj(u->err_code, u->err_msg));
    json_object_set_new(o, "meta", meta(r, u, NULL));
    return dump(o);
}
