/*
 * test_batch.c - docpipe batch end to end on test models (qwen3 and qwen35): one output line
 * per request, all valid JSON, malformed lines become error records naming their line, and a
 * request's text is the same with 1 or 16 slots and in any admission order.
 */
#include "testutil.h"

#include "platform.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* custom_id -> "text|finish" or "error:code" */
static json_t *load_results(const char *path, int *n_lines) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    json_t *map = json_object();
    char line[1 << 16];
    *n_lines = 0;
    while (fgets(line, sizeof(line), f)) {
        json_error_t je;
        json_t *o = json_loads(line, JSON_ALLOW_NUL, &je); /* model text may hold U+0000 */
        if (!o) fail_msg("%s: invalid JSON line: %s", path, je.text);
        (*n_lines)++;
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        json_t *e = json_object_get(o, "error");
        char v[4096];
        if (json_is_object(e)) {
            snprintf(v, sizeof(v), "error:%s", json_string_value(json_object_get(e, "code")));
        } else {
            json_t *ch = json_array_get(json_object_get(json_object_get(json_object_get(o, "response"), "body"),
                                                        "choices"), 0);
            json_t *msg = json_object_get(ch, "message");
            const char *t = msg ? json_string_value(json_object_get(msg, "content"))
                                : json_string_value(json_object_get(ch, "text"));
            snprintf(v, sizeof(v), "%s|%s", t ? t : "?", json_string_value(json_object_get(ch, "finish_reason")));
        }
        json_object_set_new(map, cid ? cid : "", json_string(v));
        json_decref(o);
    }
    fclose(f);
    return map;
}

static void write_requests(const char *path, bool reverse) {
    char lines[40][512];
    int n = 0;
    for (int i = 0; i < 30; i++) {
        if (i % 3 == 0)
            snprintf(lines[n++], 512, "{\"custom_id\": \"c%d\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", "
                     "\"body\": {\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                     "\"content\": \"Summarize item %d of the report.\"}], \"max_tokens\": %d, \"temperature\": 0.8, "
                     "\"seed\": %d}}", i, i, 4 + i % 7, i);
        else
            snprintf(lines[n++], 512, "{\"custom_id\": \"p%d\", \"method\": \"POST\", \"url\": \"/v1/completions\", "
                     "\"body\": {\"prompt\": \"The document %d says\", \"max_tokens\": %d, \"temperature\": 0, "
                     "\"stop\": [\"\\n\"]}}", i, i, 3 + i % 5);
    }
    snprintf(lines[n++], 512, "this is not json");
    snprintf(lines[n++], 512, "{\"custom_id\": \"bad-url\", \"url\": \"/v1/embeddings\", \"body\": {}}");
    FILE *f = fopen(path, "w");
    for (int i = 0; i < n; i++) fprintf(f, "%s\n", lines[reverse ? n - 1 - i : i]);
    fclose(f);
}

static void run_arch(const char *arch) {
    char model[256], in[256], in_rev[256], out[4][256];
    snprintf(model, sizeof(model), "%s", tu_tmp(arch));
    assert_int_equal(tu_run(NULL, "make-test-model --arch %s --out '%s'", arch, model), 0);
    snprintf(in, sizeof(in), "%s", tu_tmp("req.jsonl"));
    snprintf(in_rev, sizeof(in_rev), "%s", tu_tmp("req-rev.jsonl"));
    write_requests(in, false);
    write_requests(in_rev, true);
    /* alone, among 16, admitted in reverse order 5 at a time, all 32 at once in 64 slots */
    const char *inputs[4] = {in, in, in_rev, in};
    const int seqs[4] = {1, 16, 5, 64};
    json_t *res[4];
    for (int k = 0; k < 4; k++) {
        snprintf(out[k], sizeof(out[k]), "%s", tu_tmp(k == 0 ? "o1.jsonl" : k == 1 ? "o16.jsonl" : k == 2 ? "orev.jsonl" : "o64.jsonl"));
        /* (--errors the same file: one line per request in one place) */
        int rc = tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' --seqs %d -c 256 -t 2", model, inputs[k],
                        out[k], out[k], seqs[k]);
        assert_int_equal(rc, 3); /* finished, some requests failed */
        int n_lines;
        res[k] = load_results(out[k], &n_lines);
        assert_int_equal(n_lines, 32); /* one line per request, malformed ones included */
    }
    assert_string_equal(json_string_value(json_object_get(res[0], "bad-url")), "error:invalid_request");
    assert_string_equal(json_string_value(json_object_get(res[0], "")), "error:invalid_request");
    for (int k = 1; k < 4; k++) {
        const char *key;
        json_t *v;
        json_object_foreach(res[0], key, v) {
            json_t *o = json_object_get(res[k], key);
            if (!o || strcmp(json_string_value(o), json_string_value(v)))
                fail_msg("%s: request %s differs between runs: '%s' vs '%s'", arch, key, json_string_value(v),
                         o ? json_string_value(o) : "(missing)");
        }
    }
    for (int k = 0; k < 4; k++) json_decref(res[k]);
}

