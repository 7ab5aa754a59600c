/*
 * test_run.c - `docpipe run` end to end on small random-weight models: the shipped example
 * jobs, bad documents, every exit code that needs no crash, incremental runs, status and plan.
 *
 * What "end to end" asserts here (issue 7, 9): every document yields exactly one error record
 * or its full set of results (every chunk once; in map-reduce exactly one final answer); every
 * line is a JSON object with meta; no prompt + max_tokens exceeds the context; the same job
 * twice gives the same text; device cpu and auto agree on a machine without a GPU.
 */
#include "e2eutil.h"

#include "platform.h"

#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "run_internal.h"

/* source_path -> {"chunks": [indices...], "final": n, "errors": n} */
static json_t *by_document(json_t *results, json_t *errors) {
    json_t *docs = json_object();
    json_t *sets[2] = {results, errors};
    for (int s = 0; s < 2; s++) {
        const char *cid;
        json_t *o;
        json_object_foreach(sets[s], cid, o) {
            json_t *m = json_object_get(o, "meta");
            const char *src = json_string_value(json_object_get(m, "source_path"));
            json_t *d = json_object_get(docs, src);
            if (!d) {
                d = json_pack("{s:[], s:i, s:i, s:i}", "chunks", "final", 0, "errors", 0, "reduce", 0);
                json_object_set_new(docs, src, d);
            }
            const char *stage = json_string_value(json_object_get(m, "stage"));
            if (json_is_object(json_object_get(o, "error")) && strcmp(stage, "map") && strcmp(stage, "chunk") &&
                strcmp(stage, "reduce")) {
                json_object_set_new(d, "errors", json_integer(json_integer_value(json_object_get(d, "errors")) + 1));
                continue;
            }
            if (!strcmp(stage, "reduce")) {
                json_object_set_new(d, "reduce", json_integer(json_integer_value(json_object_get(d, "reduce")) + 1));
            } else {
                json_array_append_new(json_object_get(d, "chunks"), json_integer(json_integer_value(
                                                                        json_object_get(m, "chunk_index"))));
                json_object_set(d, "count", json_object_get(m, "chunk_count"));
            }
            if (json_is_true(json_object_get(m, "final")))
                json_object_set_new(d, "final", json_integer(json_integer_value(json_object_get(d, "final")) + 1));
        }
    }
    return docs;
}

/* Every expected document has one error record or all its chunks once (+ one final answer). */
static void check_complete(json_t *docs, const char *const *expected, size_t n_expected, bool map_reduce) {
    if (json_object_size(docs) != n_expected) {
        char *s = json_dumps(docs, JSON_COMPACT);
        fail_msg("%zu documents in the output, expected %zu: %s", json_object_size(docs), n_expected, s);
    }
    for (size_t i = 0; i < n_expected; i++) {
        json_t *d = json_object_get(docs, expected[i]);
        if (!d) fail_msg("document %s has no record", expected[i]);
        json_t *ch = json_object_get(d, "chunks");
        const json_int_t errors = json_integer_value(json_object_get(d, "errors"));
        if (errors) {
            if (errors != 1 || json_array_size(ch)) fail_msg("%s: an error record and results", expected[i]);
            continue;
        }
        const json_int_t count = json_integer_value(json_object_get(d, "count"));
        if ((json_int_t)json_array_size(ch) != count || count < 1) fail_msg("%s: %zu chunk records of %lld", expected[i],
                                                                          json_array_size(ch), (long long)count);
        for (json_int_t k = 0; k < count; k++) {
            int seen = 0;
            for (size_t q = 0; q < json_array_size(ch); q++) seen += json_integer_value(json_array_get(ch, q)) == k;
            if (seen != 1) fail_msg("%s: chunk %lld appears %d times", expected[i], (long long)k, seen);
        }
        if (map_reduce && json_integer_value(json_object_get(d, "final")) != 1)
            fail_msg("%s: %lld final answers", expected[i], (long long)json_integer_value(json_object_get(d, "final")));
        if (map_reduce && count > 1 && json_integer_value(json_object_get(d, "reduce")) < 1)
            fail_msg("%s: %lld chunks but no reduce record", expected[i], (long long)count);
    }
}

static const char *ex_dir(void) {
    static char d[4096];
    if (!d[0]) {
        snprintf(d, sizeof(d), "%s/ex", tu_tmpdir());
        assert_int_equal(e2e_sh("mkdir -p '%s/models' && cp -r '%s/examples/jobs' '%s/examples/docs' '%s/examples/code' "
                                "'%s/examples/corpus' '%s/' && rm -rf '%s/jobs/out' '%s/jobs/state' && "
                                "ln -s '%s' '%s/models/tiny-qwen35-q4_k_m.gguf'",
                                d, DP_SOURCE_DIR, DP_SOURCE_DIR, DP_SOURCE_DIR, DP_SOURCE_DIR, d, d, d,
                                e2e_model("qwen35"), d),
                         0);
    }
    return d;
}

typedef struct example {
    const char *job, *results, *errors;
    int context, max_tokens;
    bool map_reduce;
    const char *const *docs;
    size_t n_docs;
} example;

static const char *const k_docs[] = {"../docs/archive/access-2026-11-27.log.gz", "../docs/handover-memo.docx",
                                     "../docs/incident-INC-2291.html", "../docs/ops-report-2026-11-28.md",
                                     "../docs/会议纪要-容量规划.md", "../docs/日报-2026-11-28.txt"};
static const char *const k_code[] = {"../code/scripts/rotate_logs.py", "../code/src/ringbuf.c", "../code/src/ringbuf.h"};
static const char *const k_corpus[] = {"../corpus/report.md", "../corpus/日报.txt"};

static const example k_examples[] = {
    {"nightly-summary", "out/nightly/results.jsonl.gz", "out/nightly/errors.jsonl", 512, 32, true, k_docs, 6},
    {"code-review", "out/code-review/results.jsonl", "out/code-review/errors.jsonl", 1024, 160, false, k_code, 3},
    {"rag-ingest", "out/rag/chunks.jsonl", "out/rag/errors.jsonl", 512, 24, false, k_docs, 6},
    {"minimal", "out/results.jsonl", "out/errors.jsonl", 512, 24, true, k_corpus, 2},
};

/* code-review.yaml's answers follow review-findings.schema.json: every finished one is a JSON
 * list of findings with exactly the six fields (checked here without the grammar's code), and
 * the records carry the chunk's lines in the file. */
static void check_findings(json_t *res) {
    const char *cid;
    json_t *rec;
    int finished = 0;
    json_object_foreach(res, cid, rec) {
        json_t *meta = json_object_get(rec, "meta");
        const json_int_t l0 = json_integer_value(json_object_get(meta, "line_start"));
        const json_int_t l1 = json_integer_value(json_object_get(meta, "line_end"));
        if (l0 < 1 || l1 < l0) fail_msg("%s: lines %lld..%lld", cid, (long long)l0, (long long)l1);
        json_t *ch = json_array_get(json_object_get(json_object_get(json_object_get(rec, "response"), "body"), "choices"), 0);
        if (strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop")) continue;
        finished++;
        json_t *v = json_loads(e2e_text(rec), 0, NULL);
        if (!json_is_array(v) || json_array_size(v) > 8) fail_msg("%s: not a list of findings: %s", cid, e2e_text(rec));
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *f = json_array_get(v, i);
            const char *sev = json_string_value(json_object_get(f, "severity"));
            json_t *sug = json_object_get(f, "suggestion");
            if (json_object_size(f) != 6 || !json_is_string(json_object_get(f, "file")) ||
                json_integer_value(json_object_get(f, "line")) < 1 || !sev ||
                (strcmp(sev, "error") && strcmp(sev, "warning") && strcmp(sev, "info")) ||
                !json_is_string(json_object_get(f, "category")) || !json_is_string(json_object_get(f, "message")) ||
                !(json_is_string(sug) || json_is_null(sug)))
                fail_msg("%s: finding %zu is not of the schema: %s", cid, i, e2e_text(rec));
        }
        json_decref(v);
    }
    assert_true(finished >= 1);
}

/* Runs an example job in jobs dir `sub`; returns custom_id -> text. */
static json_t *run_example(const example *e, const char *extra_args) {
    const char *d = ex_dir();
    char jobs[4400], path[4600];
    snprintf(jobs, sizeof(jobs), "%s/jobs", d);
    int rc = tu_run(NULL, "run '%s/%s.yaml' --quiet %s", jobs, e->job, extra_args);
    if (rc != 0) fail_msg("%s: exit %d: %s", e->job, rc, tu_last_stderr());
    snprintf(path, sizeof(path), "%s/%s", jobs, e->results);
    size_t n = 0;
    json_t *res = e2e_load_records(path, &n);
    snprintf(path, sizeof(path), "%s/%s", jobs, e->errors);
    json_t *err = e2e_load_records(path, NULL);
    e2e_check_records(res, e->context, e->max_tokens);
    if (!strcmp(e->job, "code-review")) check_findings(res);
    json_t *docs = by_document(res, err);
    check_complete(docs, e->docs, e->n_docs, e->map_reduce);
    json_decref(docs);
    json_t *t = e2e_texts(res);
    json_decref(res);
    json_decref(err);
    /* move this run's outputs away so the next one starts fresh */
    assert_int_equal(e2e_sh("cd '%s' && rm -rf out.prev state.prev && mv out out.prev && mv state state.prev", jobs), 0);
    return t;
}

