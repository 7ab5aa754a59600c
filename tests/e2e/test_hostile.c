/*
 * test_hostile.c - input folders an attacker controls (not the job file):
 *  - the reader's open refuses what the listing did not see: a FIFO put in a file's place
 *    returns at once instead of blocking, a symbolic link put in its place is not followed, a
 *    file replaced by another (another inode) is refused;
 *  - a job over a folder with an unreadable subfolder, a subfolder without execute permission, a
 *    followed link to a file outside the folder and one to "/" finishes (exit 3) with one error
 *    record for each of them and results for the rest; plan and status list it without crashing.
 *  - a job over a folder that changes while it runs (documents deleted, replaced by FIFOs, by
 *    symbolic links to files outside, by folders) ends, with exactly one record per document
 *    the listing saw;
 *  - a state folder edited or damaged after a commit (the checkpoint's byte counts, a hash in the
 *    ledger, a byte inside the committed gzip results) is refused with exit 65 and nothing is
 *    changed, by run and by status; undoing the damage lets the run go on.
 * Permissions do not bind root, so as root the docpipe commands run as "nobody" (setpriv); where
 * that cannot be done the folder part reports itself skipped.
 */
#include "e2eutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "platform.h"

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_hostile: dp_file_read_doc blocked on a FIFO\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) _exit(2);
    _exit(1);
}

static void test_read_doc_refuses_what_the_listing_did_not_see(void **state) {
    (void)state;
    const char *f = tu_tmp("doc.txt"), *fifo = tu_tmp("fifo.txt"), *link = tu_tmp("link.txt");
    tu_write_file(f, "hello", 5);
    dp_stat_info si;
    dp_err err = {0};
    assert_int_equal(dp_stat(f, true, &si, &err), DP_OK);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(dp_file_read_doc(f, false, &si, 1 << 20, &data, &len, &err), DP_OK);
    assert_int_equal(len, 5);
    free(data);
    /* a FIFO with no writer: open and read would block forever */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(10);
    assert_int_equal(dp_file_read_doc(fifo, false, NULL, 1 << 20, &data, &len, &err), DP_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "FIFO"));
    alarm(0);
    /* a link in the file's place, links not followed */
    assert_int_equal(symlink("/etc/hostname", link), 0);
    assert_int_equal(dp_file_read_doc(link, false, NULL, 1 << 20, &data, &len, &err), DP_EACCES);
    assert_non_null(strstr(err.msg, "symbolic link"));
    /* another file under the listed name */
    assert_int_equal(unlink(f), 0);
    tu_write_file(f, "other", 5);
    dp_status st = dp_file_read_doc(f, false, &si, 1 << 20, &data, &len, &err);
    if (st == DP_OK) free(data); /* (the file system gave the inode back: nothing to tell apart) */
    else {
        assert_int_equal(st, DP_EBUSY);
        assert_non_null(strstr(err.msg, "replaced"));
    }
}

/* A shell prefix that runs docpipe as an unprivileged user when we are root ("" otherwise);
 * NULL when that is not possible here. */
static const char *unprivileged(void) {
    if (geteuid() != 0) return "";
    if (e2e_sh("command -v setpriv >/dev/null 2>&1") != 0) return NULL;
    static const char pre[] = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    if (e2e_sh("%s'%s' --version >/dev/null 2>&1", pre, DP_BINARY) != 0) return NULL; /* binary not reachable */
    return pre;
}