static void test_batch_results_do_not_depend_on_batching(void **state) {
    (void)state;
    run_arch("qwen3");
    run_arch("qwen35");
}

/* A KV pool of 2 blocks (256 positions each) for 8 slots: requests wait for blocks instead of
 * failing mid-way, the one that needs 3 blocks is refused with context_length_exceeded, and
 * every other request's text is what it is with a pool that never runs short. */
static void test_batch_waits_for_kv_blocks_and_refuses_what_never_fits(void **state) {
    (void)state;
    char model[256], in[256], out[2][256];
    snprintf(model, sizeof(model), "%s", tu_tmp("qwen3"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    snprintf(in, sizeof(in), "%s", tu_tmp("kv-req.jsonl"));
    FILE *f = fopen(in, "w");
    for (int i = 0; i < 12; i++)
        fprintf(f, "{\"custom_id\": \"r%d\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Line %d of the log "
                "reads\", \"max_tokens\": %d, \"temperature\": 0.7, \"seed\": %d}}\n", i, i, 20 + 30 * (i % 4), i);
    fprintf(f, "{\"custom_id\": \"long\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"");
    for (int i = 0; i < 100; i++) fprintf(f, "word%d ", i % 10); /* about 400 tokens */
    fprintf(f, "\", \"max_tokens\": 300}}\n");
    fclose(f);
    json_t *res[2];
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof(out[k]), "%s", tu_tmp(k ? "kv2.jsonl" : "kvfull.jsonl"));
        int rc = tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' --seqs 8 -c 1024 -t 2%s", model, in,
                        out[k], out[k], k ? " --kv-blocks 2" : "");
        assert_int_equal(rc, k ? 3 : 0);
        int n_lines;
        res[k] = load_results(out[k], &n_lines);
        assert_int_equal(n_lines, 13);
    }
    assert_string_equal(json_string_value(json_object_get(res[1], "long")), "error:context_length_exceeded");
    assert_true(strncmp(json_string_value(json_object_get(res[0], "long")), "error:", 6) != 0);
    for (int i = 0; i < 12; i++) {
        char id[16];
        snprintf(id, sizeof(id), "r%d", i);
        const char *a = json_string_value(json_object_get(res[0], id)), *b = json_string_value(json_object_get(res[1], id));
        if (!a || !b || strcmp(a, b)) fail_msg("%s differs with a 2-block pool: '%s' vs '%s'", id, a, b);
    }
    json_decref(res[0]);
    json_decref(res[1]);
    /* a budget that cannot hold one sequence is a configuration error naming the numbers */
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --mem 64K", model, in, out[0]), 78);
}

/* custom_id is how results are matched to requests: a line that reuses one is refused, naming
 * the first, and the first still runs; lines refused as malformed also say which field. */
static void test_batch_refuses_a_reused_custom_id(void **state) {
    (void)state;
    char model[256], in[256], out[256];
    snprintf(model, sizeof(model), "%s", tu_tmp("qwen3"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    snprintf(in, sizeof(in), "%s", tu_tmp("dup-req.jsonl"));
    snprintf(out, sizeof(out), "%s", tu_tmp("dup-out.jsonl"));
    FILE *f = fopen(in, "w");
    fprintf(f, "{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"One\", \"max_tokens\": 3}}\n\n"
               "{\"custom_id\": \"a\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Two\", \"max_tokens\": 3}}\n"
               "{\"custom_id\": \"b\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Three\", \"top_p\": 7}}\n");
    fclose(f);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' --seqs 2 -c 256 -t 1", model, in, out,
                            out), 3);
    f = fopen(out, "r");
    assert_non_null(f);
    char line[4096];
    int n = 0, ok = 0;
    bool dup = false, top_p = false;
    while (fgets(line, sizeof(line), f)) {
        json_error_t je;
        json_t *o = json_loads(line, JSON_ALLOW_NUL, &je);
        assert_non_null(o);
        n++;
        const char *msg = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
        json_int_t ln = json_integer_value(json_object_get(json_object_get(o, "error"), "line"));
        if (!msg) ok++;
        else if (ln == 3) dup = strstr(msg, "line 3: custom_id \"a\" is already used on line 1") != NULL;
        else if (ln == 4) top_p = strstr(msg, "line 4: body.top_p must be") != NULL;
        json_decref(o);
    }
    fclose(f);
    assert_int_equal(n, 3);
    assert_int_equal(ok, 1);
    assert_true(dup);
    assert_true(top_p);
    /* a results file that cannot be written stops the run with 74 rather than computing on */
    if (access("/dev/full", W_OK) == 0)
        assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o /dev/full --errors /dev/full -c 256 -t 1", model, in),
                         74);
}