static void test_examples(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(k_examples) / sizeof(k_examples[0]); i++) {
        json_t *a = run_example(&k_examples[i], "");
        json_t *b = run_example(&k_examples[i], "--device cpu"); /* auto = cpu here: same text */
        if (!json_equal(a, b)) fail_msg("%s: two runs (auto, then cpu) gave different results", k_examples[i].job);
        json_decref(a);
        json_decref(b);
    }
    /* per_document_dir mirrors the input tree */
    const char *d = ex_dir();
    char p[4400];
    json_decref(run_example(&k_examples[2], ""));
    snprintf(p, sizeof(p), "%s/jobs/out.prev/rag/by-document/archive/access-2026-11-27.log.gz.jsonl", d);
    assert_true(e2e_exists(p));
}

/* A folder with every kind of document the reader must survive. */
static const char *bad_corpus(void) {
    static char d[4096];
    if (d[0]) return d;
    snprintf(d, sizeof(d), "%s/bad", tu_tmpdir());
    assert_int_equal(e2e_sh("mkdir -p '%s/in/sub' && cd '%s/in' && printf 'hello world. fine text.' > ok.txt && "
                            "printf 'abc\\000def' > bin.txt && printf '  \\n' > empty.txt && printf 'x' > img.png && "
                            "printf '{\"text\":\"one\"}\\nnot json\\n\\n{\"text\":\"three\"}\\n' > items.jsonl && "
                            "head -c 5000 /dev/zero | tr '\\\\000' 'a' > sub/big.txt && "
                            "printf '<p>caf&eacute; &amp; <b>bar</b></p><script>x()</script>' > page.html && "
                            "printf '\\377\\376h\\000i\\000' > utf16.txt && printf 'bad \\377 byte' > latin.txt",
                            d, d),
                     0);
    return d;
}

static void test_bad_documents(void **state) {
    (void)state;
    const char *d = bad_corpus();
    char job[4400], res[4400], err[4400];
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in\n    max_file_size: 4KiB",
                  "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 8\noutputs:\n  jsonl: out/r.jsonl\n");
    int rc = tu_run(NULL, "run '%s' --quiet", job);
    assert_int_equal(rc, 3); /* finished, some documents failed */
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(err, sizeof(err), "%s/out/errors.jsonl", d);
    json_t *r = e2e_load_records(res, NULL), *e = e2e_load_records(err, NULL);
    e2e_check_records(r, 256, 8);
    const char *cid;
    json_t *o;
    json_t *codes = json_object();
    json_object_foreach(e, cid, o) {
        const char *src = json_string_value(json_object_get(json_object_get(o, "meta"), "source_path"));
        json_object_set_new(codes, src, json_string(json_string_value(json_object_get(json_object_get(o, "error"), "code"))));
    }
    const char *want[][2] = {{"in/bin.txt", "binary_file"},       {"in/empty.txt", "empty_document"},
                             {"in/img.png", "unsupported_format"}, {"in/items.jsonl#L2", "input_unreadable"},
                             {"in/sub/big.txt", "too_large"}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *c = json_string_value(json_object_get(codes, want[i][0]));
        if (!c || strcmp(c, want[i][1])) fail_msg("%s: error code %s, expected %s", want[i][0], c ? c : "(none)", want[i][1]);
    }
    assert_int_equal(json_object_size(codes), 5);
    /* the rest produced results; invalid UTF-8 was replaced and counted */
    json_t *docs = by_document(r, e);
    static const char *const all[] = {"in/bin.txt", "in/empty.txt", "in/img.png", "in/items.jsonl#L1",
                                      "in/items.jsonl#L2", "in/items.jsonl#L4", "in/latin.txt", "in/ok.txt",
                                      "in/page.html", "in/sub/big.txt", "in/utf16.txt"};
    check_complete(docs, all, sizeof(all) / sizeof(all[0]), true);
    bool replaced = false;
    json_object_foreach(r, cid, o) {
        json_t *m = json_object_get(o, "meta");
        if (!strcmp(json_string_value(json_object_get(m, "source_path")), "in/latin.txt"))
            replaced = json_integer_value(json_object_get(m, "replaced_invalid_utf8")) == 1;
    }
    assert_true(replaced);
    json_decref(docs);
    json_decref(codes);
    json_decref(r);
    json_decref(e);
}

static void test_exit_codes(void **state) {
    (void)state;
    char d[4096];
    snprintf(d, sizeof(d), "%s", tu_tmp("codes"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' '%s/empty' && printf 'some text here.' > '%s/in/a.txt'", d, d, d), 0);
    char job[4400];
    const char *gen = "prompts:\n  template: \"Say: {{content}}\"\ngeneration:\n  max_tokens: 6\n"
                      "outputs:\n  jsonl: out/r.jsonl\n";
    /* 65: invalid job, with FILE:LINE:COL */
    snprintf(job, sizeof(job), "%s/bad.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: x\n  tempalte: y\noutputs:\n  jsonl: o.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s'", job), 65);
    assert_non_null(strstr(tu_last_stderr(), "bad.yaml:10:3"));
    /* 66: a missing input folder, and folders without a matching file */
    snprintf(job, sizeof(job), "%s/noin.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "nowhere", gen);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 66);
    snprintf(job, sizeof(job), "%s/empty.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "empty", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 6\n"
                  "outputs:\n  jsonl: out-empty/r.jsonl\nstate_dir: state-empty\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 66);
    /* 78: model missing */
    snprintf(job, sizeof(job), "%s/nomodel.yaml", d);
    e2e_write_job(job, tu_tmp("no-such-model.gguf"), "in", gen);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "nomodel.yaml:2:9: model.path"));
    /* 65: output inside an input folder */
    snprintf(job, sizeof(job), "%s/loop.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 6\n"
                  "outputs:\n  jsonl: in/out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s'", job), 65);
    assert_non_null(strstr(tu_last_stderr(), "inside input folder"));
    /* 0, then 73: an output file no checkpoint owns is never touched */
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", gen);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(e2e_sh("mkdir -p '%s/other' && echo precious > '%s/other/r.jsonl'", d, d), 0);
    char job2[4400];
    snprintf(job2, sizeof(job2), "%s/job2.yaml", d);
    e2e_write_job(job2, e2e_model("qwen35"), "in", "prompts:\n  template: \"Say: {{content}}\"\ngeneration:\n  max_tokens: 6\n"
                  "outputs:\n  jsonl: other/r.jsonl\nstate_dir: state2\n");
    assert_int_equal(tu_run(NULL, "run '%s'", job2), 73);
    assert_int_equal(e2e_sh("grep -qx precious '%s/other/r.jsonl'", d), 0);
    /* 75: the job is locked by a running process (here: this test holds the lock) */
    char lock[4400];
    snprintf(lock, sizeof(lock), "%s/state/job.lock", d);
    int fd = open(lock, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 75);
    assert_non_null(strstr(tu_last_stderr(), "already running"));
    close(fd);
    /* 78: the template changed since the checkpoint */
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"Now say: {{content}}\"\ngeneration:\n"
                  "  max_tokens: 6\noutputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s'", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "prompts"));
    /* --restart moves the old outputs aside and starts clean */
    assert_int_equal(tu_run(NULL, "run '%s' --restart --quiet", job), 0);
    assert_int_equal(e2e_sh("ls '%s'/out/r.jsonl.old-* '%s'/state/checkpoint.json.old-* >/dev/null", d, d), 0);
    /* 78: another model file than the checkpoint's */
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"Now say: {{content}}\"\ngeneration:\n"
                  "  max_tokens: 6\noutputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s'", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "the model file changed"));
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"Now say: {{content}}\"\ngeneration:\n"
                  "  max_tokens: 6\noutputs:\n  jsonl: out/r.jsonl\n");
    /* a torn tail after the committed size is cut off and the run completes */
    assert_int_equal(e2e_sh("printf '{\"a\":' >> '%s/out/r.jsonl' && printf '\377garbage' >> '%s/out/errors.jsonl'", d, d), 0);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    char res[4400];
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    size_t n = 0;
    json_decref(e2e_load_records(res, &n));
    assert_int_equal(n, 1);
    /* 74: a sink shorter than the checkpoint says (storage lost data): nothing is modified */
    assert_int_equal(e2e_sh("truncate -s 10 '%s/out/r.jsonl'", d), 0);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 74);
    assert_non_null(strstr(tu_last_stderr(), "has 10 bytes, the checkpoint says"));
    assert_int_equal(e2e_sh("test $(stat -c %%s '%s/out/r.jsonl') = 10", d), 0);
    /* 65: a damaged checkpoint; outputs untouched */
    assert_int_equal(e2e_sh("printf '{\"version\": 1, \"fingerprint\": 3' > '%s/state/checkpoint.json'", d), 0);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 65);
    assert_non_null(strstr(tu_last_stderr(), "damaged checkpoint"));
    /* 64: usage */
    assert_int_equal(tu_run(NULL, "run"), 64);
    assert_int_equal(tu_run(NULL, "run a.yaml b.yaml"), 64);
}

