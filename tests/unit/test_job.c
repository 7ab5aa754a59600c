/*
 * test_job.c - the job file: the reference job parses as written with its defaults, and every
 * kind of bad job gives its "FILE:LINE:COL: message"; the schema and docs/job-file.md list the
 * same keys; docpipe validate's exit codes.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "platform.h"

static const char k_example[] =
    "model:\n"
    "  path: model.gguf\n"
    "  device: auto\n"
    "  context: 512\n"
    "  threads: 2\n"
    "inputs:\n"
    "  - path: corpus\n"
    "    include: [\"**/*\"]\n"
    "    exclude: [\"**/skip/**\"]\n"
    "prompts:\n"
    "  system: You summarize documents for the operations team.\n"
    "  template: \"Summarize {{filename}} (part {{chunk_index}} of {{chunk_count}}):\\n{{content}}\"\n"
    "  reduce_template: \"Combine these summaries of {{filename}} into one:\\n{{content}}\"\n"
    "generation:\n"
    "  max_tokens: 24\n"
    "  temperature: 0\n"
    "  seed: 7\n"
    "chunking:\n"
    "  mode: map-reduce\n"
    "  overlap: 16\n"
    "outputs:\n"
    "  jsonl: out/results.jsonl\n"
    "state_dir: state\n";

static void test_reference_job_parses_with_defaults(void **state) {
    (void)state;
    job_spec j;
    dp_err err = {0};
    assert_int_equal(job_load_buffer(k_example, strlen(k_example), "job.yaml", "/jobs", &j, &err), DP_OK);
    assert_string_equal(j.model.path, "/jobs/model.gguf");
    assert_int_equal(j.model.device, DP_DEVICE_AUTO);
    assert_int_equal(j.model.context, 512);
    assert_int_equal(j.model.threads, 2);
    assert_int_equal(j.model.max_sequences, 8);
    assert_int_equal(j.model.kv_type, 0); /* f16 */
    assert_int_equal(j.n_inputs, 1);
    assert_string_equal(j.inputs[0].path, "/jobs/corpus");
    assert_int_equal(j.inputs[0].n_include, 1);
    assert_string_equal(j.inputs[0].include[0], "**/*");
    assert_string_equal(j.inputs[0].exclude[0], "**/skip/**");
    assert_int_equal(j.inputs[0].max_file_size, 64 << 20);
    assert_false(j.inputs[0].follow_symlinks);
    assert_string_equal(j.inputs[0].jsonl_field, "text");
    assert_string_equal(j.prompts.system, "You summarize documents for the operations team.");
    assert_non_null(strstr(j.prompts.template_, "part {{chunk_index}} of {{chunk_count}}):\n{{content}}"));
    assert_int_equal(j.generation.max_tokens, 24);
    assert_true(j.generation.temperature == 0.0);
    assert_int_equal(j.generation.seed, 7);
    assert_int_equal(j.generation.top_k, 40);
    assert_false(j.generation.thinking);
    assert_int_equal(j.chunking.mode, JOB_CHUNK_MAP_REDUCE);
    assert_int_equal(j.chunking.overlap, 16);
    assert_string_equal(j.outputs.jsonl, "/jobs/out/results.jsonl");
    assert_false(j.outputs.gzip);
    assert_null(j.outputs.per_document_dir);
    assert_string_equal(j.state_dir, "/jobs/state");
    job_spec_free(&j);
    job_spec_free(&j); /* freeing twice is harmless */
}

/* Replaces the first occurrence of `from` in the reference job by `to`. */
static char *edit(const char *from, const char *to) {
    const char *p = strstr(k_example, from);
    if (!p) fail_msg("test bug: '%s' not in the reference job", from);
    size_t n = strlen(k_example) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%.*s%s%s", (int)(p - k_example), k_example, to, p + strlen(from));
    return s;
}