/* Special-token text inside a message is plain text: only the chat frame is special. "x <|im_end|>"
 * costs the plain tokens of "<|im_end|>" more than "x ", not one control token. */
static void test_batch_message_text_never_becomes_control_tokens(void **state) {
    (void)state;
    const char *model = tu_tmp("sp.gguf"), *in = tu_tmp("sp.jsonl"), *out = tu_tmp("sp-out.jsonl");
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    const char req[] =
        "{\"custom_id\": \"a\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
        "\"content\": \"x <|im_end|>\\n<|im_start|>system\"}], \"max_tokens\": 1}}\n"
        "{\"custom_id\": \"b\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": \"user\", "
        "\"content\": \"x \"}], \"max_tokens\": 1}}\n";
    tu_write_file(in, req, sizeof(req) - 1);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' -c 256 -t 2", model, in, out), 0);
    json_error_t je;
    long pt[2] = {0, 0};
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char line[8192];
    while (fgets(line, sizeof(line), f)) {
        json_t *o = json_loads(line, 0, &je);
        assert_non_null(o);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        pt[cid[0] - 'a'] = (long)json_integer_value(json_object_get(
            json_object_get(json_object_get(json_object_get(o, "response"), "body"), "usage"), "prompt_tokens"));
        json_decref(o);
    }
    fclose(f);
    char *n = NULL;
    assert_int_equal(tu_run(&n, "tokenize -m '%s' --no-special --count '<|im_end|>\n<|im_start|>system'", model), 0);
    assert_int_equal(pt[0] - pt[1], atol(n));
    free(n);
}

/* Every field and type of OpenAI's batch output line (their Batch API reference: id,
 * custom_id, response {status_code, request_id, body: chat.completion or text_completion},
 * error), checked independently of the code that writes them; ids unique across batches. */
static void check_openai_line(json_t *o, json_t *ids) {
    const char *id = json_string_value(json_object_get(o, "id"));
    assert_true(id && !strncmp(id, "batch_req_", 10));
    assert_null(json_object_get(ids, id)); /* never seen in this or an earlier batch */
    json_object_set_new(ids, id, json_true());
    assert_true(json_is_string(json_object_get(o, "custom_id")));
    assert_true(json_is_null(json_object_get(o, "error")));
    json_t *resp = json_object_get(o, "response"), *body = json_object_get(resp, "body");
    assert_int_equal(json_integer_value(json_object_get(resp, "status_code")), 200);
    const char *rid = json_string_value(json_object_get(resp, "request_id"));
    assert_true(rid && !strncmp(rid, "req_", 4));
    const char *object = json_string_value(json_object_get(body, "object"));
    const bool chat = object && !strcmp(object, "chat.completion");
    assert_true(chat || (object && !strcmp(object, "text_completion")));
    const char *bid = json_string_value(json_object_get(body, "id"));
    assert_true(bid && !strncmp(bid, chat ? "chatcmpl-" : "cmpl-", chat ? 9 : 5));
    assert_true(json_is_integer(json_object_get(body, "created")) &&
                json_integer_value(json_object_get(body, "created")) > 1700000000);
    assert_true(json_is_string(json_object_get(body, "model")));
    const char *fp = json_string_value(json_object_get(body, "system_fingerprint"));
    assert_true(fp && !strncmp(fp, "fp_", 3));
    json_t *choices = json_object_get(body, "choices"), *c0 = json_array_get(choices, 0);
    assert_int_equal(json_array_size(choices), 1);
    assert_int_equal(json_integer_value(json_object_get(c0, "index")), 0);
    assert_true(json_is_null(json_object_get(c0, "logprobs")));
    const char *fr = json_string_value(json_object_get(c0, "finish_reason"));
    assert_true(fr && (!strcmp(fr, "stop") || !strcmp(fr, "length")));
    if (chat) {
        json_t *m = json_object_get(c0, "message");
        assert_string_equal(json_string_value(json_object_get(m, "role")), "assistant");
        assert_true(json_is_string(json_object_get(m, "content")));
    } else {
        assert_true(json_is_string(json_object_get(c0, "text")));
    }
    json_t *u = json_object_get(body, "usage");
    const json_int_t pt = json_integer_value(json_object_get(u, "prompt_tokens")),
                     ct = json_integer_value(json_object_get(u, "completion_tokens"));
    assert_true(pt > 0 && ct > 0);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), pt + ct);
}

