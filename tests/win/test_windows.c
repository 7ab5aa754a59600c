/*
 * test_windows.c - docpipe.exe end to end on Windows (or under wine): what the POSIX-shell suites
 * (tests/e2e) check elsewhere, driven with Win32 calls.
 *
 *   - a job over documents with Windows names (non-ASCII, reserved names such as CON and
 *     aux.txt, a trailing dot), its paths written the Windows way (C:\...\in, backslashes);
 *   - resume after the process is ended by TerminateProcess at random moments: every document
 *     answered exactly once, with the texts of an uninterrupted run;
 *   - the job lock: a second run of a job that is running exits 75, naming the holder;
 *   - the platform layer itself on those names (create, list, stat, replace, map).
 */
#include "testutil.h"

#include "platform.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

static const char *g_model;

/* A run of docpipe.exe that the test can end: CreateProcessW, no console of its own. */
typedef struct child {
    PROCESS_INFORMATION pi;
} child;

static wchar_t *wide(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, 0, s, -1, NULL, 0);
    wchar_t *w = malloc((size_t)n * sizeof(wchar_t));
    MultiByteToWideChar(CP_UTF8, 0, s, -1, w, n);
    return w;
}

static void start(child *c, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "\"%s\" %s", DP_BINARY, args);
    wchar_t *w = wide(cmd);
    STARTUPINFOW si;
    memset(&si, 0, sizeof(si));
    si.cb = sizeof(si);
    /* no console and no handles: its output goes nowhere, the test reads the files (and under
     * wine no console host is left holding ctest's pipe) */
    BOOL ok = CreateProcessW(NULL, w, NULL, NULL, FALSE, DETACHED_PROCESS, NULL, NULL, &si, &c->pi);
    const DWORD e = GetLastError();
    free(w);
    if (!ok) fail_msg("CreateProcessW %s: error %lu", cmd, (unsigned long)e);
    CloseHandle(c->pi.hThread);
}

static int finish(child *c) {
    WaitForSingleObject(c->pi.hProcess, INFINITE);
    DWORD code = 0;
    GetExitCodeProcess(c->pi.hProcess, &code);
    CloseHandle(c->pi.hProcess);
    return (int)code;
}

/* Ends the run as a crash or a power cut would (no handler runs); true when it was still
 * running. */
static bool terminate(child *c) {
    const bool running = WaitForSingleObject(c->pi.hProcess, 0) == WAIT_TIMEOUT;
    TerminateProcess(c->pi.hProcess, 137);
    finish(c);
    return running;
}

static bool under_wine(void) {
    HMODULE nt = GetModuleHandleW(L"ntdll.dll");
    return nt && GetProcAddress(nt, "wine_get_version");
}

static void put(const char *path, const char *text) { tu_write_file(path, text, strlen(text)); }

/* The documents: ordinary, non-ASCII, reserved and trailing-dot names. */
static const char *const doc_names[] = {
    "a.txt", "na\xc3\xafve r\xc3\xa9sum\xc3\xa9.txt", "\xe6\x8a\xa5\xe5\x91\x8a.md", "aux.txt", "CON.txt", "notes..txt",
    "sub/deeper/b.txt",
};
#define N_DOCS (sizeof(doc_names) / sizeof(doc_names[0]))

/* A job folder d with in/ holding the documents and job.yaml naming it with backslashes and
 * an absolute drive path (the way a Windows user writes it). */
static void make_job(const char *d) {
    char p[1024];
    snprintf(p, sizeof(p), "%s/in/sub/deeper", d);
    dp_err err = {0};
    assert_int_equal(dp_mkdir_p(p, &err), DP_OK);
    for (size_t i = 0; i < N_DOCS; i++) {
        snprintf(p, sizeof(p), "%s/in/%s", d, doc_names[i]);
        char text[256];
        snprintf(text, sizeof(text), "Document %zu. It is about the weather and trains.\nA second line.\n", i);
        put(p, text);
    }
    char in_win[1024], model_win[1024], job[4096];
    snprintf(in_win, sizeof(in_win), "%s\\in", d);
    for (char *c = in_win; *c; c++)
        if (*c == '/') *c = '\\';
    snprintf(model_win, sizeof(model_win), "%s", g_model);
    for (char *c = model_win; *c; c++)
        if (*c == '/') *c = '\\';
    snprintf(job, sizeof(job),
             "model:\n  path: %s\n  context: 256\n  threads: 1\n  max_sequences: 2\n"
             "inputs:\n  - path: %s\n    include: [\"**/*.txt\", \"**/*.md\"]\n"
             "prompts:\n  template: \"Summarize: {{content}}\"\n"
             "generation:\n  max_tokens: 8\n  temperature: 0\n"
             "outputs:\n  jsonl: out\\results.jsonl\n"
             "state_dir: state\n",
             model_win, in_win);
    snprintf(p, sizeof(p), "%s/job.yaml", d);
    put(p, job);
}