static void test_bad_jobs_report_file_line_col(void **state) {
    (void)state;
    const struct { const char *from, *to, *want; } c[] = {
        {"  threads: 2\n", "  thread: 2\n", "job.yaml:5:3: unknown key 'thread' in model (did you mean 'threads'?)"},
        {"model:\n", "modle:\n", "job.yaml:1:1: unknown section 'modle' (did you mean 'model'?)"},
        {"  context: 512\n", "  context: lots\n", "job.yaml:4:12: model.context is 'lots' but must be a number"},
        {"  context: 512\n", "  context: 12\n", "job.yaml:4:12: model.context is 12 but must be in [64, 1.04858e+06]"},
        {"  context: 512\n", "  context: 512.5\n", "job.yaml:4:12: model.context is 512.5 but must be a whole number"},
        {"  device: auto\n", "  device: tpu\n", "job.yaml:3:11: model.device is 'tpu' but must be one of cpu|cuda|auto"},
        {"  device: auto\n", "  kv_type: q4_0\n", "job.yaml:3:12: model.kv_type is 'q4_0' but must be one of f16|q8_0"},
        {"  temperature: 0\n", "  temperature: 9\n", "generation.temperature is 9 but must be in [0, 5]"},
        {"  mode: map-reduce\n", "  mode: mapreduce\n", "must be one of map-reduce|per-chunk"},
        {"  path: model.gguf\n", "  sha256: abc\n", "job.yaml:1:1: model.path is required"},
        {"{{chunk_count}}):", "{{chunks}}):", "job.yaml:12:13: prompts.template: unknown variable {{chunks}}"},
        {"\\n{{content}}\"\n  reduce", "\"\n  reduce", "job.yaml:12:13: prompts.template must contain {{content}}"},
        {"  overlap: 16\n", "  overlap: 16\n  max_tokens: 16\n", "chunking.overlap (16) must be smaller than chunking.max_tokens (16)"},
        {"  max_tokens: 24\n", "  max_tokens: 600\n", "generation.max_tokens (600) leaves no room for the prompt"},
        {"  path: model.gguf\n", "  path: model.gguf\n  sha256: zz\n", "model.sha256 must be 64 hexadecimal digits"},
        {"inputs:\n  - path: corpus\n", "inputs:\n  - paths: corpus\n", "job.yaml:7:5: unknown key 'paths' in inputs[] (did you mean 'path'?)"},
        {"    include: [\"**/*\"]\n", "    include: {a: b}\n", "inputs[].include must be a list of glob patterns"},
        {"model:\n  path: model.gguf\n  device: auto\n  context: 512\n  threads: 2\n", "model: [1, 2]\n",
         "job.yaml:1:8: model must be a mapping of keys, not a list"},
        {"  threads: 2\n", "  threads: 2\n  threads: 3\n", "job.yaml:6:3: key 'threads' appears twice in model (first at line 5)"},
        {"state_dir: state\n", "state_dir: [a]\n", "job.yaml:23:12: state_dir must be a value, not a list"},
        {"  seed: 7\n", "  seed: &s 7\n  top_k: *s\n", "job.yaml:17:9: anchors (&s) are not allowed in job files"},
        {"  seed: 7\n", "  seed: [7\n", "job.yaml:18:9: YAML syntax error: did not find expected ','"},
        {"state_dir: state\n", "state_dir: state\n---\nmodel: {}\n", "a job file holds one YAML document"},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        char *text = edit(c[i].from, c[i].to);
        job_spec j;
        dp_err err = {0};
        dp_status st = job_load_buffer(text, strlen(text), "job.yaml", "/jobs", &j, &err);
        if (st != DP_EFORMAT || !strstr(err.msg, c[i].want))
            fail_msg("case %zu: got %s '%s'\nwant '%s'", i, dp_status_name(st), err.msg, c[i].want);
        free(text);
    }
}