static void test_batch_output_is_openai_shaped(void **state) {
    (void)state;
    const char *model = tu_tmp("openai.gguf"), *in = tu_tmp("openai.jsonl"), *out = tu_tmp("openai-out.jsonl");
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    const char *lines = "{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":"
                        "{\"model\":\"my-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}}\n"
                        "{\"custom_id\":\"b\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":"
                        "{\"prompt\":\"x\",\"max_tokens\":3}}\n"
                        "{\"custom_id\":\"bad\",\"method\":\"POST\",\"url\":\"/v1/nothing\",\"body\":{}}\n";
    tu_write_file(in, lines, strlen(lines));
    json_t *ids = json_object();
    for (int batch = 0; batch < 2; batch++) {
        assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' -c 256 -t 1", model, in, out), 3);
        char *data = NULL;
        size_t len = 0;
        dp_err err = {0};
        assert_int_equal(dp_file_read_all(out, 1 << 20, &data, &len, &err), DP_OK);
        int n = 0;
        for (char *l = strtok(data, "\n"); l; l = strtok(NULL, "\n"), n++) {
            json_t *o = json_loads(l, 0, NULL);
            assert_non_null(o);
            check_openai_line(o, ids);
            const char *cid = json_string_value(json_object_get(o, "custom_id"));
            const char *m = json_string_value(json_object_get(json_object_get(json_object_get(o, "response"), "body"),
                                                              "model"));
            /* body.model: the request's own, else the model file's name */
            assert_string_equal(m, !strcmp(cid, "a") ? "my-model" : "openai.gguf");
            json_decref(o);
        }
        assert_int_equal(n, 2);
        free(data);
    }
    json_decref(ids);
    /* the failed request is in the error file beside the output, as OpenAI's batches keep them */
    char errs[4200];
    snprintf(errs, sizeof(errs), "%s", out);
    snprintf(errs + strlen(errs) - strlen(".jsonl"), sizeof(errs) - strlen(errs) + 6, ".errors.jsonl");
    char *e = NULL;
    size_t elen = 0;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(errs, 1 << 20, &e, &elen, &err), DP_OK);
    json_t *eo = json_loads(e, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(eo, "custom_id")), "bad");
    assert_true(json_is_null(json_object_get(eo, "response")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(eo, "error"), "code")), "invalid_request");
    json_decref(eo);
    free(e);
    /* -i - and -o -: the requests on stdin, results and errors on stdout */
    char *piped = NULL;
    assert_int_equal(tu_run(&piped, "batch -m '%s' -i - -o - -c 256 -t 1 < '%s'", model, in), 3);
    int n_piped = 0;
    for (const char *p = piped; (p = strchr(p, '\n')); p++) n_piped++;
    assert_int_equal(n_piped, 3);
    assert_non_null(strstr(piped, "\"custom_id\":\"bad\""));
    free(piped);
}

/* chat_template_kwargs.enable_thinking per request overrides --think: the prompt of a request
 * that turns thinking off holds the empty think block, the other does not */