/* -m, -t and -c replace the job's model section; a changed model or context is refused on
 * resume like an edit of the job; the environment reaches the job's values. */
static void test_command_line_overrides(void **state) {
    (void)state;
    char d[4096], job[4400], res[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("overrides"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && printf 'a short text.' > '%s/in/a.txt'", d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(
        job, "${DP_TEST_NO_SUCH_MODEL:-missing.gguf}", "in",
        "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 4\noutputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s'", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "missing.gguf is not a readable file"));
    assert_int_equal(tu_run(NULL, "run '%s' -m '%s' -t 1 -c 512 --quiet", job, e2e_model("qwen3")), 0);
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    json_t *r = e2e_load_records(res, NULL);
    const char *cid;
    json_t *o;
    json_object_foreach(r, cid, o) {
        const char *base = strrchr(e2e_model("qwen3"), '/');
        assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(o, "response"), "body"),
                                                              "model")), base + 1);
    }
    json_decref(r);
    /* the model from the environment now: the same file, so the run resumes (nothing to do) */
    setenv("DP_TEST_NO_SUCH_MODEL", e2e_model("qwen3"), 1);
    assert_int_equal(tu_run(NULL, "run '%s' -c 512 --quiet", job), 0);
    /* another context than the checkpoint's: refused, as an edit of the job would be */
    assert_int_equal(tu_run(NULL, "run '%s' -c 1024", job), 78);
    assert_int_equal(tu_run(NULL, "run '%s' -m '%s' -c 512", job, e2e_model("qwen35")), 78);
    assert_non_null(strstr(tu_last_stderr(), "the model file changed"));
    unsetenv("DP_TEST_NO_SUCH_MODEL");
    assert_int_equal(tu_run(NULL, "run '%s' -c 4", job), 64);
}

/* outputs.metrics: the Prometheus file after a run, after a run with a failed document, and
 * after a run refused at the start: the last success is kept. */
static double metric(const char *path, const char *sample) {
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(path, 1 << 20, &data, &len, &err), DP_OK);
    const char *p = strstr(data, sample);
    if (!p) fail_msg("%s has no sample %s:\n%s", path, sample, data);
    double v = strtod(p + strlen(sample), NULL);
    /* every line is a comment or NAME{LABELS} VALUE */
    for (const char *l = data; *l; l = strchr(l, '\n') + 1) {
        if (*l != '#' && !(strncmp(l, "docpipe_", 8) == 0 && strstr(l, "{job=\"") && strchr(l, '}')))
            fail_msg("not a Prometheus line: %.80s", l);
        if (!strchr(l, '\n')) break;
    }
    free(data);
    return v;
}