/* custom_id -> content of every record in path; fails on a duplicate. */
static json_t *answers(const char *path) {
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(path, 1 << 26, &data, &len, &err), DP_OK);
    json_t *m = json_object();
    for (char *line = data, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *r = json_loads(line, 0, &je);
        if (!r) fail_msg("%s: a line that is not JSON: %.80s", path, line);
        const char *id = json_string_value(json_object_get(r, "custom_id"));
        json_t *content = json_object_get(
            json_object_get(json_array_get(json_object_get(json_object_get(json_object_get(r, "response"), "body"),
                                                           "choices"),
                                           0),
                            "message"),
            "content");
        assert_non_null(id);
        if (json_object_get(m, id)) fail_msg("%s: %s answered twice", path, id);
        json_object_set(m, id, content ? content : json_null());
        json_decref(r);
    }
    free(data);
    return m;
}

static void test_platform_windows_names(void **state) {
    (void)state;
    dp_err err = {0};
    char d[1024], p[1024], q[1024];
    snprintf(d, sizeof(d), "%s/names \xc3\xa9\xe6\x96\x87", tu_tmpdir());
    assert_int_equal(dp_mkdir_p(d, &err), DP_OK);
    const char *names[] = {"CON", "aux.txt", "trailing.", "\xf0\x9f\x93\x84 emoji.txt", "LPT1.log"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s", d, names[i]);
        dp_file f;
        assert_int_equal(dp_file_open(&f, p, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_TRUNC, &err), DP_OK);
        assert_int_equal(dp_file_write(&f, names[i], strlen(names[i]), &err), DP_OK);
        assert_int_equal(dp_file_datasync(&f, &err), DP_OK);
        assert_int_equal(dp_file_close(&f, &err), DP_OK);
        char *back = NULL;
        size_t n = 0;
        assert_int_equal(dp_file_read_all(p, 1024, &back, &n, &err), DP_OK);
        assert_string_equal(back, names[i]); /* the file, not a device */
        free(back);
        dp_stat_info si;
        assert_int_equal(dp_stat(p, true, &si, &err), DP_OK);
        assert_int_equal(si.kind, DP_KIND_FILE);
        assert_int_equal(si.size, strlen(names[i]));
    }
    char **list = NULL;
    size_t n = 0;
    assert_int_equal(dp_dir_list(d, &list, &n, &err), DP_OK);
    assert_int_equal(n, 5);
    /* byte-wise order of the UTF-8 names */
    assert_string_equal(list[0], "CON");
    assert_string_equal(list[1], "LPT1.log");
    assert_string_equal(list[2], "aux.txt");
    assert_string_equal(list[3], "trailing.");
    assert_string_equal(list[4], "\xf0\x9f\x93\x84 emoji.txt");
    free(list);
    /* backslashes and forward slashes name the same file; the resolved form uses '/' */
    snprintf(p, sizeof(p), "%s\\aux.txt", d);
    char *res = NULL;
    assert_int_equal(dp_path_resolve(p, &res, &err), DP_OK);
    assert_null(strchr(res, '\\'));
    assert_true(dp_path_is_absolute(res));
    assert_non_null(strstr(res, "aux.txt"));
    free(res);
    /* an atomic replace; on Windows itself also over a file another handle holds open
     * (FILE_SHARE_DELETE), which wine does not allow */
    snprintf(p, sizeof(p), "%s/new.tmp", d);
    snprintf(q, sizeof(q), "%s/aux.txt", d);
    put(p, "replaced");
    dp_file held = {.handle = -1};
    if (!under_wine()) assert_int_equal(dp_file_open(&held, q, DP_FILE_READ, &err), DP_OK);
    if (dp_rename(p, q, &err)) fail_msg("%s", err.msg);
    dp_file_close(&held, NULL);
    char *back = NULL;
    assert_int_equal(dp_file_read_all(q, 1024, &back, &n, &err), DP_OK);
    assert_string_equal(back, "replaced");
    free(back);
    /* appends go to the end, a truncate moves it */
    snprintf(p, sizeof(p), "%s/log.jsonl", d);
    dp_file f;
    assert_int_equal(dp_file_open(&f, p, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_APPEND, &err), DP_OK);
    assert_int_equal(dp_file_write(&f, "one\n", 4, &err), DP_OK);
    assert_int_equal(dp_file_write(&f, "two\n", 4, &err), DP_OK);
    assert_int_equal(dp_file_truncate(&f, 4, &err), DP_OK);
    assert_int_equal(dp_file_write(&f, "three\n", 6, &err), DP_OK);
    dp_file_close(&f, NULL);
    assert_int_equal(dp_file_read_all(p, 1024, &back, &n, &err), DP_OK);
    assert_string_equal(back, "one\nthree\n");
    free(back);
    /* a map of a file with a non-ASCII name */
    dp_map m;
    snprintf(p, sizeof(p), "%s/\xf0\x9f\x93\x84 emoji.txt", d);
    assert_int_equal(dp_map_open(&m, p, &err), DP_OK);
    assert_int_equal(m.size, strlen("\xf0\x9f\x93\x84 emoji.txt"));
    assert_memory_equal(m.data, "\xf0\x9f\x93\x84", 4);
    dp_map_close(&m);
    /* paths past MAX_PATH (260): created, written, listed and read back */
    snprintf(p, sizeof(p), "%s", d);
    for (int i = 0; i < 8; i++) {
        const size_t at = strlen(p);
        snprintf(p + at, sizeof(p) - at, "/%s-%d", "a-rather-long-folder-name-for-the-test", i);
    }
    assert_true(strlen(p) > 300);
    assert_int_equal(dp_mkdir_p(p, &err), DP_OK);
    snprintf(q, sizeof(q), "%s/deep.txt", p);
    put(q, "deep");
    assert_int_equal(dp_file_read_all(q, 1024, &back, &n, &err), DP_OK);
    assert_string_equal(back, "deep");
    free(back);
    assert_int_equal(dp_dir_list(p, &list, &n, &err), DP_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0], "deep.txt");
    free(list);
    /* folder parts: drive roots stay roots */
    char out[64];
    dp_path_dir("C:\\a\\b.txt", out, sizeof(out));
    assert_string_equal(out, "C:\\a");
    dp_path_dir("C:/b.txt", out, sizeof(out));
    assert_string_equal(out, "C:/");
    assert_true(dp_path_is_absolute("C:\\x") && dp_path_is_absolute("//server/share/x"));
    assert_false(dp_path_is_absolute("x\\y"));
    /* the lock: a second taker in this process is refused too (LockFileEx is per handle) */
    snprintf(p, sizeof(p), "%s/job.lock", d);
    dp_file l1, l2;
    assert_int_equal(dp_lock_acquire(&l1, p, &err), DP_OK);
    assert_int_equal(dp_lock_write_note(&l1, "pid 42\n", &err), DP_OK);
    assert_int_equal(dp_lock_acquire(&l2, p, &err), DP_EBUSY);
    char note[64];
    dp_lock_read_note(p, note, sizeof(note));
    assert_string_equal(note, "pid 42\n"); /* readable while held */
    dp_lock_release(&l1);
    assert_int_equal(dp_lock_acquire(&l2, p, &err), DP_OK);
    dp_lock_release(&l2);
}