static void test_hostile_yaml_is_refused(void **state) {
    (void)state;
    job_spec j;
    dp_err err = {0};
    const char *alias = "a: &x [1]\nb: *x\n";
    assert_int_equal(job_load_buffer(alias, strlen(alias), "j.yaml", "", &j, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "j.yaml:1:4: anchors (&x) are not allowed"));
    /* a billion-laughs document never expands: the first anchor stops it */
    const char *laughs = "a: &a [\"lol\",\"lol\"]\nb: &b [*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b]\n";
    assert_int_equal(job_load_buffer(laughs, strlen(laughs), "j.yaml", "", &j, &err), DP_EFORMAT);
    char deep[200] = "a: ";
    for (int i = 0; i < 40; i++) strcat(deep, "[");
    assert_int_equal(job_load_buffer(deep, strlen(deep), "j.yaml", "", &j, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "nesting deeper than 16 levels"));
    assert_int_equal(job_load_buffer("", 0, "j.yaml", "", &j, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "the job file is empty"));
    assert_int_equal(job_load_buffer("- 1\n- 2\n", 8, "j.yaml", "", &j, &err), DP_EFORMAT);
    assert_non_null(strstr(err.msg, "must be a mapping of sections"));
    const char bad_utf8[] = "model: {path: \"\xff\xfe\"}\n";
    assert_int_equal(job_load_buffer(bad_utf8, strlen(bad_utf8), "j.yaml", "", &j, &err), DP_EFORMAT);
}

static void test_environment_variables_in_values(void **state) {
    (void)state;
    job_spec j;
    dp_err err = {0};
    setenv("DP_TEST_MODELS", "/srv/m", 1);
    setenv("DP_TEST_EMPTY", "", 1);
    unsetenv("DP_TEST_UNSET");
    char *t = edit("  path: model.gguf\n", "  path: ${DP_TEST_MODELS}/q.gguf\n");
    char *u = edit("  threads: 2\n", "  threads: ${DP_TEST_UNSET:-3}\n");
    /* both edits: splice u's threads line into t */
    char both[4096];
    const char *tl = strstr(t, "  threads: 2\n");
    snprintf(both, sizeof(both), "%.*s  threads: ${DP_TEST_UNSET:-3}\n%s", (int)(tl - t), t, tl + 13);
    free(u);
    free(t);
    assert_int_equal(job_load_buffer(both, strlen(both), "j.yaml", "/d", &j, &err), DP_OK);
    assert_string_equal(j.model.path, "/srv/m/q.gguf");
    assert_int_equal(j.model.threads, 3);
    job_spec_free(&j);
    /* empty counts as unset for :-; $${ is a literal ${; a template keeps its {{content}} */
    t = edit("  system: You summarize documents for the operations team.\n",
             "  system: \"${DP_TEST_EMPTY:-none} and $${HOME} and ${DP_TEST_MODELS:-x}\"\n");
    assert_int_equal(job_load_buffer(t, strlen(t), "j.yaml", "/d", &j, &err), DP_OK);
    assert_string_equal(j.prompts.system, "none and ${HOME} and /srv/m");
    job_spec_free(&j);
    free(t);
    /* unset without a default, and a malformed reference: errors at their positions, both */
    t = edit("  threads: 2\n", "  threads: ${DP_TEST_UNSET}\n");
    char bad[4096];
    const char *sl = strstr(t, "  seed: 7\n");
    snprintf(bad, sizeof(bad), "%.*s  seed: ${1x}\n%s", (int)(sl - t), t, sl + 10);
    free(t);
    assert_int_equal(job_load_buffer(bad, strlen(bad), "j.yaml", "/d", &j, &err), DP_EFORMAT);
    if (!strstr(err.msg, "j.yaml:5:12: environment variable DP_TEST_UNSET is not set") ||
        !strstr(err.msg, "j.yaml:17:9: '${1x}': a reference must read"))
        fail_msg("got: %s", err.msg);
}

/* task: embed needs no prompt and refuses what belongs to generation; a generation job refuses
 * the embedding section. */