static void test_bad_subfolders_and_links_become_records(void **state) {
    (void)state;
    const char *pre = unprivileged();
    if (!pre) {
        print_message("[  SKIPPED ] cannot run docpipe as an unprivileged user here (setpriv, or the build folder "
                      "is not readable by nobody)\n");
        skip();
    }
    const char *d = tu_tmp("hostile");
    const char *model = e2e_model("qwen3");
    assert_int_equal(e2e_sh("chmod 0755 '%s' && mkdir -p '%s/in/locked' '%s/in/noexec' '%s/out' && chmod 0777 '%s' "
                            "'%s/out' && echo ok > '%s/in/ok.txt' && echo x > '%s/in/locked/x.txt' && "
                            "echo y > '%s/in/noexec/y.txt' && chmod 0 '%s/in/locked' && chmod 0644 '%s/in/noexec' && "
                            "ln -s /etc/hostname '%s/in/out.txt' && ln -s / '%s/in/root' && chmod 0644 '%s'",
                            tu_tmpdir(), d, d, d, d, d, d, d, d, d, d, d, d, model),
                     0);
    char job[4400];
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, model, "in\n    follow_symlinks: true",
                  "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 4\noutputs:\n  jsonl: out/r.jsonl\n"
                  "state_dir: out/state\n");
    /* plan and status list the folder without crashing */
    assert_int_equal(e2e_sh("%s'%s' plan '%s' >/dev/null 2>&1", pre, DP_BINARY, job), 0);
    const int rc = e2e_sh("%s'%s' run '%s' --quiet 2>/dev/null", pre, DP_BINARY, job);
    assert_int_equal(rc, 3);
    const int src = e2e_sh("%s'%s' status '%s' >/dev/null 2>&1", pre, DP_BINARY, job);
    assert_true(src < 128); /* no signal */
    char res[4400], errs[4400];
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(errs, sizeof(errs), "%s/out/errors.jsonl", d);
    json_t *r = e2e_load_records(res, NULL), *e = e2e_load_records(errs, NULL);
    const char *cid;
    json_t *o;
    int found = 0;
    json_object_foreach(e, cid, o) {
        const char *src_path = json_string_value(json_object_get(json_object_get(o, "meta"), "source_path"));
        const char *code = json_string_value(json_object_get(json_object_get(o, "error"), "code"));
        print_message("  error record: %s %s\n", src_path, code);
        assert_string_equal(code, "input_unreadable");
        found += !strcmp(src_path, "in/locked") || !strcmp(src_path, "in/noexec/y.txt") ||
                 !strcmp(src_path, "in/out.txt") || !strcmp(src_path, "in/root");
    }
    assert_int_equal(found, 4);
    assert_int_equal(json_object_size(e), 4);
    assert_int_equal(json_object_size(r), 1); /* ok.txt */
    json_decref(r);
    json_decref(e);
    e2e_sh("chmod -R u+rwx '%s/in'", d);
}

/* A read-only outputs folder and a read-only state folder are one situation, one exit code
 * (73), from validate and from run, at the start and when a resumed run meets them. */
static void test_read_only_outputs_and_state_exit_73(void **state) {
    (void)state;
    const char *pre = unprivileged();
    if (!pre) {
        print_message("[  SKIPPED ] cannot run docpipe as an unprivileged user here\n");
        skip();
    }
    char d[4096], job[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("readonly"));
    const char *model = e2e_model("qwen3");
    assert_int_equal(e2e_sh("chmod 0755 '%s' && mkdir -p '%s/in' '%s/out' '%s/state' && echo text > '%s/in/a.txt' && "
                            "chmod 0777 '%s' && chmod 0555 '%s/out' && chmod 0777 '%s/state' && chmod 0644 '%s'",
                            tu_tmpdir(), d, d, d, d, d, d, d, model), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, model, "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\n"
                  "outputs:\n  jsonl: out/r.jsonl\nstate_dir: state\n");
    /* outputs read-only, state writable */
    assert_int_equal(e2e_sh("%s'%s' validate '%s' >/dev/null 2>&1", pre, DP_BINARY, job), 73);
    assert_int_equal(e2e_sh("%s'%s' run '%s' --quiet 2>/dev/null", pre, DP_BINARY, job), 73);
    /* state read-only, outputs writable */
    assert_int_equal(e2e_sh("rm -rf '%s/state' && mkdir '%s/state' && chmod 0555 '%s/state' && chmod 0777 '%s/out'",
                            d, d, d, d), 0);
    assert_int_equal(e2e_sh("%s'%s' validate '%s' >/dev/null 2>&1", pre, DP_BINARY, job), 73);
    assert_int_equal(e2e_sh("%s'%s' run '%s' --quiet 2>/dev/null", pre, DP_BINARY, job), 73);
    /* a finished job whose outputs became read-only: the resume meets it, 73 again */
    assert_int_equal(e2e_sh("chmod 0777 '%s/state'", d), 0);
    assert_int_equal(e2e_sh("%s'%s' run '%s' --quiet 2>/dev/null", pre, DP_BINARY, job), 0);
    assert_int_equal(e2e_sh("echo more > '%s/in/b.txt' && chmod 0444 '%s/out/r.jsonl'", d, d), 0);
    assert_int_equal(e2e_sh("%s'%s' run '%s' --quiet 2>/dev/null", pre, DP_BINARY, job), 73);
}