static void test_run_windows_paths(void **state) {
    (void)state;
    char d[1024], p[1024];
    snprintf(d, sizeof(d), "%s/run \xc3\xa9t\xc3\xa9", tu_tmpdir());
    make_job(d);
    snprintf(p, sizeof(p), "%s/job.yaml", d);
    /* the job path given with backslashes */
    char pw[1024];
    snprintf(pw, sizeof(pw), "%s", p);
    for (char *c = pw; *c; c++)
        if (*c == '/') *c = '\\';
    char *out = NULL;
    int rc = tu_run(&out, "validate '%s'", pw);
    if (rc != 0) fail_msg("validate: %d: %s", rc, tu_last_stderr());
    free(out);
    rc = tu_run(NULL, "run '%s'", pw);
    if (rc != 0) fail_msg("run: %d: %s", rc, tu_last_stderr());
    snprintf(p, sizeof(p), "%s/out/results.jsonl", d);
    json_t *a = answers(p);
    assert_int_equal(json_object_size(a), N_DOCS);
    json_decref(a);
    /* every document by its name, '/'-separated under the input folder as written */
    char *data = NULL;
    size_t len = 0;
    dp_err err = {0};
    assert_int_equal(dp_file_read_all(p, 1 << 24, &data, &len, &err), DP_OK);
    for (size_t i = 0; i < N_DOCS; i++) {
        char want[256];
        snprintf(want, sizeof(want), "/%s\"", doc_names[i]);
        if (!strstr(data, want)) fail_msg("no record names %s", doc_names[i]);
    }
    assert_null(strstr(data, "\r\n")); /* JSONL lines end in LF on Windows too */
    free(data);
    /* a second run: nothing changed, nothing to do */
    snprintf(p, sizeof(p), "%s/job.yaml", d);
    rc = tu_run(NULL, "run '%s'", p);
    if (rc != 0) fail_msg("second run: %d: %s", rc, tu_last_stderr());
    assert_non_null(strstr(tu_last_stderr(), "skipped"));
}

