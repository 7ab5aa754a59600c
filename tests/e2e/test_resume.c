/*
 * test_resume.c - exactly-once under crashes, signals, locks and full disks (issue 8,
 * docs/testing.md, the crash harness): the real engine with a tiny make-test-model model, compared with one
 * uninterrupted run ("golden").
 *
 *   time mode  kill -9 at random moments (up to 3 times a trial), then run to completion
 *   op mode    DOCPIPE_FAULT=any:K:kill stops the process right before its K-th durable I/O
 *              operation, for every K of the job, so every gap of the commit protocol is hit
 *   signals    SIGTERM, SIGUSR1, and a double SIGINT: exit 75, then a resume completes it
 *   lock       a second run while one runs exits 75 naming its pid; a dead holder never blocks
 *   disk full  a 64 KiB tmpfs (when run as root and mounting is allowed): exit 74 naming the
 *              file, then after space is freed the resume completes correctly
 *
 * Every verify: each line a JSON object ending in a newline, no custom_id twice, the same set
 * of custom_ids with the same text as golden, no *.tmp left, the checkpoint complete and its
 * sizes equal to the files'. Trials: DOCPIPE_TRIALS (default 200; the soak ctest runs 1000);
 * the seed is printed, and DOCPIPE_SEED replays a run.
 */
#include "e2eutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

typedef struct scenario {
    char dir[4096], job[4400], res[4400], err[4400];
    json_t *golden, *golden_err;
    double golden_s;
} scenario;

static scenario g_big, g_small, g_sql, *g_s = &g_big; /* g_s: the scenario verify() and rm_outputs() use */
#define g_dir (g_s->dir)
#define g_job (g_s->job)
#define g_res (g_s->res)
#define g_err (g_s->err)
#define g_golden (g_s->golden)
#define g_golden_err (g_s->golden_err)
#define g_golden_s (g_s->golden_s)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pid_t spawn_run(const char *job, const char *fault, const char *extra) {
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        if (fault) setenv("DOCPIPE_FAULT", fault, 1);
        int fd = open(tu_tmp("child-stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 0), dup2(nul, 1);
        execl(DP_BINARY, "docpipe", "run", job, "--quiet", extra, (char *)NULL);
        _exit(127);
    }
    return p;
}