/* Names that are not UTF-8 stay apart (escaped path, the bytes in base64, distinct ids); names
 * that clean to one file name get two files; a standing failure is written once, listed by
 * status, and retried with --retry-failed. */
static void test_names_and_standing_failures(void **state) {
    (void)state;
    const char *d = tu_tmp("names");
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && printf same > \"a$(printf '\\377').txt\" && "
                            "printf same > \"a$(printf '\\376').txt\" && printf one > 'new\nline.txt' && "
                            "printf two > new_line.txt && printf x > img.png", d, d), 0);
    char job[4400], res[4400], errs[4400], docs[4400];
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in",
                  "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 2\noutputs:\n  jsonl: out/r.jsonl\n"
                  "  per_document_dir: out/docs\n");
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(errs, sizeof(errs), "%s/out/errors.jsonl", d);
    json_t *r = e2e_load_records(res, NULL); /* (fails on a repeated custom_id) */
    assert_int_equal(json_object_size(r), 4);
    const char *cid;
    json_t *o;
    int escaped = 0;
    json_object_foreach(r, cid, o) {
        json_t *m = json_object_get(o, "meta");
        const char *sp = json_string_value(json_object_get(m, "source_path"));
        const char *b64 = json_string_value(json_object_get(m, "source_path_b64"));
        if (!strcmp(sp, "in/a\\xff.txt")) escaped += b64 && !strcmp(b64, "aW4vYf8udHh0");
        if (!strcmp(sp, "in/a\\xfe.txt")) escaped += b64 && !strcmp(b64, "aW4vYf4udHh0");
    }
    assert_int_equal(escaped, 2);
    json_decref(r);
    /* five documents (the error too), five files: the two names that clean alike do not share one */
    snprintf(docs, sizeof(docs), "%s/out/docs", d);
    assert_int_equal(e2e_sh("test $(find '%s' -name '*.jsonl' | wc -l) -eq 5", docs), 0);
    /* the unsupported file's error is written once, however many runs */
    size_t n = 0;
    json_decref(e2e_load_records(errs, &n));
    assert_int_equal(n, 1);
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    json_decref(e2e_load_records(errs, &n));
    assert_int_equal(n, 1);
    char *out = NULL;
    assert_int_equal(tu_run(&out, "status '%s'", job), 0);
    assert_non_null(strstr(out, "failed before, unchanged since"));
    assert_non_null(strstr(out, "in/img.png"));
    free(out);
    /* a retried failure is recorded again, under the same custom_id (same document, same content):
     * a consumer keeps the later line */
    assert_int_equal(tu_run(NULL, "run '%s' --quiet --retry-failed", job), 3);
    assert_int_equal(e2e_sh("test $(wc -l < '%s') -eq 2", errs), 0);
}