static void test_resume_after_terminate(void **state) {
    (void)state;
    char d[1024], job[1024], gold[1024], p[1024];
    snprintf(d, sizeof(d), "%s/resume", tu_tmpdir());
    make_job(d);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    /* the uninterrupted answers, and how long a whole run takes (the kills fall inside it) */
    const uint64_t t0 = dp_time_ns();
    int rc = tu_run(NULL, "run '%s'", job);
    const DWORD run_ms = (DWORD)((dp_time_ns() - t0) / 1000000) + 1;
    if (rc != 0) fail_msg("golden run: %d: %s", rc, tu_last_stderr());
    snprintf(gold, sizeof(gold), "%s/out/results.jsonl", d);
    json_t *want = answers(gold);
    assert_int_equal(json_object_size(want), N_DOCS);
    const int trials = getenv("DOCPIPE_TRIALS") ? atoi(getenv("DOCPIPE_TRIALS")) : 6;
    uint64_t seed = 0x5eed;
    int killed = 0;
    for (int t = 0; t < trials; t++) {
        snprintf(p, sizeof(p), "%s/out", d);
        tu_rm_rf(p);
        snprintf(p, sizeof(p), "%s/state", d);
        tu_rm_rf(p);
        /* up to three terminations per trial, at random moments, then a run to the end */
        int runs = 0;
        for (;; runs++) {
            char args[1100];
            snprintf(args, sizeof(args), "run \"%s\"", job);
            child c;
            start(&c, args);
            if (runs < 3) {
                Sleep((DWORD)(tu_rand(&seed) % run_ms));
                if (terminate(&c)) {
                    killed++;
                    continue;
                }
                continue; /* it had finished: one more run checks there is nothing left */
            }
            rc = finish(&c);
            if (rc != 0) fail_msg("trial %d: the final run exited %d", t, rc);
            break;
        }
        json_t *got = answers(gold); /* (fails on a duplicate) */
        if (!json_equal(got, want)) {
            char *a = json_dumps(got, JSON_SORT_KEYS), *b = json_dumps(want, JSON_SORT_KEYS);
            fail_msg("trial %d: the resumed answers differ:\n%s\nwant\n%s", t, a, b);
        }
        json_decref(got);
    }
    json_decref(want);
    print_message("[   INFO   ] %d trials, %d runs ended by TerminateProcess while working\n", trials, killed);
}

