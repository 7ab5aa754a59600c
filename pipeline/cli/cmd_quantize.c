/*
 * cmd_quantize.c - `docpipe quantize IN.gguf OUT.gguf TYPE [-t N]`.
 *
 * Progress goes to stderr: one updating line on a terminal, one line per tensor otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "exit_codes.h"
#include "platform.h"

typedef struct progress {
    bool tty;
    uint64_t t0;
} progress;

static void on_progress(void *ud, int64_t i, int64_t n, const char *name, int type, uint64_t bytes) {
    progress *p = ud;
    double secs = (double)(dp_time_ns() - p->t0) / 1e9;
    if (p->tty)
        fprintf(stderr, "\rquantize: [%4lld/%4lld] %-36s %-5s %8.1f MiB written, %.0f s   ", (long long)i + 1,
                (long long)n, name, eng_type_name(type), (double)bytes / 1048576.0, secs);
    else
        fprintf(stderr, "quantize: [%lld/%lld] %s %s (%.1f MiB written, %.0f s)\n", (long long)i + 1, (long long)n,
                name, eng_type_name(type), (double)bytes / 1048576.0, secs);
}

int pl_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0};
    int n_pos = 0;
    uint32_t threads = (uint32_t)dp_cpu_count();
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) {
            if (!pl_parse_u32(argv[i], i + 1 < argc ? argv[i + 1] : NULL, 1, 256, &threads)) return PL_EXIT_USAGE;
            i++;
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            pl_unknown_option("quantize", argv[i]);
            return PL_EXIT_USAGE;
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        } else {
            fprintf(stderr, "docpipe quantize: too many arguments\n");
            return PL_EXIT_USAGE;
        }
    }
    if (n_pos != 3) {
        fprintf(stderr, "usage: docpipe quantize IN.gguf OUT.gguf TYPE [-t N]   (TYPE: q8_0 q4_0 q4_k_m q5_k_m q6_k)\n");
        return PL_EXIT_USAGE;
    }
    int ft = eng_ftype_from_name(pos[2]);
    if (ft < 0) {
        fprintf(stderr, "docpipe quantize: unknown type '%s' (use q8_0, q4_0, q4_k_m, q5_k_m or q6_k)\n", pos[2]);
        return PL_EXIT_USAGE;
    }
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "docpipe quantize: input and output are the same file\n");
        return PL_EXIT_USAGE;
    }
    progress p = {dp_stderr_is_terminal(), dp_time_ns()};
    dp_err err = {0};
    dp_status st = eng_quantize_file(pos[0], pos[1], (eng_ftype)ft, (int)threads, quiet ? NULL : on_progress, &p, &err);
    if (p.tty && !quiet) fputc('\n', stderr);
    if (st) {
        fprintf(stderr, "docpipe quantize: %s\n", dp_err_msg(&err));
        if (st == DP_EFORMAT || st == DP_EUNSUPPORTED || st == DP_ENOENT) return PL_EXIT_CONFIG;
        return st == DP_ENOSPC || st == DP_EIO ? PL_EXIT_IOERR : PL_EXIT_CANTCREAT;
    }
    if (!quiet)
        fprintf(stderr, "quantize: wrote %s in %.1f s\n", pos[1], (double)(dp_time_ns() - p.t0) / 1e9);
    return PL_EXIT_OK;
}