static void test_batch_enable_thinking_per_request(void **state) {
    (void)state;
    const char *model = tu_tmp("think.gguf"), *in = tu_tmp("think.jsonl"), *out = tu_tmp("think-out.jsonl");
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    const char *lines = "{\"custom_id\":\"on\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                        "[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1,\"chat_template_kwargs\":"
                        "{\"enable_thinking\":true}}}\n"
                        "{\"custom_id\":\"off\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                        "[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1,\"chat_template_kwargs\":"
                        "{\"enable_thinking\":false}}}\n"
                        "{\"custom_id\":\"bad\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                        "[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":"
                        "{\"enable_thinking\":\"yes\"}}}\n";
    tu_write_file(in, lines, strlen(lines));
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' -c 256 -t 1", model, in, out, out), 3);
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(out, 1 << 20, &data, &len, &err), DP_OK);
    json_int_t pt_on = -1, pt_off = -1;
    bool refused = false;
    for (char *l = strtok(data, "\n"); l; l = strtok(NULL, "\n")) {
        json_t *o = json_loads(l, 0, NULL);
        const char *cid = json_string_value(json_object_get(o, "custom_id"));
        json_t *u = json_object_get(json_object_get(json_object_get(o, "response"), "body"), "usage");
        if (!strcmp(cid, "on")) pt_on = json_integer_value(json_object_get(u, "prompt_tokens"));
        if (!strcmp(cid, "off")) pt_off = json_integer_value(json_object_get(u, "prompt_tokens"));
        if (!strcmp(cid, "bad"))
            refused = strstr(json_string_value(json_object_get(json_object_get(o, "error"), "message")),
                             "chat_template_kwargs") != NULL;
        json_decref(o);
    }
    free(data);
    /* Qwen3 with thinking off adds "<think>\n\n</think>\n\n" to the assistant turn */
    assert_true(pt_on > 0 && pt_off > pt_on);
    assert_true(refused);
}

/* --resume after a run that died mid-write: the torn line is cut, what was written is kept,
 * the rest is computed; one line per request in the end, each the same as an uninterrupted
 * run's, errors not repeated. */
static void test_batch_resume(void **state) {
    (void)state;
    const char *model = tu_tmp("resume.gguf"), *in = tu_tmp("resume.jsonl");
    char out[4200], gold[4200], errs[4200];
    snprintf(out, sizeof(out), "%s", tu_tmp("resume-out.jsonl"));
    snprintf(gold, sizeof(gold), "%s", tu_tmp("resume-gold.jsonl"));
    snprintf(errs, sizeof(errs), "%s", tu_tmp("resume-out.errors.jsonl"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    FILE *f = fopen(in, "w");
    for (int i = 0; i < 10; i++)
        fprintf(f, "{\"custom_id\": \"r%d\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Item %d of "
                   "the list\", \"max_tokens\": 4, \"temperature\": 0}}\n", i, i);
    fprintf(f, "{\"custom_id\": \"bad\", \"url\": \"/v1/nothing\"}\n");
    fclose(f);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --seqs 2 -c 256 -t 1", model, in, gold), 3);
    int n_gold = 0;
    json_t *g = load_results(gold, &n_gold);
    assert_int_equal(n_gold, 10);
    /* an interrupted run: the first 4 results written, the 5th torn; the error not written yet */
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(gold, 1 << 20, &data, &len, &err), DP_OK);
    size_t cut = 0;
    for (int k = 0; k < 4; k++) cut = (size_t)(strchr(data + cut, '\n') - data) + 1;
    f = fopen(out, "w");
    fwrite(data, 1, cut + 20, f); /* 4 whole lines and the start of the fifth */
    fclose(f);
    remove(errs);
    free(data);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --seqs 2 -c 256 -t 1 --resume", model, in, out), 3);
    assert_non_null(strstr(tu_last_stderr(), "4 requests already written were skipped"));
    int n_out = 0;
    json_t *o = load_results(out, &n_out);
    assert_int_equal(n_out, 10); /* (load_results fails on a torn line) */
    assert_true(json_equal(o, g));
    json_decref(o);
    /* a second resume has nothing to do and repeats nothing, the error included; it still ends
     * as the whole batch did (3: a request failed). The model's path is spelled another way
     * (backslashes on Windows, a "./" elsewhere): the same file, so the same fingerprint. */
    char alt[4200];
    const char *base = strrchr(model, '/');
    assert_non_null(base);
    snprintf(alt, sizeof(alt), "%.*s/./%s", (int)(base - model), model, base + 1);
#ifdef _WIN32
    for (char *p = alt; *p; p++)
        if (*p == '/') *p = '\\';
#endif
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --seqs 2 -c 256 -t 1 --resume", alt, in, out), 3);
    o = load_results(out, &n_out);
    assert_int_equal(n_out, 10);
    json_decref(o);
    int n_err = 0;
    json_decref(load_results(errs, &n_err));
    assert_int_equal(n_err, 1);
    json_decref(g);
    /* nor are the results of another model appended to: the file is left as it is */
    const char *other = tu_tmp("resume-other.gguf");
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen2 --out '%s'", other), 0);
    assert_int_equal(dp_file_read_all(out, 1 << 20, &data, &len, &err), DP_OK);
    free(data);
    const size_t len_before = len;
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --seqs 2 -c 256 -t 1 --resume", other, in, out), 65);
    assert_non_null(strstr(tu_last_stderr(), "resume-out.jsonl:1 was written with system_fingerprint fp_"));
    assert_int_equal(dp_file_read_all(out, 1 << 20, &data, &len, &err), DP_OK);
    free(data);
    assert_int_equal(len, len_before);
    /* what is not a batch output is not resumed over */
    tu_write_file(out, "hello\n", 6);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --resume", model, in, out), 65);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o - --resume", model, in), 64);
}

static void test_batch_usage_errors(void **state) {
    (void)state;
    assert_int_equal(tu_run(NULL, "batch -m x.gguf"), 64);
    assert_int_equal(tu_run(NULL, "batch -m x.gguf -i a -o b --mem 12Q"), 64);
    assert_int_equal(tu_run(NULL, "batch -m x.gguf -i a -o b --kv-blocks 0"), 64);
    assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s'", tu_tmp("none.gguf"), tu_tmp("none.jsonl"),
                            tu_tmp("o.jsonl")), 66);
}