static int wait_rc(pid_t p) {
    int st;
    while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void rm_outputs(void) { assert_int_equal(e2e_sh("cd '%s' && rm -rf out state", g_dir), 0); }

/* The checks after every trial (docs/testing.md, the crash harness). */
static void verify(const char *what) {
    size_t n = 0;
    json_t *r = e2e_load_records(g_res, &n), *e = e2e_load_records(g_err, NULL);
    json_t *t = e2e_texts(r), *te = e2e_texts(e);
    if (!json_equal(t, g_golden) || !json_equal(te, g_golden_err)) {
        size_t lost = 0, unexpected = 0;
        const char *k;
        json_t *v;
        json_object_foreach(g_golden, k, v) lost += !json_object_get(t, k);
        json_object_foreach(t, k, v) unexpected += !json_object_get(g_golden, k);
        fail_msg("%s: results differ from the uninterrupted run: %zu lost, %zu unexpected, %zu lines (golden %zu)",
                 what, lost, unexpected, n, json_object_size(g_golden));
    }
    if (e2e_sh("test -z \"$(find '%s/out' '%s/state' -name '*.tmp')\"", g_dir, g_dir) != 0)
        fail_msg("%s: a *.tmp file was left behind", what);
    char ck[4400];
    snprintf(ck, sizeof(ck), "%s/state/checkpoint.json", g_dir);
    json_error_t je;
    json_t *c = json_load_file(ck, 0, &je);
    if (!c || !json_is_true(json_object_get(c, "complete"))) fail_msg("%s: the checkpoint does not say complete", what);
    struct stat st;
    stat(g_res, &st);
    json_int_t b = json_integer_value(json_object_get(json_object_get(json_object_get(c, "sinks"), "results"), "bytes"));
    if (b != (json_int_t)st.st_size) fail_msg("%s: checkpoint says %lld bytes, file has %lld", what, (long long)b,
                                             (long long)st.st_size);
    json_decref(c);
    json_decref(r);
    json_decref(e);
    json_decref(t);
    json_decref(te);
}

/* The generation of every scenario: a constrained job (answers drawn within a JSON Schema resume
 * exactly like free ones). */
static const char k_generation[] =
    "generation:\n  max_tokens: 6\n  temperature: 0.7\n  seed: 3\n"
    "  response_format: {type: json_schema, json_schema: {name: s, schema: {type: object, properties: "
    "{s: {enum: [a, b]}, n: {type: integer, minimum: 0, maximum: 9}}, required: [s]}}}\n";

/* n documents: most one chunk, every 10th a few chunks (map-reduce), plus one binary file */
static void make_scenario(scenario *sc, const char *name, int n, const char *more_outputs) {
    g_s = sc;
    snprintf(g_dir, sizeof(g_dir), "%s/%s", tu_tmpdir(), name);
    assert_int_equal(e2e_sh("mkdir -p '%s/in/a' '%s/in/b' && cd '%s/in' && for i in $(seq 1 %d); do "
                            "if [ $((i %% 10)) = 0 ]; then for k in $(seq 1 40); do printf 'part %%s of doc %%s. ' $k $i; "
                            "done > \"b/doc$i.md\"; else printf 'doc %%s: short note.' $i > \"a/doc$i.txt\"; fi; done && "
                            "printf 'x\\000y' > a/binary.txt", g_dir, g_dir, g_dir, n), 0);
    snprintf(g_job, sizeof(g_job), "%s/job.yaml", g_dir);
    char extra[1024];
    snprintf(extra, sizeof(extra), "prompts:\n  system: Summarize.\n  template: \"{{filename}} {{chunk_index}}/{{chunk_count}}: {{content}}\"\n"
             "%s"
             "chunking:\n  overlap: 8\noutputs:\n  jsonl: out/r.jsonl\n%s", k_generation, more_outputs);
    e2e_write_job(g_job, e2e_model("qwen35"), "in", extra);
    snprintf(g_res, sizeof(g_res), "%s/out/r.jsonl", g_dir);
    snprintf(g_err, sizeof(g_err), "%s/out/errors.jsonl", g_dir);
    rm_outputs();
    double t0 = now_s();
    int rc = wait_rc(spawn_run(g_job, NULL, NULL));
    g_golden_s = now_s() - t0;
    if (rc != 3) fail_msg("golden run: exit %d (expected 3: one binary file)", rc);
    json_t *r = e2e_load_records(g_res, NULL), *e = e2e_load_records(g_err, NULL);
    g_golden = e2e_texts(r);
    g_golden_err = e2e_texts(e);
    json_decref(r);
    json_decref(e);
    print_message("golden %s: %zu results, %zu errors in %.2f s\n", name, json_object_size(g_golden),
                  json_object_size(g_golden_err), g_golden_s);
}

static int setup(void **state) {
    (void)state;
    setenv("DOCPIPE_COMMIT_RECORDS", "8", 1); /* many commits: kills land between them */
    make_scenario(&g_sql, "crash-sqlite", 12, "  sqlite: out/kb.sqlite\n");
    make_scenario(&g_small, "crash-small", 12, "");
    make_scenario(&g_big, "crash", 200, "");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    scenario *all[3] = {&g_big, &g_small, &g_sql};
    for (int i = 0; i < 3; i++) {
        json_decref(all[i]->golden);
        json_decref(all[i]->golden_err);
    }
    return 0;
}

static void test_kill9_random(void **state) {
    (void)state;
    g_s = &g_big;
    const char *tr = getenv("DOCPIPE_TRIALS"), *sd = getenv("DOCPIPE_SEED");
    const int trials = tr && atoi(tr) > 0 ? atoi(tr) : 200;
    uint64_t seed = sd ? strtoull(sd, NULL, 10) : (uint64_t)time(NULL);
    print_message("kill -9 harness: %d trials, DOCPIPE_SEED=%llu\n", trials, (unsigned long long)seed);
    int kills = 0, mid_commit = 0;
    for (int t = 0; t < trials; t++) {
        rm_outputs();
        const int n_kills = 1 + (int)(tu_rand(&seed) % 3);
        for (int k = 0; k < n_kills; k++) {
            const double delay = g_golden_s * 1.2 * (double)(tu_rand(&seed) % 1000) / 1000.0;
            pid_t p = spawn_run(g_job, NULL, NULL);
            struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
            nanosleep(&ts, NULL);
            kill(p, SIGKILL);
            int rc = wait_rc(p);
            if (rc == 128 + SIGKILL) kills++;
            else if (rc != 3) fail_msg("trial %d: a run exited %d before the kill", t, rc);
            mid_commit += e2e_exists(g_res) && rc == 128 + SIGKILL;
        }
        int rc = wait_rc(spawn_run(g_job, NULL, NULL));
        if (rc != 3) fail_msg("trial %d (seed %llu): the resume exited %d", t, (unsigned long long)seed, rc);
        char what[64];
        snprintf(what, sizeof(what), "trial %d", t);
        verify(what);
    }
    print_message("%d kills (%d of them with outputs on disk), all resumed to the golden output\n", kills, mid_commit);
}

static void test_kill_at_every_io_op(void **state) {
    (void)state;
    g_s = &g_small; /* every operation of a small job (a few hundred) */
    setenv("DOCPIPE_COMMIT_RECORDS", "2", 1);
    /* DOCPIPE_OP_STRIDE: every n-th operation only (the sanitizer pass of CI; step 3 does all) */
    const char *sv = getenv("DOCPIPE_OP_STRIDE");
    const int stride = sv && atoi(sv) > 0 ? atoi(sv) : 1;
    int k = 1;
    for (;; k += stride) {
        rm_outputs();
        char fault[64];
        snprintf(fault, sizeof(fault), "any:%d:kill", k);
        int rc = wait_rc(spawn_run(g_job, fault, NULL));
        if (rc == 3) break; /* the run has fewer than k operations */
        if (rc != 128 + SIGKILL) fail_msg("op %d: exit %d", k, rc);
        /* a second crash inside the recovery itself, at its own first operations */
        if (k % 7 == 0) {
            snprintf(fault, sizeof(fault), "any:%d:kill", 1 + k % 5);
            rc = wait_rc(spawn_run(g_job, fault, NULL));
            if (rc != 128 + SIGKILL && rc != 3) fail_msg("op %d, crash in recovery: exit %d", k, rc);
        }
        rc = wait_rc(spawn_run(g_job, NULL, NULL));
        if (rc != 3) fail_msg("op %d: the resume exited %d", k, rc);
        char what[64];
        snprintf(what, sizeof(what), "kill before I/O op %d", k);
        verify(what);
    }
    print_message("killed before each of %d I/O operations (stride %d); every resume matched golden\n", k - 1, stride);
    assert_true(k > 20);
    setenv("DOCPIPE_COMMIT_RECORDS", "8", 1);
    g_s = &g_big;
}

/* ---- outputs.sqlite ----------------------------------------------------------------------- */

/* The paths of the documents a checkpoint (JSON text) covers: its ledger's committed lines. */
static json_t *committed_paths(const char *ck_json) {
    json_error_t je;
    json_t *ck = json_loads(ck_json, 0, &je), *paths = json_object();
    assert_non_null(ck);
    const json_int_t n = json_integer_value(json_object_get(json_object_get(json_object_get(ck, "sinks"), "ledger"),
                                                            "bytes"));
    char lp[4400];
    snprintf(lp, sizeof(lp), "%s/state/ledger.jsonl", g_dir);
    FILE *f = fopen(lp, "rb");
    char *buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    if (n) {
        assert_non_null(f);
        assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    }
    if (f) fclose(f);
    for (char *line = buf, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        assert_non_null(nl); /* committed bytes end with a whole line */
        *nl = 0;
        json_t *o = json_loads(line, 0, &je);
        assert_non_null(o);
        json_object_set_new(paths, json_string_value(json_object_get(o, "path")), json_true());
        json_decref(o);
    }
    free(buf);
    json_decref(ck);
    return paths;
}

/* After any crash: the database holds exactly the documents its own commit covers (whole: every
 * one with its chunks), and that commit is checkpoint.json's or the one after it. */
static void verify_db_committed(const char *what) {
    char db_path[4400];
    snprintf(db_path, sizeof(db_path), "%s/out/kb.sqlite", g_dir);
    if (!e2e_exists(db_path)) return; /* killed before the database was created */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    char *ck = NULL;
    if (sqlite3_prepare_v2(db, "SELECT value FROM docpipe_meta WHERE key = 'checkpoint'", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        ck = strdup((const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    json_t *want = ck ? committed_paths(ck) : json_object(), *have = json_object();
    /* killed before the schema's transaction committed: a database without tables, which the
     * next run creates (its documents are then none) */
    const int prep = sqlite3_prepare_v2(db, "SELECT path, (SELECT count(*) FROM chunks WHERE document_id = d.id), "
                                            "(SELECT count(*) FROM results WHERE document_id = d.id) FROM documents d",
                                        -1, &q, NULL);
    if (prep != SQLITE_OK && strstr(sqlite3_errmsg(db), "no such table") == NULL)
        fail_msg("%s: %s", what, sqlite3_errmsg(db));
    while (prep == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(q, 0);
        if (sqlite3_column_int(q, 2) == 0 && !strstr(path, "binary"))
            fail_msg("%s: %s is in the database without its results", what, path);
        json_object_set_new(have, path, json_true());
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (!json_equal(want, have))
        fail_msg("%s: the database holds %zu documents, its commit covers %zu", what, json_object_size(have),
                 json_object_size(want));
    if (ck) {
        char cp[4400];
        snprintf(cp, sizeof(cp), "%s/state/checkpoint.json", g_dir);
        json_error_t je;
        json_t *a = json_loads(ck, 0, &je), *b = json_load_file(cp, 0, &je);
        const json_int_t da = json_integer_value(json_object_get(a, "commits")),
                         db_ = json_integer_value(json_object_get(b, "commits"));
        if (da != db_ && da != db_ + 1)
            fail_msg("%s: database commit %lld, checkpoint.json commit %lld", what, (long long)da, (long long)db_);
        json_decref(a);
        json_decref(b);
    }
    json_decref(want);
    json_decref(have);
    free(ck);
}

/* After the resume: every golden result is in the database once, with its text. */
static void verify_db_complete(const char *what) {
    char db_path[4400];
    snprintf(db_path, sizeof(db_path), "%s/out/kb.sqlite", g_dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT custom_id, content FROM results WHERE error IS NULL", -1, &q, NULL),
                     SQLITE_OK);
    json_t *t = json_object();
    while (sqlite3_step(q) == SQLITE_ROW)
        json_object_set_new(t, (const char *)sqlite3_column_text(q, 0), json_string((const char *)sqlite3_column_text(q, 1)));
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (!json_equal(t, g_golden))
        fail_msg("%s: the database holds %zu results, golden %zu (or other texts)", what, json_object_size(t),
                 json_object_size(g_golden));
    json_decref(t);
}

/* The kill -9 harness for outputs.sqlite: a kill before every durable operation, the database's
 * commit among them (and a few at random moments); after each, the database holds exactly what its
 * commit covers, and the resume completes it to golden. */
static void test_sqlite_exactly_once(void **state) {
    (void)state;
    g_s = &g_sql;
    setenv("DOCPIPE_COMMIT_RECORDS", "2", 1);
    const char *sv = getenv("DOCPIPE_OP_STRIDE");
    const int stride = sv && atoi(sv) > 0 ? atoi(sv) : 1;
    verify_db_complete("golden");
    int k = 1;
    for (;; k += stride) {
        rm_outputs();
        char fault[64], what[64];
        snprintf(fault, sizeof(fault), "any:%d:kill", k);
        int rc = wait_rc(spawn_run(g_job, fault, NULL));
        if (rc == 3) break;
        if (rc != 128 + SIGKILL) fail_msg("op %d: exit %d", k, rc);
        snprintf(what, sizeof(what), "sqlite: kill before I/O op %d", k);
        verify_db_committed(what);
        rc = wait_rc(spawn_run(g_job, NULL, NULL));
        if (rc != 3) fail_msg("%s: the resume exited %d", what, rc);
        verify(what);
        verify_db_complete(what);
    }
    uint64_t seed = (uint64_t)time(NULL);
    for (int t = 0; t < 10; t++) {
        rm_outputs();
        const double delay = g_golden_s * (double)(tu_rand(&seed) % 1000) / 1000.0;
        pid_t p = spawn_run(g_job, NULL, NULL);
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(p, SIGKILL);
        wait_rc(p);
        char what[64];
        snprintf(what, sizeof(what), "sqlite: random kill %d", t);
        verify_db_committed(what);
        assert_int_equal(wait_rc(spawn_run(g_job, NULL, NULL)), 3);
        verify(what);
        verify_db_complete(what);
    }
    /* a full disk at each sync in turn (the database's commit among them): exit 74, nothing lost */
    int full = 1;
    for (;; full++) {
        rm_outputs();
        char fault[64], what[64];
        snprintf(fault, sizeof(fault), "sync:%d:ENOSPC", full);
        int rc = wait_rc(spawn_run(g_job, fault, NULL));
        if (rc == 3) break;
        if (rc != 74) fail_msg("disk full at sync %d: exit %d, expected 74", full, rc);
        snprintf(what, sizeof(what), "sqlite: disk full at sync %d", full);
        verify_db_committed(what);
        if ((rc = wait_rc(spawn_run(g_job, NULL, NULL))) != 3) fail_msg("%s: the resume exited %d", what, rc);
        verify(what);
        verify_db_complete(what);
    }
    print_message("sqlite: killed before each of %d I/O operations and 10 times at random, the disk full at each of %d "
                  "syncs; the database always held exactly its committed documents\n", k - 1, full - 1);
    setenv("DOCPIPE_COMMIT_RECORDS", "8", 1);
    g_s = &g_big;
}

static void signal_trial(int sig, bool twice) {
    /* the signal must land while the run works: if the run was already done (a loaded machine
     * makes timing loose), try again earlier */
    double delay = g_golden_s * 0.4;
    int rc = 3;
    for (int attempt = 0; attempt < 4 && rc == 3; attempt++, delay /= 2) {
        rm_outputs();
        pid_t p = spawn_run(g_job, NULL, NULL);
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(p, sig);
        if (twice) {
            struct timespec s2 = {0, 2000000};
            nanosleep(&s2, NULL);
            kill(p, sig);
        }
        rc = wait_rc(p);
    }
    if (rc != 75) fail_msg("signal %d%s: exit %d, expected 75", sig, twice ? " twice" : "", rc);
    if (!twice) assert_int_equal(e2e_sh("grep -q 'run the job again' '%s'", tu_tmp("child-stderr.txt")), 0);
    rc = wait_rc(spawn_run(g_job, NULL, NULL));
    assert_int_equal(rc, 3);
    verify(twice ? "double SIGINT" : "signal");
}

static void test_signals(void **state) {
    (void)state;
    g_s = &g_big; /* (a failed test before may have left another scenario) */
    signal_trial(SIGTERM, false);
    signal_trial(SIGINT, false);
    signal_trial(SIGUSR1, false);
    signal_trial(SIGINT, true);
}

static void test_lock(void **state) {
    (void)state;
    g_s = &g_big; /* (a failed test before may have left another scenario) */
    rm_outputs();
    pid_t a = spawn_run(g_job, NULL, NULL);
    /* wait until A holds the lock: the state folder has its lock file with A's pid */
    char lock[4400], want[32];
    snprintf(lock, sizeof(lock), "%s/state/job.lock", g_dir);
    snprintf(want, sizeof(want), "pid %d", (int)a);
    for (int i = 0; i < 2000 && e2e_sh("grep -q '%s' '%s' 2>/dev/null", want, lock) != 0; i++) usleep(1000);
    int rc = tu_run(NULL, "run '%s'", g_job);
    if (rc == 75) {
        if (!strstr(tu_last_stderr(), want)) fail_msg("the lock message does not name pid %d: %s", (int)a, tu_last_stderr());
    } else if (rc != 3) {
        fail_msg("second run: exit %d", rc); /* 3: A had already finished */
    }
    kill(a, SIGKILL);
    wait_rc(a);
    /* the dead holder's lock does not block */
    rc = wait_rc(spawn_run(g_job, NULL, NULL));
    assert_int_equal(rc, 3);
    verify("after a dead lock holder");
}

static void test_disk_full_tmpfs(void **state) {
    (void)state;
    g_s = &g_big; /* (a failed test before may have left another scenario) */
    char mnt[4400];
    snprintf(mnt, sizeof(mnt), "%.4090s/small", g_dir);
    mkdir(mnt, 0755);
    if (geteuid() != 0 || mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
        print_message("[  SKIPPED ] disk-full on tmpfs needs root and permission to mount (%s); the injected ENOSPC "
                      "test of test_run covers the code path\n", geteuid() ? "not root" : strerror(errno));
        skip();
    }
    char job[4400], res[4400];
    snprintf(job, sizeof(job), "%s/small-job.yaml", g_dir);
    /* results on the 64 KiB tmpfs, state beside the job: the outputs fill up first */
    char extra[1024];
    snprintf(extra, sizeof(extra), "prompts:\n  system: Summarize.\n  template: \"{{filename}} {{chunk_index}}/{{chunk_count}}: "
             "{{content}}\"\n%schunking:\n  overlap: 8\noutputs:\n  jsonl: small/out/r.jsonl\nstate_dir: small-state\n",
             k_generation);
    e2e_write_job(job, e2e_model("qwen35"), "in", extra);
    int rc = tu_run(NULL, "run '%s' --quiet", job);
    if (rc != 74) {
        umount(mnt);
        fail_msg("disk full: exit %d, expected 74: %s", rc, tu_last_stderr());
    }
    assert_non_null(strstr(tu_last_stderr(), "small/out/"));
    /* free space: move the files to a bigger place and resume there */
    assert_int_equal(e2e_sh("cd '%s' && mkdir -p big && cp -a small/out big/ && umount small && rm -rf small && "
                            "mv big small", g_dir), 0);
    rc = tu_run(NULL, "run '%s' --quiet", job);
    assert_int_equal(rc, 3);
    snprintf(res, sizeof(res), "%s/small/out/r.jsonl", g_dir);
    json_t *r = e2e_load_records(res, NULL), *t = e2e_texts(r);
    if (!json_equal(t, g_golden)) fail_msg("after disk full and a resume the results differ from golden");
    json_decref(r);
    json_decref(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_random),
        cmocka_unit_test(test_kill_at_every_io_op),
        cmocka_unit_test(test_sqlite_exactly_once),
        cmocka_unit_test(test_signals),
        cmocka_unit_test(test_lock),
        cmocka_unit_test(test_disk_full_tmpfs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