static void test_metrics_file(void **state) {
    (void)state;
    char d[4096], job[4400], prom[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("metrics"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && printf 'one.' > '%s/in/a.txt' && printf 'two.' > '%s/in/b.txt'",
                            d, d, d), 0);
    snprintf(job, sizeof(job), "%s/nightly.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 3\n"
                  "outputs:\n  jsonl: out/r.jsonl\n  metrics: prom/docpipe.prom\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(prom, sizeof(prom), "%s/prom/docpipe.prom", d);
    assert_true(metric(prom, "docpipe_run_documents{job=\"nightly\",outcome=\"ok\"} ") == 2);
    assert_true(metric(prom, "docpipe_run_exit_code{job=\"nightly\"} ") == 0);
    assert_true(metric(prom, "docpipe_run_running{job=\"nightly\"} ") == 0);
    assert_true(metric(prom, "docpipe_run_generated_tokens{job=\"nightly\"} ") > 0);
    const double success = metric(prom, "docpipe_last_success_timestamp_seconds{job=\"nightly\"} ");
    assert_true(success > 1.7e9);
    /* a failed document: exit 3, still a success of the run */
    assert_int_equal(e2e_sh("printf '\\000\\001' > '%s/in/c.txt'", d), 0);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    assert_true(metric(prom, "docpipe_run_documents{job=\"nightly\",outcome=\"failed\"} ") == 1);
    assert_true(metric(prom, "docpipe_run_documents{job=\"nightly\",outcome=\"skipped\"} ") == 2);
    assert_true(metric(prom, "docpipe_run_exit_code{job=\"nightly\"} ") == 3);
    assert_true(metric(prom, "docpipe_last_success_timestamp_seconds{job=\"nightly\"} ") >= success);
    /* refused at the start (another model than the checkpoint's): 78, the last success kept */
    assert_int_equal(tu_run(NULL, "run '%s' -m '%s'", job, e2e_model("qwen35")), 78);
    assert_true(metric(prom, "docpipe_run_exit_code{job=\"nightly\"} ") == 78);
    assert_true(metric(prom, "docpipe_last_success_timestamp_seconds{job=\"nightly\"} ") >= success);
}

/* The run's stderr as log lines: text with time and level; --log-format json one object per
 * line with the summary's fields. */
static void test_log_lines(void **state) {
    (void)state;
    char d[4096], job[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("logs"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && printf 'one.' > '%s/in/a.txt' && printf '\\000' > '%s/in/b.txt'", d,
                            d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s' --progress=plain", job), 3);
    const char *t = tu_last_stderr();
    /* "2026-12-04T01:00:12Z warn  docpipe: 2 documents in ..." */
    const char *sum = strstr(t, " warn  docpipe: 2 documents in ");
    assert_non_null(sum);
    assert_true(sum - t >= 20 && sum[-1] == 'Z' && sum[-10] == 'T');
    assert_int_equal(e2e_sh("rm -rf '%s/out' '%s/state'", d, d), 0);
    assert_int_equal(tu_run(NULL, "--log-format json run '%s' --progress=plain", job), 3);
    char *copy = strdup(tu_last_stderr());
    int n_lines = 0, n_summary = 0, n_progress = 0;
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        if (!o) fail_msg("not a JSON line: %s", line);
        n_lines++;
        assert_non_null(json_string_value(json_object_get(o, "time")));
        assert_non_null(json_string_value(json_object_get(o, "message")));
        const char *ev = json_string_value(json_object_get(o, "event"));
        if (!strcmp(ev, "summary")) {
            n_summary++;
            assert_string_equal(json_string_value(json_object_get(o, "level")), "warn");
            assert_int_equal(json_integer_value(json_object_get(o, "exit_code")), 3);
            assert_int_equal(json_integer_value(json_object_get(o, "failed")), 1);
            assert_int_equal(json_integer_value(json_object_get(o, "done")), 1);
        }
        if (!strcmp(ev, "progress")) n_progress++;
        json_decref(o);
    }
    free(copy);
    assert_int_equal(n_summary, 1);
    assert_true(n_progress >= 1 && n_lines >= 2);
    assert_int_equal(tu_run(NULL, "--log-format yaml run '%s'", job), 64);
}

/* outputs.intermediate: the main file holds one answer per document, the map results go to
 * the second file; both survive a kill at any write like the main outputs do. */
static void test_intermediate_file(void **state) {
    (void)state;
    char d[4096], job[4400], res[4400], inter[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("inter"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && for i in 1 2 3; do for k in $(seq 12); do "
                            "printf 'Sentence %%s of document %%s is about topic %%s. ' $k $i $k; done > d$i.txt; done",
                            d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(
        job, e2e_model("qwen3"), "in",
        "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 4\n"
        "chunking:\n  max_tokens: 48\n  overlap: 0\noutputs:\n  jsonl: out/r.jsonl\n  intermediate: out/map.jsonl\n");
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(inter, sizeof(inter), "%s/out/map.jsonl", d);
    assert_int_equal(tu_run(NULL, "run '%s' -c 1024 --quiet", job), 0);
    json_t *gr = e2e_load_records(res, NULL), *gi = e2e_load_records(inter, NULL);
    assert_int_equal(json_object_size(gr), 3);
    assert_true(json_object_size(gi) >= 6);
    const char *cid;
    json_t *o;
    json_object_foreach(gr, cid, o) assert_true(json_is_true(json_object_get(json_object_get(o, "meta"), "final")));
    json_object_foreach(gi, cid, o) assert_true(json_is_false(json_object_get(json_object_get(o, "meta"), "final")));
    json_t *tr = e2e_texts(gr), *ti = e2e_texts(gi);
    /* killed before the k-th write, then resumed: the same two files */
    setenv("DOCPIPE_COMMIT_RECORDS", "1", 1);
    for (int k = 1; k <= 12; k += 3) {
        assert_int_equal(e2e_sh("cd '%s' && rm -rf out state", d), 0);
        char fault[64];
        snprintf(fault, sizeof(fault), "write:%d:kill", k);
        setenv("DOCPIPE_FAULT", fault, 1);
        const int rc = tu_run(NULL, "run '%s' -c 1024 --quiet", job);
        unsetenv("DOCPIPE_FAULT");
        if (rc == 0) break;
        assert_int_equal(tu_run(NULL, "run '%s' -c 1024 --quiet", job), 0);
        json_t *r2 = e2e_load_records(res, NULL), *i2 = e2e_load_records(inter, NULL);
        json_t *t2 = e2e_texts(r2), *u2 = e2e_texts(i2);
        if (!json_equal(t2, tr) || !json_equal(u2, ti)) fail_msg("after a kill at write %d the outputs differ", k);
        json_decref(r2), json_decref(i2), json_decref(t2), json_decref(u2);
    }
    unsetenv("DOCPIPE_COMMIT_RECORDS");
    json_decref(gr), json_decref(gi), json_decref(tr), json_decref(ti);
    /* per-chunk mode has no intermediate results: refused where it is written */
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\nchunking:\n  mode: per-chunk\n"
                  "outputs:\n  jsonl: out/r.jsonl\n  intermediate: out/map.jsonl\n");
    assert_int_equal(tu_run(NULL, "validate '%s'", job), 65);
    assert_non_null(strstr(tu_last_stderr(), "outputs.intermediate holds the map results"));
}

/* converters: a job maps extensions to programs; the document's bytes reach them as a private
 * copy ("{input}"), stdout is the text; a failing one is a record quoting its stderr, a slow one
 * is killed; a program that is not installed stops validate and run (78). */
static void test_converters(void **state) {
    (void)state;
    char d[4096], job[4400], res[4400], errs[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("conv"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && printf 'the text of a note.' > '%s/in/a.note' && printf 'x' > "
                            "'%s/in/b.broken' && printf 'y' > '%s/in/c.slow'", d, d, d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\nconverters:\n  .note: [cat, \"{input}\"]\n"
                  "  .broken: [sh, -c, \"echo cannot parse this >&2; exit 3\"]\n  .slow: [sleep, \"30\"]\n");
    assert_int_equal(tu_run(NULL, "validate '%s'", job), 0);
    setenv("DOCPIPE_CONVERTER_TIMEOUT_MS", "1000", 1);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    unsetenv("DOCPIPE_CONVERTER_TIMEOUT_MS");
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(errs, sizeof(errs), "%s/out/errors.jsonl", d);
    json_t *r = e2e_load_records(res, NULL), *e = e2e_load_records(errs, NULL);
    assert_int_equal(json_object_size(r), 1);
    const char *cid;
    json_t *o;
    json_object_foreach(r, cid, o) {
        json_t *m = json_object_get(o, "meta");
        assert_string_equal(json_string_value(json_object_get(m, "source_path")), "in/a.note");
        assert_string_equal(json_string_value(json_object_get(m, "input_format")), "converted");
    }
    int found = 0;
    json_object_foreach(e, cid, o) {
        const char *sp = json_string_value(json_object_get(json_object_get(o, "meta"), "source_path"));
        const char *msg = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
        if (!strcmp(sp, "in/b.broken")) found += strstr(msg, "sh exit 3: cannot parse this") != NULL;
        if (!strcmp(sp, "in/c.slow")) found += strstr(msg, "killed") != NULL;
    }
    assert_int_equal(found, 2);
    json_decref(r), json_decref(e);
    /* a converter that is not installed, and malformed entries */
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\nconverters:\n  .note: [no-such-converter-program, \"{input}\"]\n");
    assert_int_equal(tu_run(NULL, "validate '%s'", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "converters.note: no-such-converter-program is not installed"));
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\nconverters:\n  doc: [x]\n  .pdf: []\n");
    assert_int_equal(tu_run(NULL, "validate '%s'", job), 65);
    assert_non_null(strstr(tu_last_stderr(), "'doc' must be an extension"));
    assert_non_null(strstr(tu_last_stderr(), "converters.pdf must be a list"));
}

/* A PDF of one text line per page (an empty string: a page without text, as a scan has). */
static void write_pdf(const char *path, const char *const *pages, int n) {
    char body[8192], obj[1024];
    size_t len = 0, offs[32];
    int k = 0;
#define ADD(...) (snprintf(obj, sizeof(obj), __VA_ARGS__), offs[k++] = len, \
                  len += (size_t)snprintf(body + len, sizeof(body) - len, "%d 0 obj\n%s\nendobj\n", k, obj))
    len = (size_t)snprintf(body, sizeof(body), "%%PDF-1.4\n");
    char kids[256] = "";
    for (int i = 0; i < n; i++) snprintf(kids + strlen(kids), sizeof(kids) - strlen(kids), "%d 0 R ", 4 + 2 * i);
    ADD("<< /Type /Catalog /Pages 2 0 R >>");
    ADD("<< /Type /Pages /Kids [%s] /Count %d >>", kids, n);
    ADD("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
    for (int i = 0; i < n; i++) {
        char stream[256] = "";
        if (pages[i][0]) snprintf(stream, sizeof(stream), "BT /F1 12 Tf 20 150 Td (%s) Tj ET", pages[i]);
        ADD("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Resources << /Font << /F1 3 0 R >> >> "
            "/Contents %d 0 R >>", 5 + 2 * i);
        ADD("<< /Length %zu >>\nstream\n%s\nendstream", strlen(stream), stream);
    }
#undef ADD
    const size_t xref = len;
    len += (size_t)snprintf(body + len, sizeof(body) - len, "xref\n0 %d\n0000000000 65535 f \n", k + 1);
    for (int i = 0; i < k; i++) len += (size_t)snprintf(body + len, sizeof(body) - len, "%010zu 00000 n \n", offs[i]);
    len += (size_t)snprintf(body + len, sizeof(body) - len, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%zu\n"
                            "%%%%EOF\n", k + 1, xref);
    tu_write_file(path, body, len);
}

/* .pdf through pdftotext: per-chunk records carry their pages, a chunk stops at a page end, a
 * scan without text says OCR, a broken file says what pdftotext said. */
static void test_pdf_documents(void **state) {
    (void)state;
    if (e2e_sh("command -v pdftotext >/dev/null 2>&1") != 0) {
        print_message("[  SKIPPED ] pdftotext is not installed (apt-get install poppler-utils)\n");
        skip();
    }
    char d[4096], job[4400], path[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("pdf"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && printf 'not a pdf at all' > '%s/in/broken.pdf'", d, d), 0);
    const char *three[] = {"First page of the quarterly report, about revenue and costs.",
                           "Second page, the middle part, about the people and the plans.",
                           "Third and last page, with the outlook for the next year."};
    const char *scan[] = {"", ""};
    snprintf(path, sizeof(path), "%s/in/report.pdf", d);
    write_pdf(path, three, 3);
    snprintf(path, sizeof(path), "%s/in/scan.pdf", d);
    write_pdf(path, scan, 2);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "chunking:\n  mode: per-chunk\n  max_tokens: 40\n  overlap: 0\noutputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    char res[4400], errs[4400];
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(errs, sizeof(errs), "%s/out/errors.jsonl", d);
    json_t *r = e2e_load_records(res, NULL), *e = e2e_load_records(errs, NULL);
    const char *cid;
    json_t *o;
    /* chunks in order: each starts on the page after the one the previous ended on (a chunk
     * stops at a page end rather than inside a page), and together they cover pages 1..3 */
    json_int_t starts[16] = {0}, ends[16] = {0};
    size_t nch = 0;
    json_object_foreach(r, cid, o) {
        json_t *m = json_object_get(o, "meta");
        assert_string_equal(json_string_value(json_object_get(m, "input_format")), "pdf");
        assert_int_equal(json_integer_value(json_object_get(m, "pages")), 3);
        const json_int_t k = json_integer_value(json_object_get(m, "chunk_index"));
        assert_true(k >= 0 && k < 16);
        starts[k] = json_integer_value(json_object_get(m, "page_start"));
        ends[k] = json_integer_value(json_object_get(m, "page_end"));
        nch++;
    }
    assert_true(nch >= 2);
    assert_int_equal(starts[0], 1);
    assert_int_equal(ends[nch - 1], 3);
    for (size_t k = 0; k < nch; k++) {
        if (starts[k] > ends[k] || (k && starts[k] != ends[k - 1] + 1))
            fail_msg("chunk %zu covers pages %lld-%lld after %lld", k, (long long)starts[k], (long long)ends[k],
                     (long long)(k ? ends[k - 1] : 0));
    }
    int found = 0;
    json_object_foreach(e, cid, o) {
        const char *sp = json_string_value(json_object_get(json_object_get(o, "meta"), "source_path"));
        const char *code = json_string_value(json_object_get(json_object_get(o, "error"), "code"));
        const char *msg = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
        if (!strcmp(sp, "in/scan.pdf")) found += !strcmp(code, "empty_document") && strstr(msg, "OCR");
        if (!strcmp(sp, "in/broken.pdf")) found += !strcmp(code, "input_unreadable") && strstr(msg, "pdftotext");
    }
    assert_int_equal(found, 2);
    json_decref(r);
    json_decref(e);
}

/* Per-chunk records stand on their own (issue 36): each carries its text, which is the
 * document's bytes [byte_start, byte_end); its lines; its token count within chunking.max_tokens;
 * and the heading path above it: Markdown ATX and setext headings (never a "# comment" inside a
 * fenced code block), HTML <h1>..<h6>. Expected paths come from where the test put each heading. */
static void test_chunk_records(void **state) {
    (void)state;
    char d[4096], job[4400], path[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("chunkrec"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in'", d), 0);
    /* sections: [start offset, path]; the text between headings is long enough to need chunks */
    dp_buf md;
    dp_buf_init(&md, 1 << 20);
    struct { size_t at; const char *path; } sec[8];
    size_t nsec = 0;
    const char *para = "The service reads its settings at start and again on a reload signal; nothing else changes "
                       "them while it runs.\n";
#define SECTION(hd, p)                                 \
    do {                                               \
        sec[nsec].at = md.len, sec[nsec++].path = (p); \
        dp_buf_printf(&md, "%s", hd);                  \
        for (int i = 0; i < 4; i++) dp_buf_printf(&md, "%s", para); \
    } while (0)
    SECTION("# Install\n\n", "Install");
    SECTION("## Linux ##\n\n", "Install/Linux");
    dp_buf_printf(&md, "```sh\n# not a heading: a shell comment\nmake install\n```\n\n");
    for (int i = 0; i < 3; i++) dp_buf_printf(&md, "%s", para);
    SECTION("### From source\n\n", "Install/Linux/From source");
    SECTION("Usage\n=====\n\n", "Usage");
    SECTION("Flags\n-----\n\n", "Usage/Flags");
#undef SECTION
    snprintf(path, sizeof(path), "%s/in/guide.md", d);
    tu_write_file(path, md.data, md.len);
    const char *html = "<html><body><h1>Handbook</h1><p>Intro paragraph about the handbook.</p>"
                       "<h2>On call</h2><p>Who answers pages at night, and how fast.</p></body></html>";
    snprintf(path, sizeof(path), "%s/in/handbook.html", d);
    tu_write_file(path, html, strlen(html));
    /* a long run of blank lines between two paragraphs: no chunk of white space alone */
    dp_buf gap;
    dp_buf_init(&gap, 1 << 20);
    dp_buf_printf(&gap, "Alpha paragraph about the first topic.\n");
    for (int i = 0; i < 3000; i++) dp_buf_printf(&gap, " \t \n");
    dp_buf_printf(&gap, "Omega paragraph about the last topic.\n");
    snprintf(path, sizeof(path), "%s/in/gap.txt", d);
    tu_write_file(path, gap.data, gap.len);
    dp_buf_free(&gap);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "chunking:\n  mode: per-chunk\n  max_tokens: 48\n  overlap: 8\noutputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(path, sizeof(path), "%s/out/r.jsonl", d);
    json_t *r = e2e_load_records(path, NULL);
    const char *cid;
    json_t *o;
    size_t n_md = 0, n_html = 0, n_gap = 0;
    json_int_t gap_count = 0;
    json_object_foreach(r, cid, o) {
        json_t *m = json_object_get(o, "meta");
        const char *src = json_string_value(json_object_get(m, "source_path"));
        const char *text = json_string_value(json_object_get(m, "text"));
        const size_t a = (size_t)json_integer_value(json_object_get(m, "byte_start"));
        const size_t b = (size_t)json_integer_value(json_object_get(m, "byte_end"));
        const json_int_t tokens = json_integer_value(json_object_get(m, "chunk_tokens"));
        json_t *hp = json_object_get(m, "heading_path");
        assert_non_null(text);
        assert_true(json_is_array(hp));
        assert_true(tokens > 0 && tokens <= 48);
        assert_int_equal(strlen(text), b - a);
        char got[256] = "";
        for (size_t i = 0; i < json_array_size(hp); i++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? "/" : "",
                     json_string_value(json_array_get(hp, i)));
        if (!strcmp(src, "in/gap.txt")) {
            n_gap++;
            if (strspn(text, " \t\r\n") == strlen(text)) fail_msg("%s: a chunk of white space alone", cid);
            gap_count = json_integer_value(json_object_get(m, "chunk_count"));
            continue;
        }
        if (!strcmp(src, "in/guide.md")) {
            n_md++;
            assert_true(b <= md.len);
            assert_memory_equal(text, md.data + a, b - a);
            json_int_t line = 1, line_end;
            for (size_t i = 0; i < a; i++) line += md.data[i] == '\n';
            line_end = line;
            for (size_t i = a; i + 1 < b; i++) line_end += md.data[i] == '\n';
            assert_int_equal(json_integer_value(json_object_get(m, "line_start")), line);
            assert_int_equal(json_integer_value(json_object_get(m, "line_end")), line_end);
            const char *want = "";
            for (size_t k = 0; k < nsec; k++)
                if (sec[k].at <= a) want = sec[k].path;
            if (strcmp(got, want)) fail_msg("%s: chunk at byte %zu has heading path '%s', expected '%s'", cid, a, got, want);
        } else {
            n_html++;
            assert_string_equal(src, "in/handbook.html");
            /* offsets are into the decoded text */
            const char *dec = "Handbook\nIntro paragraph about the handbook.\nOn call\nWho answers pages at night, and how fast.";
            assert_true(b <= strlen(dec));
            assert_memory_equal(text, dec + a, b - a);
            const char *want = a >= (size_t)(strstr(dec, "On call") - dec) ? "Handbook/On call" : "Handbook";
            if (strcmp(got, want)) fail_msg("%s: chunk at byte %zu has heading path '%s', expected '%s'", cid, a, got, want);
        }
    }
    assert_true(n_md >= 5);
    assert_true(n_html >= 1);
    assert_true(n_gap >= 2);
    assert_int_equal(gap_count, (json_int_t)n_gap); /* numbered without the blank ones */
    dp_buf_free(&md);
    json_decref(r);
}

/* task: embed end to end against llama-embedding (../shared/fixtures/embeddings): each prompt
 * file is a document of one chunk; its record holds the same number of tokens as llama.cpp
 * embedded and a vector within cosine 0.9999 / max |d| 1e-3 of llama.cpp's; the vectors are the
 * same bit for bit with 1 or 4 chunks per group. */
static void test_embed_job_matches_llama(void **state) {
    (void)state;
    TU_NEED_FIXTURES();
    char d[4096], job[4400], path[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("embedjob"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in'", d), 0);
    json_error_t je;
    json_t *refs = json_load_file(tu_fixture("embeddings/qwen3-tiny-embed-f16.emb-refs.json"), 0, &je);
    assert_non_null(refs);
    json_t *cases = json_object_get(refs, "cases"), *c;
    size_t i, n_docs = 0;
    json_array_foreach(cases, i, c) {
        const char *id = json_string_value(json_object_get(c, "id"));
        if (!strcmp(id, "chat")) continue; /* control-token text: a document never yields control tokens */
        char *text;
        size_t len;
        dp_err err = {0};
        assert_int_equal(dp_file_read_all(tu_fixture(json_string_value(json_object_get(c, "prompt_file"))), 1 << 20,
                                          &text, &len, &err), DP_OK);
        if (len && text[len - 1] == '\n') len--; /* llama-embedding -f drops one final newline */
        snprintf(path, sizeof(path), "%s/in/%s.txt", d, id);
        tu_write_file(path, text, len);
        free(text);
        n_docs++;
    }
    json_t *vecs[2] = {NULL, NULL};
    for (int pass = 0; pass < 2; pass++) {
        snprintf(job, sizeof(job), "%s/job%d.yaml", d, pass);
        FILE *f = fopen(job, "w");
        assert_non_null(f);
        fprintf(f, "task: embed\nmodel:\n  path: %s\n  context: 2048\n  max_sequences: %d\n  threads: 2\n"
                "inputs:\n  - path: in\noutputs:\n  jsonl: out%d/e.jsonl\nstate_dir: state%d\n",
                tu_fixture("embeddings/qwen3-tiny-embed-f16.gguf"), pass ? 1 : 4, pass, pass);
        fclose(f);
        assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
        snprintf(path, sizeof(path), "%s/out%d/e.jsonl", d, pass);
        json_t *r = e2e_load_records(path, NULL);
        assert_int_equal(json_object_size(r), n_docs);
        vecs[pass] = json_object();
        const char *cid;
        json_t *o;
        json_object_foreach(r, cid, o) {
            json_t *m = json_object_get(o, "meta"), *body = json_object_get(json_object_get(o, "response"), "body");
            assert_string_equal(json_string_value(json_object_get(m, "stage")), "embed");
            assert_string_equal(json_string_value(json_object_get(m, "pooling")), "last");
            json_t *emb = json_object_get(json_array_get(json_object_get(body, "data"), 0), "embedding");
            json_object_set(vecs[pass], cid, emb);
            const char *src = strrchr(json_string_value(json_object_get(m, "source_path")), '/') + 1;
            json_t *ref = NULL;
            json_array_foreach(cases, i, c) {
                char name[64];
                snprintf(name, sizeof(name), "%s.txt", json_string_value(json_object_get(c, "id")));
                if (!strcmp(name, src)) ref = c;
            }
            assert_non_null(ref);
            assert_int_equal(json_integer_value(json_object_get(json_object_get(body, "usage"), "prompt_tokens")),
                             json_integer_value(json_object_get(ref, "n_tokens")));
            json_t *want = json_object_get(ref, "embedding");
            assert_int_equal(json_array_size(emb), json_array_size(want));
            double dot = 0, na = 0, nb = 0, worst = 0;
            for (size_t k = 0; k < json_array_size(emb); k++) {
                const double a = json_number_value(json_array_get(emb, k)), b = json_number_value(json_array_get(want, k));
                dot += a * b, na += a * a, nb += b * b;
                worst = fabs(a - b) > worst ? fabs(a - b) : worst;
            }
            const double cs = dot / sqrt(na * nb);
            if (cs < 0.9999 || worst > 1e-3) fail_msg("%s: cosine %.7f, max |d| %.2e against llama-embedding", src, cs, worst);
        }
        json_decref(r);
    }
    assert_true(json_equal(vecs[0], vecs[1])); /* the same bits whatever else is in the group */
    json_decref(vecs[0]);
    json_decref(vecs[1]);
    json_decref(refs);
}

/* One integer from the database at path (a one-row, one-column query). */
static long long db_int(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    long long v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
    sqlite3_finalize(q);
    sqlite3_close(db);
    return v;
}

/* outputs.sqlite stays current (issue 36): a changed document's chunks and vectors are replaced,
 * a deleted one is removed (or marked with sqlite_keep_deleted), the FTS index follows; a
 * database of another model or schema, or one locked by another process, is refused with
 * nothing changed. */
static void test_sqlite_sink(void **state) {
    (void)state;
    char d[4096], job[4400], db[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("sqlite"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && printf '# Alpha\\nThe walrus sleeps on ice.\\n' > a.md && "
                            "printf 'The heron waits in the reeds.\\n' > b.txt && "
                            "printf 'The otter floats on its back.\\n' > c.txt", d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    snprintf(db, sizeof(db), "%s/out/kb.sqlite", d);
    char head[4200];
    snprintf(head, sizeof(head), "task: embed\nmodel:\n  path: %s\n  context: 256\n  max_sequences: 2\n  threads: 2\n"
             "inputs:\n  - path: in\nchunking:\n  max_tokens: 64\n  overlap: 8\noutputs:\n  jsonl: out/e.jsonl\n"
             "  sqlite: out/kb.sqlite\n", e2e_model("qwen3"));
    tu_write_file(job, head, strlen(head));
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM documents WHERE status = 'ok'"), 3);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks"), 3);
    assert_int_equal(db_int(db, "SELECT count(*) FROM embeddings e JOIN chunks c ON c.id = e.chunk_id"), 3);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks WHERE heading_path = '[\"Alpha\"]'"), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'walrus'"), 1);
    assert_int_equal(db_int(db, "SELECT user_version FROM pragma_user_version"), 1);
    const long long dim = db_int(db, "SELECT value FROM docpipe_meta WHERE key = 'dimension'");
    assert_int_equal(db_int(db, "SELECT min(length(vector)) FROM embeddings"), 4 * dim);
    /* a.md changes, b.txt goes, d.txt comes */
    assert_int_equal(e2e_sh("cd '%s/in' && printf '# Beta\\nThe puffin dives for fish.\\n' > a.md && rm b.txt && "
                            "printf 'The lynx hunts at dusk.' > d.txt", d), 0);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM documents"), 3);
    assert_int_equal(db_int(db, "SELECT count(*) FROM documents WHERE path LIKE '%b.txt'"), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks"), 3);
    assert_int_equal(db_int(db, "SELECT count(*) FROM embeddings"), 3);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'walrus OR heron'"), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'puffin'"), 1);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks WHERE heading_path = '[\"Beta\"]'"), 1);
    /* docpipe query: a chunk's own text finds it first at cosine 1 (the same tokens give the same
     * vector); --hybrid puts the one chunk with a rare word first; another model is refused */
    char *out = NULL;
    assert_int_equal(tu_run(&out, "query '%s' 'The lynx hunts at dusk.' --json -k 2", db), 0);
    json_error_t je;
    json_t *q = json_loads(out, 0, &je);
    assert_non_null(q);
    json_t *top = json_array_get(json_object_get(q, "results"), 0);
    assert_int_equal(json_array_size(json_object_get(q, "results")), 2);
    assert_non_null(strstr(json_string_value(json_object_get(top, "path")), "d.txt"));
    assert_true(json_number_value(json_object_get(top, "cosine")) > 0.9999);
    assert_int_equal(json_integer_value(json_object_get(top, "line_start")), 1);
    json_decref(q);
    free(out);
    out = NULL;
    assert_int_equal(tu_run(&out, "query '%s' 'where is the otter' --hybrid --json", db), 0);
    q = json_loads(out, 0, &je);
    assert_non_null(q);
    top = json_array_get(json_object_get(q, "results"), 0);
    assert_non_null(strstr(json_string_value(json_object_get(top, "path")), "c.txt"));
    assert_int_equal(json_integer_value(json_object_get(top, "text_rank")), 1);
    json_decref(q);
    free(out);
    out = NULL;
    assert_int_equal(tu_run(&out, "query '%s' 'The lynx' -k 1", db), 0); /* the text form */
    assert_non_null(strstr(out, "1. "));
    free(out);
    assert_int_equal(tu_run(NULL, "query '%s' 'lynx' -m '%s'", db, e2e_model("qwen2")), 78);
    assert_non_null(strstr(tu_last_stderr(), "not the model"));
    /* kept, marked deleted, with the option */
    char keep[4400];
    snprintf(keep, sizeof(keep), "%s  sqlite_keep_deleted: true\n", head);
    tu_write_file(job, keep, strlen(keep));
    assert_int_equal(e2e_sh("rm '%s/in/c.txt'", d), 0);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM documents WHERE status = 'deleted' AND path LIKE '%c.txt'"), 1);
    /* the sqlite3 shell reads it as it stands */
    if (e2e_sh("command -v sqlite3 >/dev/null 2>&1") == 0)
        assert_int_equal(e2e_sh("test \"$(sqlite3 '%s' \"SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'lynx'\")\" = 1",
                                db), 0);
    /* another embedding model: refused, nothing changed */
    assert_int_equal(e2e_sh("cp '%s' '%s.before'", db, db), 0);
    char other[4400];
    snprintf(other, sizeof(other), "%s/other.yaml", d);
    char body[4200];
    snprintf(body, sizeof(body), "task: embed\nmodel:\n  path: %s\n  context: 256\ninputs:\n  - path: in\noutputs:\n"
             "  jsonl: out2/e.jsonl\n  sqlite: out/kb.sqlite\nstate_dir: state2\n", e2e_model("qwen2"));
    tu_write_file(other, body, strlen(body));
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", other), 78);
    assert_non_null(strstr(tu_last_stderr(), "another embedding model"));
    assert_int_equal(e2e_sh("cmp -s '%s' '%s.before'", db, db), 0);
    /* another schema version: refused */
    assert_int_equal(e2e_sh("cp '%s.before' '%s/old.sqlite'", db, d), 0);
    {
        char old[4400];
        snprintf(old, sizeof(old), "%s/old.sqlite", d);
        sqlite3 *h = NULL;
        assert_int_equal(sqlite3_open(old, &h), SQLITE_OK);
        assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(h);
        snprintf(other, sizeof(other), "%s/old.yaml", d);
        char b2[4300];
        snprintf(b2, sizeof(b2), "task: embed\nmodel:\n  path: %s\n  context: 256\ninputs:\n  - path: in\noutputs:\n"
                 "  jsonl: out3/e.jsonl\n  sqlite: old.sqlite\nstate_dir: state3\n", e2e_model("qwen3"));
        tu_write_file(other, b2, strlen(b2));
        assert_int_equal(tu_run(NULL, "run '%s' --quiet", other), 78);
        assert_non_null(strstr(tu_last_stderr(), "schema version 99"));
    }
    /* locked by another process past the timeout: exit 75, nothing written */
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(e2e_sh("printf 'The crane stands still.\\n' > '%s/in/e.txt'", d), 0);
    setenv("DOCPIPE_SQLITE_BUSY_MS", "300", 1);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 75);
    unsetenv("DOCPIPE_SQLITE_BUSY_MS");
    assert_non_null(strstr(tu_last_stderr(), "locked by another process"));
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(db_int(db, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'crane'"), 1);
}

/* generation.stop (issue 37): greedy decoding makes the answers of a job with a stop string the
 * answers without it, cut just before the string's first occurrence (finish "stop"); answers that
 * never contain it are unchanged. The stop string is taken from a first run's output, so it occurs. */
static void test_stop_strings(void **state) {
    (void)state;
    char d[4096], job[4400], path[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("stop"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && for i in 1 2 3 4 5 6; do printf 'Note %%s: the "
                            "pump in hall %%s was serviced.' $i $i > n$i.txt; done", d, d), 0);
    snprintf(job, sizeof(job), "%s/a.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 24\n"
                  "outputs:\n  jsonl: a/r.jsonl\nstate_dir: sa\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(path, sizeof(path), "%s/a/r.jsonl", d);
    json_t *a = e2e_load_records(path, NULL), *ta = e2e_texts(a);
    /* a stop string from the middle of one answer */
    const char *k0;
    json_t *v0;
    char stop[8] = "";
    json_object_foreach(ta, k0, v0) {
        const char *t = json_string_value(v0);
        const size_t n = strlen(t);
        for (size_t i = n / 3; i + 1 < n && !stop[0]; i++) /* two ASCII letters from inside an answer */
            if (((t[i] | 0x20) >= 'a' && (t[i] | 0x20) <= 'z') && ((t[i + 1] | 0x20) >= 'a' && (t[i + 1] | 0x20) <= 'z'))
                memcpy(stop, t + i, 2);
        if (stop[0]) break;
    }
    assert_true(stop[0] != 0);
    json_t *yaml_stop = json_string(stop);
    char *quoted = json_dumps(yaml_stop, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    json_decref(yaml_stop);
    char extra[1024];
    snprintf(extra, sizeof(extra), "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 24\n  stop: [%s]\n"
             "outputs:\n  jsonl: b/r.jsonl\nstate_dir: sb\n", quoted);
    free(quoted);
    snprintf(job, sizeof(job), "%s/b.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", extra);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(path, sizeof(path), "%s/b/r.jsonl", d);
    json_t *b = e2e_load_records(path, NULL);
    size_t cut = 0;
    const char *k;
    json_t *o;
    json_object_foreach(b, k, o) {
        const char *tb = e2e_text(o), *full = json_string_value(json_object_get(ta, k));
        const char *fin = json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(
                                                                json_object_get(o, "response"), "body"), "choices"), 0),
                                                            "finish_reason"));
        assert_non_null(full);
        const char *hit = strstr(full, stop);
        if (hit) {
            cut++;
            if (strlen(tb) != (size_t)(hit - full) || strncmp(tb, full, strlen(tb)))
                fail_msg("%s: '%s' should be '%.*s' (cut before \"%s\")", k, tb, (int)(hit - full), full, stop);
            assert_string_equal(fin, "stop");
        } else {
            assert_string_equal(tb, full);
        }
        assert_null(strstr(tb, stop));
    }
    assert_true(cut >= 1);
    json_decref(a);
    json_decref(ta);
    json_decref(b);
}

/* inputs[].changed_since (issue 37): only the files of a git work tree that changed since the
 * revision (modified, staged or not, and new ones) are processed; a folder that is not a work
 * tree and an unknown revision are refused before the run, naming the job file's line. */
static void test_changed_since(void **state) {
    (void)state;
    if (e2e_sh("command -v git >/dev/null 2>&1") != 0) {
        print_message("[  SKIPPED ] git is not installed (apt-get install git)\n");
        skip();
    }
    char d[4096], job[4400], path[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("changed"));
    assert_int_equal(e2e_sh("mkdir -p '%s/repo/src' '%s/plain' && cd '%s/repo' && git init -q . && "
                            "git config user.email t@example.com && git config user.name t && "
                            "printf 'int a;\\n' > src/a.c && printf 'int b;\\n' > src/b.c && printf 'int c;\\n' > src/c.c && "
                            "printf '*.log\\n' > .gitignore && git add -A && git commit -qm one && "
                            "printf 'int a = 1;\\n' > src/a.c && printf 'int d;\\n' > src/d.c && printf 'x\\n' > src/e.log && "
                            "printf 'int c = 3;\\n' > src/c.c && git add src/c.c && printf 'p\\n' > ../plain/p.c",
                            d, d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "repo/src\n    changed_since: HEAD",
                  "prompts:\n  template: \"Review {{path}}: {{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(path, sizeof(path), "%s/out/r.jsonl", d);
    json_t *r = e2e_load_records(path, NULL);
    json_t *seen = json_object();
    const char *k;
    json_t *o;
    json_object_foreach(r, k, o)
        json_object_set_new(seen, json_string_value(json_object_get(json_object_get(o, "meta"), "source_path")), json_true());
    /* a.c modified, c.c staged, d.c new; b.c unchanged and e.log ignored are left out */
    assert_int_equal(json_object_size(seen), 3);
    assert_non_null(json_object_get(seen, "repo/src/a.c"));
    assert_non_null(json_object_get(seen, "repo/src/c.c"));
    assert_non_null(json_object_get(seen, "repo/src/d.c"));
    json_decref(seen);
    json_decref(r);
    /* refusals, before anything runs */
    e2e_write_job(job, e2e_model("qwen3"), "repo/src\n    changed_since: no-such-branch",
                  "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\noutputs:\n  jsonl: out2/r.jsonl\n"
                  "state_dir: s2\n");
    assert_int_equal(tu_run(NULL, "validate '%s'", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "unknown revision 'no-such-branch'"));
    e2e_write_job(job, e2e_model("qwen3"), "plain\n    changed_since: HEAD",
                  "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\noutputs:\n  jsonl: out3/r.jsonl\n"
                  "state_dir: s3\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 78);
    assert_non_null(strstr(tu_last_stderr(), "is not a git work tree"));
    assert_non_null(strstr(tu_last_stderr(), "job.yaml:"));
}

/* {{content_numbered}} (issue 37): numbering costs tokens the chunker does not count, so a
 * document is re-chunked smaller until every numbered prompt fits; no request is refused, and
 * the records' line ranges cover the file. */
static void test_numbered_content(void **state) {
    (void)state;
    char d[4096], job[4400], path[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("numbered"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && for i in $(seq 1 120); do printf 'int v%%s = %%s;\\n' $i $i; done > "
                            "'%s/in/code.c'", d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"Review {{path}}:\\n{{content_numbered}}\"\n"
                  "generation:\n  max_tokens: 8\nchunking:\n  mode: per-chunk\n  overlap: 0\noutputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(path, sizeof(path), "%s/out/r.jsonl", d);
    json_t *r = e2e_load_records(path, NULL);
    e2e_check_records(r, 256, 8);
    assert_true(json_object_size(r) >= 2);
    json_int_t last = 0;
    const char *k;
    json_t *o;
    json_object_foreach(r, k, o) {
        const json_int_t e = json_integer_value(json_object_get(json_object_get(o, "meta"), "line_end"));
        last = e > last ? e : last;
    }
    assert_int_equal(last, 120);
    json_decref(r);
}

static void test_disk_error_then_resume(void **state) {
    (void)state;
    char d[4096];
    snprintf(d, sizeof(d), "%s", tu_tmp("enospc"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && for i in 1 2 3 4 5 6; do printf 'document %%s text.' $i > \"%s/in/d$i.txt\"; "
                            "done", d, d), 0);
    char job[4400], res[4400];
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 6\n"
                  "outputs:\n  jsonl: out/r.jsonl\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    json_t *golden = e2e_load_records(res, NULL), *gt = e2e_texts(golden);
    assert_int_equal(e2e_sh("cd '%s' && rm -rf out state", d), 0);
    /* the third write fails with ENOSPC: exit 74 naming the file, the checkpoint stays consistent */
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(e2e_sh("cd '%s' && rm -rf out state", d), 0);
    setenv("DOCPIPE_COMMIT_RECORDS", "2", 1);
    /* a full disk on the k-th write, and a failing fsync (EIO) on the k-th sync */
    static const char *const faults[] = {"write:%d:ENOSPC", "sync:%d:EIO"};
    for (int f = 0; f < 2; f++)
        for (int k = 1; k <= 12; k++) {
            char fault[64];
            snprintf(fault, sizeof(fault), faults[f], k);
            setenv("DOCPIPE_FAULT", fault, 1);
            int rc = tu_run(NULL, "run '%s' --quiet", job);
            unsetenv("DOCPIPE_FAULT");
            if (rc == 0) break; /* fewer operations than k */
            if (rc != 74) fail_msg("%s: exit %d, expected 74: %s", fault, rc, tu_last_stderr());
            assert_non_null(strstr(tu_last_stderr(), f ? "input/output error" : "no space left"));
            assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
            json_t *got = e2e_load_records(res, NULL), *t = e2e_texts(got);
            if (!json_equal(t, gt)) fail_msg("after %s and a resume the results differ", fault);
            json_decref(got);
            json_decref(t);
            assert_int_equal(e2e_sh("cd '%s' && rm -rf out state", d), 0);
        }
    unsetenv("DOCPIPE_COMMIT_RECORDS");
    json_decref(golden);
    json_decref(gt);
}

static void test_incremental_and_status(void **state) {
    (void)state;
    char d[4096];
    snprintf(d, sizeof(d), "%s", tu_tmp("incr"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && for i in 1 2 3 4 5; do printf 'note %%s.' $i > \"%s/in/n$i.txt\"; done",
                            d, d), 0);
    char job[4400];
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 4\n"
                  "outputs:\n  jsonl: out/r.jsonl\n");
    char *out = NULL;
    assert_int_equal(tu_run(&out, "status '%s'", job), 0);
    if (!strstr(out, "no run yet") || !strstr(out, "5 pending")) fail_msg("status said: %s / %s", out, tu_last_stderr());
    assert_non_null(strstr(out, "5 pending"));
    free(out);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    assert_int_equal(tu_run(&out, "status '%s'", job), 0);
    assert_non_null(strstr(out, "5 done (5 ok, 0 failed), 0 pending"));
    free(out);
    /* add 3, edit 1: exactly those 4 run next time */
    assert_int_equal(e2e_sh("cd '%s/in' && printf 'new a.' > a.txt && printf 'new b.' > b.txt && printf 'new c.' > c.txt "
                            "&& printf 'edited.' > n2.txt", d), 0);
    assert_int_equal(tu_run(&out, "status '%s'", job), 0);
    assert_non_null(strstr(out, "4 pending"));
    free(out);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 0);
    assert_non_null(strstr(tu_last_stderr(), "4 done (4 results), 0 failed"));
    assert_non_null(strstr(tu_last_stderr(), "4 skipped"));
    char res[4400];
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    size_t n = 0;
    json_decref(e2e_load_records(res, &n));
    assert_int_equal(n, 9); /* 5 + 4: the edited document has its old and its new record */
    assert_int_equal(tu_run(NULL, "run '%s'", job), 0);
    assert_non_null(strstr(tu_last_stderr(), "8 skipped"));
    /* plan: counts without generating */
    assert_int_equal(e2e_sh("printf 'one more.' > '%s/in/z.txt'", d), 0);
    assert_int_equal(tu_run(&out, "plan '%s'", job), 0);
    assert_non_null(strstr(out, "1 to process, 8 skipped"));
    assert_non_null(strstr(out, "estimated time"));
    free(out);
}

/* The job of issue 7 exactly as written, in a folder of its own: model.gguf beside it. */
static void test_reference_job_as_written(void **state) {
    (void)state;
    char d[4096], job[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("asis"));
    assert_int_equal(e2e_sh("mkdir -p '%s/corpus/skip' && cp '%s/examples/corpus/'*.* '%s/corpus/' && "
                            "cp '%s/examples/corpus/skip/draft.txt' '%s/corpus/skip/' && ln -s '%s' '%s/model.gguf'",
                            d, DP_SOURCE_DIR, d, DP_SOURCE_DIR, d, e2e_model("qwen35"), d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    FILE *f = fopen(job, "w");
    assert_non_null(f);
    fputs("model:\n  path: model.gguf\n  device: auto\n  context: 512\n  threads: 2\ninputs:\n  - path: corpus\n"
          "    include: [\"**/*\"]\n    exclude: [\"**/skip/**\"]\nprompts:\n"
          "  system: You summarize documents for the operations team.\n"
          "  template: \"Summarize {{filename}} (part {{chunk_index}} of {{chunk_count}}):\\n{{content}}\"\n"
          "  reduce_template: \"Combine these summaries of {{filename}} into one:\\n{{content}}\"\n"
          "generation:\n  max_tokens: 24\n  temperature: 0\n  seed: 7\nchunking:\n  mode: map-reduce\n  overlap: 16\n"
          "outputs:\n  jsonl: out/results.jsonl\nstate_dir: state\n", f);
    fclose(f);
    /* run from another folder: relative paths resolve against the job file's folder */
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 0);
    char p[4400];
    static const char *const beside[] = {"out/results.jsonl", "out/errors.jsonl", "out/status.json",
                                         "state/checkpoint.json", "state/ledger.jsonl"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s", d, beside[i]);
        if (!e2e_exists(p)) fail_msg("%s was not written", beside[i]);
    }
    snprintf(p, sizeof(p), "%s/out/results.jsonl", d);
    json_t *r = e2e_load_records(p, NULL);
    snprintf(p, sizeof(p), "%s/out/errors.jsonl", d);
    json_t *e = e2e_load_records(p, NULL);
    static const char *const docs[] = {"corpus/report.md", "corpus/日报.txt"};
    json_t *bd = by_document(r, e);
    check_complete(bd, docs, 2, true); /* skip/draft.txt excluded */
    e2e_check_records(r, 512, 24);
    json_decref(bd);
    json_decref(r);
    json_decref(e);
}

/* The shared prompt head changes nothing but speed: the same text with and without it. */
static void test_shared_head_same_results(void **state) {
    (void)state;
    char d[4096], job[4400], res[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("head"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && for i in $(seq 1 9); do printf 'ticket %%s: disk full on node %%s.' $i $i "
                            "> \"%s/in/t$i.txt\"; done", d, d), 0);
    char sys[4096] = "";
    for (int i = 0; i < 60; i++) snprintf(sys + strlen(sys), sizeof(sys) - strlen(sys), "Rule %d: be brief. ", i);
    char extra[8192];
    snprintf(extra, sizeof(extra), "prompts:\n  system: \"%s\"\n  template: \"Triage {{filename}}: {{content}}\"\n"
             "generation:\n  max_tokens: 8\n  temperature: 0.9\n  seed: 5\noutputs:\n  jsonl: out/r.jsonl\n", sys);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", extra);
    /* e2e_write_job sets context 256: this job needs more */
    assert_int_equal(e2e_sh("sed -i 's/context: 256/context: 1024/' '%s'", job), 0);
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 0);
    if (!strstr(tu_last_stderr(), "shared prompt head of")) fail_msg("no shared head: %s", tu_last_stderr());
    json_t *a = e2e_load_records(res, NULL), *ta = e2e_texts(a);
    assert_int_equal(e2e_sh("cd '%s' && rm -rf out state", d), 0);
    setenv("DOCPIPE_NO_PREFIX", "1", 1);
    assert_int_equal(tu_run(NULL, "run '%s'", job), 0);
    unsetenv("DOCPIPE_NO_PREFIX");
    assert_null(strstr(tu_last_stderr(), "shared prompt head of"));
    json_t *b = e2e_load_records(res, NULL), *tb = e2e_texts(b);
    if (!json_equal(ta, tb)) fail_msg("results differ with and without the shared prompt head");
    json_decref(a), json_decref(b), json_decref(ta), json_decref(tb);
}

static void test_safe_relpath(void **state) {
    (void)state;
    char o[256];
    pl_safe_relpath("a/b/c.txt", o, sizeof(o));
    assert_string_equal(o, "a/b/c.txt");
    pl_safe_relpath("../../etc/passwd", o, sizeof(o));
    assert_memory_equal(o, "_/_/etc/passwd~", 15);
    assert_int_equal(strlen(o), 15 + 8);
    pl_safe_relpath("/abs//x/./y", o, sizeof(o));
    assert_memory_equal(o, "_/abs/_/x/_/y~", 14);
    pl_safe_relpath(".hidden/a:b\\c\n", o, sizeof(o));
    assert_memory_equal(o, "_hidden/a_b_c_~", 15);
    /* names that clean to the same text stay apart; a clean name is kept as it is */
    char a[256], b[256], c[256];
    pl_safe_relpath("new\nline.txt", a, sizeof(a));
    pl_safe_relpath("new_line.txt", b, sizeof(b));
    pl_safe_relpath("c\x01.txt", c, sizeof(c));
    assert_string_equal(b, "new_line.txt");
    assert_string_not_equal(a, b);
    assert_memory_equal(c, "c_.txt~", 7);
    /* a long name cut to fit still ends in its hash */
    char longname[600];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = 0;
    pl_safe_relpath(longname, a, sizeof(a));
    assert_true(strlen(a) < sizeof(a) && strchr(a, '~'));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safe_relpath),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_reference_job_as_written),
        cmocka_unit_test(test_shared_head_same_results),
        cmocka_unit_test(test_bad_documents),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_command_line_overrides),
        cmocka_unit_test(test_metrics_file),
        cmocka_unit_test(test_pdf_documents),
        cmocka_unit_test(test_chunk_records),
        cmocka_unit_test(test_embed_job_matches_llama),
        cmocka_unit_test(test_sqlite_sink),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_changed_since),
        cmocka_unit_test(test_numbered_content),
        cmocka_unit_test(test_log_lines),
        cmocka_unit_test(test_intermediate_file),
        cmocka_unit_test(test_converters),
        cmocka_unit_test(test_disk_error_then_resume),
        cmocka_unit_test(test_incremental_and_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