static void test_folder_changing_during_run(void **state) {
    (void)state;
    char d[4096], job[4400], res[4400], errs[4400];
    snprintf(d, sizeof(d), "%s", tu_tmp("changing"));
    enum { N = 60 };
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && cd '%s/in' && for i in $(seq -w 0 %d); do "
                            "printf 'document %%s, some words to read.' $i > d$i.txt; done", d, d, N - 1), 0);
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in",
                  "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 24\n"
                  "outputs:\n  jsonl: out/r.jsonl\n");
    snprintf(res, sizeof(res), "%s/out/r.jsonl", d);
    snprintf(errs, sizeof(errs), "%s/out/errors.jsonl", d);
    char pause[4400];
    snprintf(pause, sizeof(pause), "%s/listed", d);
    fflush(NULL);
    const pid_t p = fork();
    if (p == 0) {
        setenv("DOCPIPE_PAUSE_AFTER_LISTING", pause, 1); /* the reader waits between listing and reading */
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) dup2(nul, 0), dup2(nul, 1), dup2(nul, 2);
        execl(DP_BINARY, "docpipe", "run", job, "--quiet", (char *)NULL);
        _exit(127);
    }
    struct stat st;
    for (int i = 0; i < 6000 && stat(pause, &st); i++) usleep(5000);
    assert_int_equal(stat(pause, &st), 0);
    /* the later documents change kind under the reader's feet, four ways, plus one new file
     * the listing did not see */
    assert_int_equal(e2e_sh("cd '%s/in' && for i in $(seq 20 %d); do f=d$i.txt; case $((i %% 4)) in "
                            "0) rm $f;; 1) rm $f && mkfifo $f;; 2) rm $f && ln -s /etc/passwd $f;; "
                            "3) rm $f && mkdir $f && echo inner > $f/x.txt;; esac; done && echo new > new.txt",
                            d, N - 1), 0);
    assert_int_equal(unlink(pause), 0);
    int wst = 0, waited = 0;
    pid_t w;
    while ((w = waitpid(p, &wst, WNOHANG)) == 0 && waited < 120000) {
        usleep(10000);
        waited += 10;
    }
    if (w == 0) {
        kill(p, SIGKILL);
        waitpid(p, &wst, 0);
        fail_msg("the run did not end within 120 s over a changing folder");
    }
    assert_true(WIFEXITED(wst));
    const int rc = WEXITSTATUS(wst);
    if (rc != 0 && rc != 3) fail_msg("exit %d", rc);
    /* one record per listed document, results and errors together, none twice */
    json_t *r = e2e_load_records(res, NULL), *e = e2e_exists(errs) ? e2e_load_records(errs, NULL) : json_object();
    int seen[N] = {0}, other = 0;
    json_t *sets[2] = {r, e};
    for (int k = 0; k < 2; k++) {
        const char *cid;
        json_t *o;
        json_object_foreach(sets[k], cid, o) {
            const char *sp = json_string_value(json_object_get(json_object_get(o, "meta"), "source_path"));
            int i = -1;
            if (sp && sscanf(sp, "in/d%d.txt", &i) == 1 && i >= 0 && i < N && strlen(sp) == strlen("in/d00.txt"))
                seen[i]++;
            else
                other++;
        }
    }
    for (int i = 0; i < N; i++)
        if (seen[i] != 1) fail_msg("document d%02d.txt has %d records (exit %d)", i, seen[i], rc);
    assert_int_equal(other, 0);
    /* read before the change: results; changed: one error record each, whatever it became */
    assert_int_equal(json_object_size(r), 20);
    assert_int_equal(json_object_size(e), N - 20);
    assert_int_equal(rc, 3);
    json_decref(r);
    json_decref(e);
}

/* Damage one file of a finished job (cmd: a shell command run in the job's folder), expect run
 * and status to refuse it (65, `msg` in the message) and leave every file as it was. */
