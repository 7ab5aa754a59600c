/*
 * preflight.c - see preflight.h.
 */
#include "preflight.h"

#include "job_grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"
#include "git_changes.h"
#include "platform.h"
#include "walk.h"

/* path is inside (or is) dir */
static bool inside(const char *path, const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == 0);
}

typedef struct report {
    const job_spec *j;
    const char *prog;
    int rc;
} report;

static void problem(report *r, int code, int line, int col, const char *fmt, ...) DP_PRINTF(5, 6);
static void problem(report *r, int code, int line, int col, const char *fmt, ...) {
    char msg[DP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (line > 0) fprintf(stderr, "%s: %s:%d:%d: %s\n", r->prog, r->j->file, line, col, msg);
    else fprintf(stderr, "%s: %s\n", r->prog, msg); /* a value from the command line */
    if (!r->rc) r->rc = code;
}

/* The folder a file will be created in, or its nearest existing ancestor, must be writable. */
static void check_creatable(report *r, const char *what, const char *dir) {
    char cur[4096];
    snprintf(cur, sizeof(cur), "%s", dir);
    dp_stat_info si;
    while (dp_stat(cur, true, &si, NULL) != DP_OK) {
        char up[4096];
        dp_path_dir(cur, up, sizeof(up));
        if (!strcmp(up, cur)) return;
        memcpy(cur, up, sizeof(cur));
    }
    if (si.kind != DP_KIND_DIR)
        problem(r, PL_EXIT_CANTCREAT, 1, 1, "%s: %s is not a folder", what, cur);
    else if (!dp_dir_writable(cur))
        problem(r, PL_EXIT_CANTCREAT, 1, 1, "%s: cannot create files in %s (permission denied)", what, cur);
}

int pl_preflight(const job_spec *j, pl_preflight_depth depth, const char *prog) {
    report r = {j, prog, 0};
    char od[4096];
    dp_path_dir(j->outputs.jsonl, od, sizeof(od));
    /* an output inside an input folder would be read back as input by the next run */
    for (size_t i = 0; i < j->n_inputs; i++) {
        const job_input *in = &j->inputs[i];
        char md[4096] = "", id[4096] = "", sd[4096] = "";
        if (j->outputs.metrics) dp_path_dir(j->outputs.metrics, md, sizeof(md));
        if (j->outputs.intermediate) dp_path_dir(j->outputs.intermediate, id, sizeof(id));
        if (j->outputs.sqlite) dp_path_dir(j->outputs.sqlite, sd, sizeof(sd));
        const char *outs[6] = {od, j->state_dir, j->outputs.per_document_dir, md[0] ? md : NULL, id[0] ? id : NULL,
                               sd[0] ? sd : NULL};
        const char *names[6] = {"outputs.jsonl", "state_dir", "outputs.per_document_dir", "outputs.metrics",
                                "outputs.intermediate", "outputs.sqlite"};
        for (int k = 0; k < 6; k++)
            if (outs[k] && inside(outs[k], in->path))
                problem(&r, PL_EXIT_DATAERR, in->line, in->col, "%s lies inside input folder %s: the next run would "
                        "read its own output; put outputs and state elsewhere", names[k], in->path);
    }
    for (size_t i = 0; i < j->n_inputs; i++) {
        dp_stat_info si;
        if (dp_stat(j->inputs[i].path, true, &si, NULL) || si.kind != DP_KIND_DIR)
            problem(&r, PL_EXIT_NOINPUT, j->inputs[i].line, j->inputs[i].col, "inputs[%zu].path: %s is not a folder", i,
                    j->inputs[i].path);
    }
    for (size_t i = 0; i < j->n_inputs; i++) {
        pl_changed ch;
        dp_err err = {0};
        if (!j->inputs[i].changed_since) continue;
        if (pl_git_changed(j->inputs[i].path, j->inputs[i].changed_since, &ch, &err))
            problem(&r, PL_EXIT_CONFIG, j->inputs[i].line, j->inputs[i].col, "inputs[%zu].changed_since: %s", i,
                    dp_err_msg(&err));
        else pl_changed_free(&ch);
    }
    {
        dp_buf g;
        dp_buf_init(&g, (size_t)1 << 26);
        dp_err err = {0};
        dp_status st = pl_job_grammar(j, &g, &err);
        if (st)
            problem(&r, st == DP_ENOENT || st == DP_EIO || st == DP_EACCES ? PL_EXIT_NOINPUT : PL_EXIT_DATAERR,
                    j->generation.rf_line, j->generation.rf_col, "%s", dp_err_msg(&err));
        dp_buf_free(&g);
    }
    dp_stat_info si;
    if (dp_stat(j->model.path, true, &si, NULL) || si.kind != DP_KIND_FILE)
        problem(&r, PL_EXIT_CONFIG, j->model.path_line, j->model.path_col, "%s: %s is not a readable file",
                j->model.path_line ? "model.path" : "-m", j->model.path);
    for (size_t c = 0; c < j->n_converters; c++)
        if (!dp_program_exists(j->converters[c].argv[0]))
            problem(&r, PL_EXIT_CONFIG, j->converters[c].line, j->converters[c].col,
                    "converters.%s: %s is not installed (not found on PATH)", j->converters[c].ext + 1,
                    j->converters[c].argv[0]);
    if (depth == PL_PREFLIGHT_RUN) return r.rc;

    check_creatable(&r, "outputs.jsonl", od);
    check_creatable(&r, "state_dir", j->state_dir);
    if (j->outputs.per_document_dir) check_creatable(&r, "outputs.per_document_dir", j->outputs.per_document_dir);
    const char *more[3] = {j->outputs.metrics, j->outputs.intermediate, j->outputs.sqlite};
    const char *more_names[3] = {"outputs.metrics", "outputs.intermediate", "outputs.sqlite"};
    for (int k = 0; k < 3; k++) {
        if (!more[k]) continue;
        char md[4096];
        dp_path_dir(more[k], md, sizeof(md));
        check_creatable(&r, more_names[k], md);
    }
    /* the listing run would make: a job that matches nothing is refused by run (exit 66) */
    pl_walk w = {0};
    bool listed = true;
    for (size_t i = 0; i < j->n_inputs; i++) {
        const job_input *in = &j->inputs[i];
        if (dp_stat(in->path, true, &si, NULL) || si.kind != DP_KIND_DIR) {
            listed = false;
            continue;
        }
        pl_walk_opts o = {(const char *const *)in->include, in->n_include, (const char *const *)in->exclude,
                          in->n_exclude, in->follow_symlinks, (uint64_t)in->max_file_size, in->links_outside};
        dp_err err = {0};
        if (pl_walk_dir(in->path, &o, &w, &err)) {
            problem(&r, PL_EXIT_NOINPUT, in->line, in->col, "inputs[%zu].path: %s", i, dp_err_msg(&err));
            listed = false;
        }
    }
    if (listed && w.n == 0)
        problem(&r, PL_EXIT_NOINPUT, j->inputs[0].line, j->inputs[0].col, "no input documents: the input folders have "
                "no file matching the include and exclude globs");
    pl_walk_free(&w);
    return r.rc;
}
