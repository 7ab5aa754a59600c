/*
 * main.c - the docpipe command line: dispatches to the subcommands in cmd_*.c.
 *
 * DESIGN: only this layer exits; subcommands return exit codes (exit_codes.h). stdout carries
 * data (JSON, tables, generated text); logs and progress go to stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exit_codes.h"
#include "help.h"
#include "log.h"
#include "platform.h"
#include "say.h"

#include "engine.h"

extern const char pl_version[], pl_git_commit[], pl_build_type[]; /* version_info.c, generated */

/* docpipe --version: what a bug report needs to say which build ran where. */
static void print_version(void) {
    printf("docpipe %s (git %s, %s build)\n", pl_version, pl_git_commit, pl_build_type);
    printf("cpu kernels: built %s; this cpu runs %s\n", eng_cpu_kernels_built(), eng_cpu_kernels_used());
    eng_device_report gpu;
    eng_device_query(DP_DEVICE_CUDA, &gpu);
    if (!gpu.built) printf("cuda backend: not built\n");
    else if (gpu.n_devices)
        printf("cuda backend: built; %d device%s (%s)\n", gpu.n_devices, gpu.n_devices == 1 ? "" : "s", gpu.name);
    else printf("cuda backend: built; no usable GPU here\n");
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: docpipe COMMAND [ARGS]\n"
            "\n"
            "commands available in this build:\n"
            "  run JOB.yaml [--restart] [--shard I/N] [--quiet]   run a job (resumes; skips unchanged documents)\n"
            "  plan JOB.yaml [--shards N]                      documents, chunks, tokens, estimated time\n"
            "  status JOB.yaml                                 done, failed and pending documents (no model)\n"
            "  merge JOB.yaml                                  combine the outputs of a sharded run\n"
            "  inspect MODEL.gguf [-c N] [--seqs N] [--json]   metadata, tensors, memory needed\n"
            "  quantize IN.gguf OUT.gguf TYPE [-t N]           q8_0 q4_0 q4_k_m q5_k_m q6_k\n"
            "  make-test-model --arch ARCH --out FILE [...]     random-weight model in the real layout\n"
            "  tokenize -m MODEL.gguf [--json] (TEXT | -f FILE) token ids as the model counts them\n"
            "  embed -m MODEL.gguf (TEXT | -f FILE) [--pooling P] sentence embeddings (llama-embedding's JSON)\n"
            "  eval -m MODEL.gguf -f PROMPT [-n 16] [--exact]   logits and greedy steps as JSON\n"
            "  perplexity -m MODEL.gguf -f TEXT [-c 512]       perplexity as llama-perplexity measures it\n"
            "  generate -m MODEL.gguf -p PROMPT [-n N] [--chat] one prompt, streamed (sampling as llama-cli)\n"
            "  bench -m MODEL.gguf [-t N] [-p 512] [-n 64]      prompt and generation throughput\n"
            "  validate JOB.yaml                               check a job file without loading the model\n"
            "  batch -m MODEL.gguf -i IN.jsonl -o OUT.jsonl    OpenAI batch requests, continuous batching\n"
            "  version                                         print the version\n"
            "  help COMMAND                                    a command's usage and every option (or COMMAND --help)\n"
            "\n"
            "global options (before the command): -v (info logs), -vv (debug logs), -q (errors only),\n"
            "  --log-format text|json (run's messages, progress and summary as JSON lines)\n");
}

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
} command;

static const command k_commands[] = {
    {"run", pl_cmd_run},           {"plan", pl_cmd_plan},         {"status", pl_cmd_status},
    {"merge", pl_cmd_merge},       {"validate", pl_cmd_validate}, {"batch", pl_cmd_batch},
    {"inspect", pl_cmd_inspect},   {"quantize", pl_cmd_quantize}, {"make-test-model", pl_cmd_make_test_model},
    {"tokenize", pl_cmd_tokenize}, {"eval", pl_cmd_eval},         {"perplexity", pl_cmd_perplexity},
    {"generate", pl_cmd_generate}, {"bench", pl_cmd_bench},       {"embed", pl_cmd_embed},
    {"query", pl_cmd_query},
};