static void expect_refused(const char *d, const char *job, const char *cmd, const char *msg) {
    assert_int_equal(e2e_sh("cd '%s' && rm -rf saved && mkdir saved && cp -a out state saved/", d), 0);
    assert_int_equal(e2e_sh("cd '%s' && %s", d, cmd), 0);
    assert_int_equal(e2e_sh("cd '%s' && rm -rf damaged && mkdir damaged && cp -a out state damaged/", d), 0);
    const int rc = tu_run(NULL, "run '%s' --quiet", job);
    if (rc != 65) fail_msg("%s: run gave %d: %s", cmd, rc, tu_last_stderr());
    if (!strstr(tu_last_stderr(), msg)) fail_msg("%s: run said: %s", cmd, tu_last_stderr());
    assert_non_null(strstr(tu_last_stderr(), "--restart"));
    assert_int_equal(tu_run(NULL, "status '%s'", job), 65);
    /* nothing acted on: every file as the damage left it (the lock file aside) */
    assert_int_equal(
        e2e_sh("cd '%s' && diff -r -x job.lock out damaged/out && diff -r -x job.lock state damaged/state", d), 0);
    assert_int_equal(e2e_sh("cd '%s' && rm -rf out state damaged && mv saved/out saved/state . && rmdir saved", d), 0);
}

static void test_damaged_state_is_refused(void **state) {
    (void)state;
    char d[4096];
    snprintf(d, sizeof(d), "%s", tu_tmp("damaged"));
    assert_int_equal(e2e_sh("mkdir -p '%s/in' && for i in 1 2 3 4 5 6 7 8; do printf 'document %%s text.' $i > "
                            "\"%s/in/d$i.txt\"; done && printf x > '%s/in/x.png'", d, d, d), 0);
    char job[4400];
    snprintf(job, sizeof(job), "%s/job.yaml", d);
    e2e_write_job(job, e2e_model("qwen3"), "in", "prompts:\n  template: \"{{content}}\"\ngeneration:\n  max_tokens: 3\n"
                  "outputs:\n  jsonl: out/r.jsonl\n  gzip: true\n");
    setenv("DOCPIPE_COMMIT_RECORDS", "3", 1); /* several commits: several gzip members */
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    unsetenv("DOCPIPE_COMMIT_RECORDS");
    /* the results byte count cut to 100 */
    expect_refused(d, job, "sed -i '0,/\"bytes\": [0-9]*/s//\"bytes\": 100/' state/checkpoint.json",
                   "checksum does not match");
    /* one hex digit of a ledger hash changed */
    expect_refused(d, job, "sed -i '1s/\"sha256\":\"\\(.\\)/\"sha256\":\"\\1x/' state/ledger.jsonl && "
                   "! cmp -s state/ledger.jsonl saved/state/ledger.jsonl", "ledger.jsonl: its first");
    /* one byte inside the committed gzip results */
    expect_refused(d, job, "printf Z | dd of=out/r.jsonl.gz bs=1 seek=40 conv=notrunc status=none && "
                   "! cmp -s out/r.jsonl.gz saved/out/r.jsonl.gz", "r.jsonl.gz: its first");
    /* one byte of the errors file */
    expect_refused(d, job, "sed -i 's/unsupported/unsupp0rted/' out/errors.jsonl", "errors.jsonl: its first");
    /* undamaged, the same state resumes: nothing to do, nothing written twice */
    assert_int_equal(tu_run(NULL, "run '%s' --quiet", job), 3);
    char res[4400];
    snprintf(res, sizeof(res), "%s/out/r.jsonl.gz", d);
    size_t n = 0;
    json_decref(e2e_load_records(res, &n));
    assert_int_equal(n, 8);
    char *out = NULL;
    assert_int_equal(tu_run(&out, "status '%s'", job), 0);
    assert_non_null(strstr(out, "8 ok, 1 failed"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_doc_refuses_what_the_listing_did_not_see),
        cmocka_unit_test(test_bad_subfolders_and_links_become_records),
        cmocka_unit_test(test_read_only_outputs_and_state_exit_73),
        cmocka_unit_test(test_names_and_standing_failures),
        cmocka_unit_test(test_folder_changing_during_run),
        cmocka_unit_test(test_damaged_state_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