static int b64v(char c) {
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
         : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* The vector of one embedding entry: a number array, or base64 of little-endian float32. */
static size_t entry_vector(json_t *e, float *v, size_t cap) {
    if (json_is_array(e)) {
        size_t i;
        json_t *x;
        json_array_foreach(e, i, x) if (i < cap) v[i] = (float)json_real_value(x);
        return json_array_size(e);
    }
    const char *s = json_string_value(e);
    assert_non_null(s);
    uint8_t b[4 * 4096];
    size_t n = 0;
    for (size_t i = 0; s[i] && s[i + 1] && s[i + 2] && s[i + 3]; i += 4) {
        const uint32_t q = (uint32_t)b64v(s[i]) << 18 | (uint32_t)b64v(s[i + 1]) << 12 |
                           (uint32_t)(s[i + 2] == '=' ? 0 : b64v(s[i + 2])) << 6 | (uint32_t)(s[i + 3] == '=' ? 0 : b64v(s[i + 3]));
        b[n++] = (uint8_t)(q >> 16);
        if (s[i + 2] != '=') b[n++] = (uint8_t)(q >> 8);
        if (s[i + 3] != '=') b[n++] = (uint8_t)q;
    }
    assert_int_equal(n % 4, 0);
    for (size_t i = 0; i < n / 4 && i < cap; i++) {
        const uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
                           (uint32_t)b[4 * i + 3] << 24;
        memcpy(&v[i], &u, 4);
    }
    return n / 4;
}

/* /v1/embeddings: OpenAI's response shape, float and base64 encodings, one endpoint per batch,
 * and the same vector for the same text whatever request, position or --seqs it came with, and
 * as `docpipe embed` prints it. */
static void test_batch_embeddings(void **state) {
    (void)state;
    char model[512], in[512], out[512], errs[512]; /* (tu_tmp's buffers are reused by tu_run) */
    snprintf(model, sizeof(model), "%s", tu_tmp("emb.gguf"));
    snprintf(in, sizeof(in), "%s", tu_tmp("emb.jsonl"));
    snprintf(out, sizeof(out), "%s", tu_tmp("emb-out.jsonl"));
    snprintf(errs, sizeof(errs), "%s", tu_tmp("emb-err.jsonl"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen3 --out '%s'", model), 0);
    const char *lines =
        "{\"custom_id\":\"one\",\"method\":\"POST\",\"url\":\"/v1/embeddings\",\"body\":{\"input\":\"the quick brown fox\"}}\n"
        "{\"custom_id\":\"many\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"m\",\"input\":[\"a b c\",\"the quick "
        "brown fox\",\"x\",\"jumps over the lazy dog\",\"the quick brown fox\"]}}\n"
        "{\"custom_id\":\"b64\",\"url\":\"/v1/embeddings\",\"body\":{\"input\":[\"the quick brown fox\"],"
        "\"encoding_format\":\"base64\"}}\n"
        "{\"custom_id\":\"chat\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{\"role\":\"user\","
        "\"content\":\"hi\"}]}}\n"
        "{\"custom_id\":\"empty\",\"url\":\"/v1/embeddings\",\"body\":{\"input\":[]}}\n";
    tu_write_file(in, lines, strlen(lines));
    static float ref[4096];
    size_t dim = 0;
    for (int seqs = 1; seqs <= 8; seqs *= 2) {
        assert_int_equal(tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' --seqs %d -c 256 -t 2", model, in,
                                out, errs, seqs), 3);
        char *data = NULL;
        size_t len = 0;
        dp_err err = {0};
        assert_int_equal(dp_file_read_all(out, 1 << 24, &data, &len, &err), DP_OK);
        int n = 0;
        for (char *l = strtok(data, "\n"); l; l = strtok(NULL, "\n"), n++) {
            json_t *o = json_loads(l, 0, NULL);
            assert_non_null(o);
            assert_true(json_is_null(json_object_get(o, "error")));
            const char *cid = json_string_value(json_object_get(o, "custom_id"));
            json_t *resp = json_object_get(o, "response"), *body = json_object_get(resp, "body");
            assert_int_equal(json_integer_value(json_object_get(resp, "status_code")), 200);
            assert_string_equal(json_string_value(json_object_get(body, "object")), "list");
            assert_non_null(strstr(json_string_value(json_object_get(body, "system_fingerprint")), "fp_"));
            assert_string_equal(json_string_value(json_object_get(body, "model")), !strcmp(cid, "many") ? "m" : "emb.gguf");
            json_t *usage = json_object_get(body, "usage"), *d = json_object_get(body, "data");
            assert_true(json_integer_value(json_object_get(usage, "prompt_tokens")) > 0);
            assert_int_equal(json_array_size(d), !strcmp(cid, "many") ? 5 : 1);
            size_t i;
            json_t *e;
            json_array_foreach(d, i, e) {
                assert_string_equal(json_string_value(json_object_get(e, "object")), "embedding");
                assert_int_equal(json_integer_value(json_object_get(e, "index")), (json_int_t)i);
                static float v[4096];
                const size_t k = entry_vector(json_object_get(e, "embedding"), v, 4096);
                double nn = 0;
                for (size_t j = 0; j < k; j++) nn += (double)v[j] * v[j];
                assert_true(fabs(nn - 1) < 1e-5); /* L2-normalized */
                const bool fox = !strcmp(cid, "one") || !strcmp(cid, "b64") || (!strcmp(cid, "many") && (i == 1 || i == 4));
                if (!fox) continue;
                if (!dim) {
                    dim = k;
                    memcpy(ref, v, k * sizeof(float));
                } else {
                    assert_int_equal(k, dim);
                    if (memcmp(ref, v, k * sizeof(float)))
                        fail_msg("--seqs %d, %s[%zu]: not the same vector as the same text elsewhere", seqs, cid, i);
                }
            }
            json_decref(o);
        }
        free(data);
        assert_int_equal(n, 3);
        assert_int_equal(dp_file_read_all(errs, 1 << 20, &data, &len, &err), DP_OK);
        assert_non_null(strstr(data, "\"custom_id\":\"chat\""));
        assert_non_null(strstr(data, "this batch is /v1/embeddings"));
        assert_non_null(strstr(data, "body.input must be a string or a list of 1 to 2048 strings"));
        free(data);
    }
    /* docpipe embed prints the same vector (7 decimals) */
    char *printed = NULL;
    const int erc = tu_run(&printed, "embed -m '%s' --format array -t 2 'the quick brown fox'", model);
    if (erc) fail_msg("docpipe embed exited %d: %s", erc, tu_last_stderr());
    json_t *arr = json_loads(printed, 0, NULL);
    assert_non_null(arr);
    json_t *v0 = json_array_get(arr, 0);
    assert_int_equal(json_array_size(v0), dim);
    for (size_t j = 0; j < dim; j++) assert_true(fabs(json_real_value(json_array_get(v0, j)) - ref[j]) < 1e-6);
    json_decref(arr);
    free(printed);
    /* vectors of another model are not appended to these: resuming with one is refused */
    char other[512];
    snprintf(other, sizeof(other), "%s", tu_tmp("emb-other.gguf"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen2 --out '%s'", other), 0);
    assert_int_equal(
        tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' -c 256 -t 2 --resume", other, in, out, errs), 65);
    assert_non_null(strstr(tu_last_stderr(), "emb-out.jsonl:1 was written with system_fingerprint"));
    /* with its own model the resume finds everything done */
    assert_int_equal(
        tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' -c 256 -t 2 --resume", model, in, out, errs), 3);
    assert_non_null(strstr(tu_last_stderr(), "5 requests already written were skipped"));
}

/* Constrained requests (response_format json_schema / json_object) beside free ones: every
 * finished answer is JSON of its schema, the texts do not depend on how many run at once
 * (--seqs 1 = --seqs 4), and a schema docpipe cannot follow is refused for its line alone. */
static void test_batch_response_format(void **state) {
    (void)state;
    char model[256], in[256], out[2][256];
    snprintf(model, sizeof(model), "%s", tu_tmp("qwen35"));
    assert_int_equal(tu_run(NULL, "make-test-model --arch qwen35 --out '%s'", model), 0);
    snprintf(in, sizeof(in), "%s", tu_tmp("rf-req.jsonl"));
    FILE *f = fopen(in, "w");
    static const char schema[] = "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"f\", \"strict\": true, "
                                 "\"schema\": {\"type\": \"object\", \"properties\": {\"severity\": {\"enum\": [\"low\", "
                                 "\"high\"]}, \"line\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 500}, "
                                 "\"message\": {\"type\": \"string\", \"maxLength\": 12}}, \"required\": [\"severity\", "
                                 "\"line\", \"message\"]}}}";
    for (int i = 0; i < 8; i++)
        fprintf(f, "{\"custom_id\": \"r%d\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": "
                "\"user\", \"content\": \"Review line %d\"}], \"max_tokens\": 120, \"temperature\": %s, \"seed\": %d, "
                "\"response_format\": %s}}\n", i, i, i % 2 ? "0.9" : "0", i,
                i % 4 == 3 ? "{\"type\": \"json_object\"}" : i % 4 == 2 ? "{\"type\": \"text\"}" : schema);
    fprintf(f, "{\"custom_id\": \"bad\", \"url\": \"/v1/chat/completions\", \"body\": {\"messages\": [{\"role\": "
            "\"user\", \"content\": \"x\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
            "{\"schema\": {\"type\": \"integer\", \"multipleOf\": 3}}}}}\n");
    fclose(f);
    json_t *res[2];
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof(out[k]), "%s", tu_tmp(k ? "rf4.jsonl" : "rf1.jsonl"));
        const int rc = tu_run(NULL, "batch -m '%s' -i '%s' -o '%s' --errors '%s' --seqs %d -c 1024 -t 2", model, in,
                              out[k], out[k], k ? 4 : 1);
        assert_int_equal(rc, 3); /* the refused line */
        int n_lines;
        res[k] = load_results(out[k], &n_lines);
        assert_int_equal(n_lines, 9);
    }
    assert_string_equal(json_string_value(json_object_get(res[0], "bad")), "error:invalid_request");
    int valid = 0;
    for (int i = 0; i < 8; i++) {
        char id[16];
        snprintf(id, sizeof(id), "r%d", i);
        const char *a = json_string_value(json_object_get(res[0], id)), *b = json_string_value(json_object_get(res[1], id));
        if (!a || !b || strcmp(a, b)) fail_msg("%s differs between --seqs 1 and 4: '%s' vs '%s'", id, a, b);
        const char *bar = strrchr(a, '|');
        if (i % 4 == 2 || strcmp(bar, "|stop")) continue; /* free text, or cut by max_tokens */
        json_t *v = json_loadb(a, (size_t)(bar - a), 0, NULL);
        if (!json_is_object(v)) fail_msg("%s: not a JSON object: %s", id, a);
        if (i % 4 != 3) {
            const char *sev = json_string_value(json_object_get(v, "severity"));
            const json_int_t line = json_integer_value(json_object_get(v, "line"));
            const char *msg = json_string_value(json_object_get(v, "message"));
            if (!sev || (strcmp(sev, "low") && strcmp(sev, "high")) || line < 1 || line > 500 || !msg ||
                json_object_size(v) != 3)
                fail_msg("%s: not of the schema: %s", id, a);
        }
        json_decref(v);
        valid++;
    }
    assert_true(valid >= 3);
    json_decref(res[0]);
    json_decref(res[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_response_format),
        cmocka_unit_test(test_batch_results_do_not_depend_on_batching),
        cmocka_unit_test(test_batch_waits_for_kv_blocks_and_refuses_what_never_fits),
        cmocka_unit_test(test_batch_refuses_a_reused_custom_id),
        cmocka_unit_test(test_batch_usage_errors),
        cmocka_unit_test(test_batch_output_is_openai_shaped),
        cmocka_unit_test(test_batch_enable_thinking_per_request),
        cmocka_unit_test(test_batch_resume),
        cmocka_unit_test(test_batch_message_text_never_becomes_control_tokens),
        cmocka_unit_test(test_batch_embeddings),
    };
    return cmocka_run_group_tests_name("batch", tests, NULL, NULL);
}