static void test_embed_task(void **state) {
    (void)state;
    const char *ok = "task: embed\nmodel:\n  path: m.gguf\ninputs:\n  - path: in\nembedding:\n  pooling: mean\n"
                     "  instruction: Find the passage\nchunking:\n  max_tokens: 256\noutputs:\n  jsonl: out/e.jsonl\n";
    job_spec j;
    dp_err err = {0};
    assert_int_equal(job_load_buffer(ok, strlen(ok), "e.yaml", "/jobs", &j, &err), DP_OK);
    assert_int_equal(j.task, JOB_TASK_EMBED);
    assert_int_equal(j.embedding.pooling, JOB_POOL_MEAN);
    assert_true(j.embedding.normalize);
    assert_string_equal(j.embedding.instruction, "Find the passage");
    assert_int_equal(j.chunking.mode, JOB_CHUNK_PER_CHUNK);
    assert_null(j.prompts.template_);
    job_spec_free(&j);
    static const struct { const char *yaml, *want; } bad[] = {
        {"task: embed\nmodel:\n  path: m.gguf\ninputs:\n  - path: in\nprompts:\n  template: \"{{content}}\"\n"
         "outputs:\n  jsonl: o.jsonl\n", "j.yaml:6:1: section 'prompts' does not apply to task: embed"},
        {"task: embed\nmodel:\n  path: m.gguf\ninputs:\n  - path: in\ngeneration:\n  max_tokens: 5\n"
         "outputs:\n  jsonl: o.jsonl\n", "j.yaml:6:1: section 'generation' does not apply to task: embed"},
        {"model:\n  path: m.gguf\ninputs:\n  - path: in\nprompts:\n  template: \"{{content}}\"\nembedding:\n"
         "  pooling: mean\noutputs:\n  jsonl: o.jsonl\n", "j.yaml:7:1: section 'embedding' applies to task: embed only"},
        {"task: embed\nmodel:\n  path: m.gguf\ninputs:\n  - path: in\nchunking:\n  mode: map-reduce\n"
         "outputs:\n  jsonl: o.jsonl\n", "j.yaml:7:9: chunking.mode map-reduce combines generated answers"},
        {"task: embedding\nmodel:\n  path: m.gguf\ninputs:\n  - path: in\noutputs:\n  jsonl: o.jsonl\n",
         "j.yaml:1:7: task"},
        {"task: embed\nmodel:\n  path: m.gguf\ninputs:\n  - path: in\nembedding:\n  pooling: rank\n"
         "outputs:\n  jsonl: o.jsonl\n", "j.yaml:7:12: embedding.pooling"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dp_status st = job_load_buffer(bad[i].yaml, strlen(bad[i].yaml), "j.yaml", "/jobs", &j, &err);
        if (st != DP_EFORMAT || !strstr(err.msg, bad[i].want))
            fail_msg("case %zu: got %s '%s'\nwant '%s'", i, dp_status_name(st), err.msg, bad[i].want);
    }
}

static void test_every_schema_key_is_documented(void **state) {
    (void)state;
    char path[1024], *doc;
    size_t len;
    dp_err err = {0};
    snprintf(path, sizeof(path), "%s/docs/job-file.md", DP_SOURCE_DIR);
    assert_int_equal(dp_file_read_all(path, 1 << 20, &doc, &len, &err), DP_OK);
    for (size_t i = 0; i < job_schema_n_keys(); i++) {
        const char *sec, *key;
        job_schema_key(i, &sec, &key);
        char want[128];
        snprintf(want, sizeof(want), "`%s%s%s`", sec, sec[0] ? "." : "", key);
        if (!strstr(doc, want)) fail_msg("docs/job-file.md does not document %s", want);
    }
    free(doc);
}

static void test_validate_command_exit_codes(void **state) {
    (void)state;
    dp_err err = {0};
    assert_int_equal(dp_mkdir_p(tu_tmp("job/corpus"), &err), DP_OK);
    tu_write_file(tu_tmp("job/job.yaml"), k_example, strlen(k_example));
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/job.yaml")), 78); /* no model file */
    assert_non_null(strstr(tu_last_stderr(), "model.path"));
    tu_write_file(tu_tmp("job/model.gguf"), "x", 1);
    char *out;
    /* what run refuses, validate refuses: an input folder with no matching file */
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/job.yaml")), 66);
    assert_non_null(strstr(tu_last_stderr(), "no input documents"));
    tu_write_file(tu_tmp("job/corpus/a.txt"), "text", 4);
    assert_int_equal(tu_run(&out, "validate '%s'", tu_tmp("job/job.yaml")), 0);
    assert_non_null(strstr(out, "valid"));
    free(out);
    char *bad = edit("  threads: 2\n", "  threads: two\n");
    tu_write_file(tu_tmp("job/bad.yaml"), bad, strlen(bad));
    free(bad);
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/bad.yaml")), 65);
    assert_non_null(strstr(tu_last_stderr(), "bad.yaml:5:12: model.threads is 'two' but must be a number"));
    /* every error, not only the first */
    char *t = edit("  threads: 2\n", "  threads: two\n"), bad2[4096];
    char *seed = strstr(t, "  seed: 7\n");
    assert_non_null(seed);
    snprintf(bad2, sizeof(bad2), "%.*s  seed: x\n%sextra: 1\n", (int)(seed - t), t, seed + strlen("  seed: 7\n"));
    free(t);
    tu_write_file(tu_tmp("job/bad2.yaml"), bad2, strlen(bad2));
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/bad2.yaml")), 65);
    /* in file order */
    const char *e1 = strstr(tu_last_stderr(), "bad2.yaml:5:12: model.threads is 'two'"),
               *e2 = strstr(tu_last_stderr(), "bad2.yaml:17:9: generation.seed is 'x'"),
               *e3 = strstr(tu_last_stderr(), "bad2.yaml:24:1: unknown section 'extra'");
    if (!e1 || !e2 || !e3 || !(e1 < e2 && e2 < e3)) fail_msg("validate said: %s", tu_last_stderr());
    /* outputs and state inside an input folder (run refuses it: validate too), all three named */
    char *loop = edit("  jsonl: out/results.jsonl\nstate_dir: state\n",
                      "  jsonl: corpus/out/results.jsonl\n  per_document_dir: corpus/docs\nstate_dir: corpus/state\n");
    tu_write_file(tu_tmp("job/loop.yaml"), loop, strlen(loop));
    free(loop);
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/loop.yaml")), 65);
    assert_non_null(strstr(tu_last_stderr(), "outputs.jsonl lies inside input folder"));
    assert_non_null(strstr(tu_last_stderr(), "state_dir lies inside input folder"));
    assert_non_null(strstr(tu_last_stderr(), "outputs.per_document_dir lies inside input folder"));
    /* an output folder that cannot be created: 73, as run gives it */
    tu_write_file(tu_tmp("job/afile"), "x", 1);
    char *noout = edit("  jsonl: out/results.jsonl\n", "  jsonl: afile/out/results.jsonl\n");
    tu_write_file(tu_tmp("job/noout.yaml"), noout, strlen(noout));
    free(noout);
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/noout.yaml")), 73);
    assert_non_null(strstr(tu_last_stderr(), "is not a folder"));
    char *noin = edit("  - path: corpus\n", "  - path: nowhere\n");
    tu_write_file(tu_tmp("job/noin.yaml"), noin, strlen(noin));
    free(noin);
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/noin.yaml")), 66);
    assert_int_equal(tu_run(NULL, "validate '%s'", tu_tmp("job/missing.yaml")), 66);
    assert_int_equal(tu_run(NULL, "validate"), 64);
#ifndef _WIN32
    /* a FIFO named as the job file is refused at once, not read forever (a hang ends at the
     * test's timeout) */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "mkfifo '%s'", tu_tmp("job/fifo.yaml"));
    assert_int_equal(system(cmd), 0);
    const int rc = tu_run(NULL, "validate '%s'", tu_tmp("job/fifo.yaml"));
    assert_true(rc == 65 || rc == 66);
    assert_non_null(strstr(tu_last_stderr(), "not a regular file"));
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_job_parses_with_defaults),
        cmocka_unit_test(test_bad_jobs_report_file_line_col),
        cmocka_unit_test(test_hostile_yaml_is_refused),
        cmocka_unit_test(test_environment_variables_in_values),
        cmocka_unit_test(test_embed_task),
        cmocka_unit_test(test_every_schema_key_is_documented),
        cmocka_unit_test(test_validate_command_exit_codes),
    };
    return cmocka_run_group_tests_name("job", tests, NULL, NULL);
}