static void test_job_lock(void **state) {
    (void)state;
    char d[1024], job[1024], pause[1024];
    snprintf(d, sizeof(d), "%s/lock", tu_tmpdir());
    make_job(d);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    snprintf(pause, sizeof(pause), "%s/paused", d);
    /* the first run holds the lock and waits after listing until the pause file is gone */
    assert_int_equal(_putenv_s("DOCPIPE_PAUSE_AFTER_LISTING", pause), 0);
    char args[1100];
    snprintf(args, sizeof(args), "run \"%s\"", job);
    child c;
    start(&c, args);
    assert_int_equal(_putenv_s("DOCPIPE_PAUSE_AFTER_LISTING", ""), 0);
    for (int i = 0; i < 6000 && !dp_path_exists(pause); i++) Sleep(10);
    assert_true(dp_path_exists(pause));
    int rc = tu_run(NULL, "run '%s'", job);
    assert_int_equal(rc, 75);
    assert_non_null(strstr(tu_last_stderr(), "already running"));
    assert_non_null(strstr(tu_last_stderr(), "pid"));
    dp_remove(pause, NULL);
    assert_int_equal(finish(&c), 0);
    /* released: a run after it has nothing to do */
    assert_int_equal(tu_run(NULL, "run '%s'", job), 0);
}

/* Ctrl-Break on the console a run shares is a stop request (SIGTERM's twin): it commits what is
 * done and exits 75, and the next run completes the job. */
static void test_ctrl_break_stops_resumably(void **state) {
    (void)state;
    char d[1024], job[1024], pause[1024], cmd[1200];
    snprintf(d, sizeof(d), "%s/break", tu_tmpdir());
    make_job(d);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    snprintf(pause, sizeof(pause), "%s/paused", d);
    if (!GetConsoleWindow() && !AllocConsole() && GetLastError() != ERROR_ACCESS_DENIED) {
        print_message("[  SKIPPED ] no console to send Ctrl-Break through\n");
        skip();
    }
    assert_int_equal(_putenv_s("DOCPIPE_PAUSE_AFTER_LISTING", pause), 0);
    snprintf(cmd, sizeof(cmd), "\"%s\" run \"%s\"", DP_BINARY, job);
    wchar_t *w = wide(cmd);
    STARTUPINFOW si;
    memset(&si, 0, sizeof(si));
    si.cb = sizeof(si);
    PROCESS_INFORMATION pi;
    BOOL ok = CreateProcessW(NULL, w, NULL, NULL, FALSE, CREATE_NEW_PROCESS_GROUP, NULL, NULL, &si, &pi);
    free(w);
    assert_int_equal(_putenv_s("DOCPIPE_PAUSE_AFTER_LISTING", ""), 0);
    assert_true(ok);
    CloseHandle(pi.hThread);
    for (int i = 0; i < 6000 && !dp_path_exists(pause); i++) Sleep(10);
    assert_true(dp_path_exists(pause));
    const BOOL sent = GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pi.dwProcessId);
    const bool stopped = sent && WaitForSingleObject(pi.hProcess, 20000) == WAIT_OBJECT_0;
    dp_remove(pause, NULL);
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 0;
    GetExitCodeProcess(pi.hProcess, &code);
    CloseHandle(pi.hProcess);
    if (!stopped) {
        print_message("[  SKIPPED ] Ctrl-Break was not delivered (%s); the run finished with %lu\n",
                      sent ? "no stop within 20 s" : "GenerateConsoleCtrlEvent failed", (unsigned long)code);
        skip();
    }
    assert_int_equal(code, 75);
    /* the next run completes the job */
    assert_int_equal(tu_run(NULL, "run '%s'", job), 0);
    char res[1100];
    snprintf(res, sizeof(res), "%s/out/results.jsonl", d);
    json_t *a = answers(res);
    assert_int_equal(json_object_size(a), N_DOCS);
    json_decref(a);
}

static int setup(void **state) {
    (void)state;
    static char model[1024];
    snprintf(model, sizeof(model), "%s/model.gguf", tu_tmpdir());
    int rc = tu_run(NULL, "make-test-model --arch qwen3 --hidden 64 --ffn 128 --layers 2 --head-dim 32 --heads 2 "
                    "--kv-heads 1 --out '%s'", model);
    if (rc != 0) {
        fprintf(stderr, "make-test-model: %d: %s\n", rc, tu_last_stderr());
        return -1;
    }
    g_model = model;
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_platform_windows_names),
        cmocka_unit_test(test_run_windows_paths),
        cmocka_unit_test(test_resume_after_terminate),
        cmocka_unit_test(test_job_lock),
        cmocka_unit_test(test_ctrl_break_stops_resumably),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
