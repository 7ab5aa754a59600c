/*
 * test_shard.c - a job as 4 shards in separate processes (issue 11): `plan --shards 4`, the
 * shards started by --shard, by Slurm's array variables and by Kubernetes' JOB_COMPLETION_INDEX,
 * one of them killed -9 and run again, then `merge`: the same records with the same text as a
 * single-process run. A merge with a shard missing exits 75 naming the documents.
 */
#include "e2eutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t spawn(const char *job, const char *shard, const char *env_kv) {
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        if (env_kv) {
            char kv[256];
            snprintf(kv, sizeof(kv), "%s", env_kv);
            for (char *t = strtok(kv, " "); t; t = strtok(NULL, " ")) {
                char *eq = strchr(t, '=');
                *eq = 0;
                setenv(t, eq + 1, 1);
            }
        }
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0), dup2(nul, 1), dup2(nul, 2);
        if (shard) execl(DP_BINARY, "docpipe", "run", job, "--quiet", "--shard", shard, (char *)NULL);
        else execl(DP_BINARY, "docpipe", "run", job, "--quiet", (char *)NULL);
        _exit(127);
    }
    return p;
}

static int wait_rc(pid_t p) {
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static json_t *texts_of(const char *dir) {
    char p[4400];
    snprintf(p, sizeof(p), "%s/out/r.jsonl", dir);
    json_t *r = e2e_load_records(p, NULL), *t = e2e_texts(r);
    snprintf(p, sizeof(p), "%s/out/errors.jsonl", dir);
    json_t *e = e2e_load_records(p, NULL);
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v) json_object_set_new(t, k, json_string("(error)"));
    json_decref(r);
    json_decref(e);
    return t;
}

static void test_four_shards_equal_one_run(void **state) {
    (void)state;
    char d[4096], job[4400];
    snprintf(d, sizeof(d), "%s/shard", tu_tmpdir());
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && for i in $(seq 1 40); do "
                            "if [ $((i %% 8)) = 0 ]; then for k in $(seq 1 30); do printf 'part %%s of %%s. ' $k $i; done "
                            "> \"d$i.md\"; else printf 'note %%s.' $i > \"d$i.txt\"; fi; done && printf 'a\\000b' > bin.txt",
                            d, d), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen35"), "in", "prompts:\n  template: \"{{filename}}: {{content}}\"\n"
                  "generation:\n  max_tokens: 6\n  temperature: 0.8\n  seed: 11\noutputs:\n  jsonl: out/r.jsonl\n");
    /* the single-process run */
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    json_t *single = texts_of(d);
    assert_int_equal(e2e_sh("cd '%s' && mv out out.single && rm -rf state", d), 0);
    /* plan writes the manifest */
    char *out = NULL;
    assert_int_equal(tu_run(&out, "plan '%s' --shards 4 --no-bench", job), 0);
    assert_non_null(strstr(out, "41 documents in 4 shards"));
    free(out);
    /* a run of shard 2 is killed -9 midway (right before its 9th durable write: after its first
     * commits); the merge then finds it incomplete */
    assert_int_equal(wait_rc(spawn(job, "2/4", "DOCPIPE_FAULT=any:9:kill DOCPIPE_COMMIT_RECORDS=1")), 128 + SIGKILL);
    /* the four shards at once: --shard, Slurm's variables (1-based array), Kubernetes' index */
    pid_t a = spawn(job, "0/4", NULL);
    pid_t b = spawn(job, NULL, "SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=4");
    pid_t c = spawn(job, NULL, "JOB_COMPLETION_INDEX=3");
    int rca = wait_rc(a), rcb = wait_rc(b), rcc = wait_rc(c);
    if ((rca != 0 && rca != 3) || (rcb != 0 && rcb != 3) || (rcc != 0 && rcc != 3))
        fail_msg("shards 0, 1, 3 exited %d %d %d", rca, rcb, rcc);
    assert_int_equal(tu_run(NULL, "merge '%s'", job), 75);
    assert_non_null(strstr(tu_last_stderr(), "shard 2"));
    /* status shows each shard: 0, 1 and 3 complete, 2 interrupted with documents pending */
    assert_int_equal(tu_run(&out, "status '%s'", job), 0);
    if (!strstr(out, "sharded: 4 shards") || !strstr(out, "interrupted or running") || strstr(out, "shard 0: 0 documents"))
        fail_msg("status: %s", out);
    free(out);
    /* shard 2 again: it resumes */
    int rc2 = wait_rc(spawn(job, "2/4", NULL));
    if (rc2 != 0 && rc2 != 3) fail_msg("shard 2 rerun exited %d", rc2);
    assert_int_equal(tu_run(&out, "merge '%s'", job), 3); /* the binary file: an error record */
    free(out);
    json_t *merged = texts_of(d);
    if (!json_equal(single, merged)) {
        const char *k;
        json_t *v;
        size_t lost = 0, extra = 0, diff = 0;
        json_object_foreach(single, k, v) {
            json_t *m = json_object_get(merged, k);
            lost += !m;
            diff += m && !json_equal(m, v);
        }
        json_object_foreach(merged, k, v) extra += !json_object_get(single, k);
        fail_msg("sharded + merged differs from one run: %zu lost, %zu extra, %zu different texts", lost, extra, diff);
    }
    /* a shard count that does not match the manifest is refused */
    assert_int_equal(tu_run(NULL, "run '%s' --shard 0/3", job), 78);
    assert_int_equal(tu_run(NULL, "run '%s' --shard 4/4", job), 64);
    json_decref(single);
    json_decref(merged);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_four_shards_equal_one_run)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
