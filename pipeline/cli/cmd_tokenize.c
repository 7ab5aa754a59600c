/*
 * cmd_tokenize.c - `docpipe tokenize -m MODEL.gguf [--no-special] [--json] [--pieces] [--count]
 *                   (TEXT | -f FILE)`.
 *
 * Tokenizes with add_special on and, unless --no-special, special-token parsing on (the way
 * prompts are tokenized). Output: ids separated by spaces; --json one JSON array and nothing
 * else on stdout; --pieces one "id<TAB>piece" line per token with the piece's bytes escaped;
 * --count only the number of tokens. Text from -f is used byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "help.h"
#include "engine.h"
#include "exit_codes.h"
#include "platform.h"

static void print_escaped(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
}

int pl_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL;
    bool special = true, json = false, pieces = false, count = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (++i >= argc) goto usage;
            model = argv[i];
        } else if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) {
            if (++i >= argc) goto usage;
            file = argv[i];
        } else if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt")) {
            if (++i >= argc) goto usage;
            text = argv[i];
        } else if (!strcmp(argv[i], "--no-special")) special = false;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--pieces")) pieces = true;
        else if (!strcmp(argv[i], "--count")) count = true;
        else if (argv[i][0] == '-' && argv[i][1]) {
            pl_unknown_option("tokenize", argv[i]);
            goto usage;
        } else if (!text) text = argv[i];
        else {
            fprintf(stderr, "docpipe tokenize: more than one text given\n");
            goto usage;
        }
    }
    if (!model || (!text && !file) || (text && file)) goto usage;
    dp_err err = {0};
    char *data = NULL;
    size_t len = 0;
    if (file) {
        if (dp_file_read_all(file, (size_t)4 << 30, &data, &len, &err)) {
            fprintf(stderr, "docpipe tokenize: %s\n", dp_err_msg(&err));
            return PL_EXIT_NOINPUT;
        }
    } else {
        len = strlen(text);
    }
    eng_gguf *g = NULL;
    eng_tokenizer *tok = NULL;
    if (eng_gguf_open(model, &g, &err) || eng_tokenizer_load(g, &tok, &err)) {
        fprintf(stderr, "docpipe tokenize: %s\n", dp_err_msg(&err));
        eng_gguf_close(g);
        free(data);
        return PL_EXIT_CONFIG;
    }
    eng_gguf_close(g);
    eng_tok_ws *ws = NULL;
    eng_tokens ids = {0};
    int rc = PL_EXIT_OK;
    if (eng_tok_ws_new(&ws) || eng_tokenize(tok, ws, file ? data : text, len, true, special, &ids, &err)) {
        fprintf(stderr, "docpipe tokenize: %s\n", dp_err_msg(&err));
        rc = PL_EXIT_DATAERR;
        goto done;
    }
    if (count) {
        printf("%zu\n", ids.n);
    } else if (json) {
        putchar('[');
        for (size_t i = 0; i < ids.n; i++) printf(i ? ", %d" : "%d", ids.ids[i]);
        puts("]");
    } else if (pieces) {
        for (size_t i = 0; i < ids.n; i++) {
            const char *p;
            size_t n = eng_token_to_piece(tok, ids.ids[i], true, &p);
            printf("%6d\t'", ids.ids[i]);
            print_escaped(p, n);
            puts("'");
        }
    } else {
        for (size_t i = 0; i < ids.n; i++) printf(i ? " %d" : "%d", ids.ids[i]);
        putchar('\n');
    }
done:
    eng_tokens_free(&ids);
    eng_tok_ws_free(ws);
    eng_tokenizer_free(tok);
    free(data);
    return rc;
usage:
    fprintf(stderr, "usage: docpipe tokenize -m MODEL.gguf [--no-special] [--json] [--pieces] [--count] (TEXT | -f FILE)\n");
    return PL_EXIT_USAGE;
}