static const command *find_command(const char *name) {
    for (size_t k = 0; k < sizeof(k_commands) / sizeof(k_commands[0]); k++)
        if (!strcmp(k_commands[k].name, name)) return &k_commands[k];
    return NULL;
}

static void unknown_command(const char *name) {
    const char *best = NULL;
    size_t bd = 3;
    for (size_t k = 0; k < sizeof(k_commands) / sizeof(k_commands[0]); k++) {
        size_t d = pl_edit_distance(name, k_commands[k].name);
        if (d < bd) bd = d, best = k_commands[k].name;
    }
    if (best) fprintf(stderr, "docpipe: unknown command '%s' (did you mean '%s'?)\n", name, best);
    else fprintf(stderr, "docpipe: unknown command '%s'\n", name);
    usage(stderr);
}

static int run_command(int argc, char **argv) {
    int i = 1;
    dp_log_set_level(DP_LOG_LEVEL_WARN);
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-v")) dp_log_set_level(DP_LOG_LEVEL_INFO);
        else if (!strcmp(argv[i], "-vv")) dp_log_set_level(DP_LOG_LEVEL_DEBUG);
        else if (!strcmp(argv[i], "-q")) dp_log_set_level(DP_LOG_LEVEL_ERROR);
        else if (!strcmp(argv[i], "--log-format") || !strncmp(argv[i], "--log-format=", 13)) {
            const char *v = argv[i][12] == '=' ? argv[i] + 13 : i + 1 < argc ? argv[++i] : "";
            if (strcmp(v, "json") && strcmp(v, "text")) {
                fprintf(stderr, "docpipe: --log-format is text or json (got '%s')\n", v);
                return PL_EXIT_USAGE;
            }
            pl_say_json(!strcmp(v, "json"));
        }
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return PL_EXIT_OK;
        } else if (!strcmp(argv[i], "--version")) {
            print_version();
            return PL_EXIT_OK;
        } else {
            fprintf(stderr, "docpipe: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return PL_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return PL_EXIT_USAGE;
    }
    const char *cmd = argv[i];
    int sub_argc = argc - i;
    char **sub_argv = argv + i;
    if (!strcmp(cmd, "version")) {
        print_version();
        return PL_EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (sub_argc < 2) {
            usage(stdout);
            return PL_EXIT_OK;
        }
        /* what the install ships, made from the same text as the help */
        if (!strcmp(sub_argv[1], "--man")) {
            pl_help_man(stdout, pl_version);
            return PL_EXIT_OK;
        }
        if (!strcmp(sub_argv[1], "--completion") && sub_argc == 3 &&
            (!strcmp(sub_argv[2], "bash") || !strcmp(sub_argv[2], "zsh"))) {
            pl_help_completion(stdout, !strcmp(sub_argv[2], "zsh"));
            return PL_EXIT_OK;
        }
        if (find_command(sub_argv[1]) && pl_help_print(stdout, sub_argv[1])) return PL_EXIT_OK;
        unknown_command(sub_argv[1]);
        return PL_EXIT_USAGE;
    }
    const command *c = find_command(cmd);
    if (!c) {
        unknown_command(cmd);
        return PL_EXIT_USAGE;
    }
    /* "CMD --help" anywhere, or "CMD -h" first (later, -h could be an option's value) */
    bool help = sub_argc > 1 && !strcmp(sub_argv[1], "-h");
    for (int k = 1; k < sub_argc && !help; k++) help = !strcmp(sub_argv[k], "--help");
    if (help) return pl_help_print(stdout, cmd) ? PL_EXIT_OK : PL_EXIT_SOFTWARE;
    return c->fn(sub_argc, sub_argv);
}

int main(int argc, char **argv) {
    dp_process_init(&argc, &argv);
    return pl_exit_code(run_command(argc, argv));
}
