/*
 * testutil.c - see testutil.h.
 */
#include "testutil.h"

#include "engine.h"

#include "platform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <sys/wait.h>
#include <unistd.h>
#endif

const char *tu_fixture(const char *rel) {
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ & 7];
    const char *dir = getenv("DOCPIPE_FIXTURES"); /* a machine where ../shared is elsewhere */
    snprintf(p, 4096, "%s/%s", dir && *dir ? dir : DP_FIXTURES_DIR, rel);
    return dp_path_exists(p) ? p : NULL;
}

static char g_tmp[512];

/* Removes path and everything under it (links themselves, never what they point to). */
void tu_rm_rf(const char *path) {
    dp_stat_info si;
    if (dp_stat(path, false, &si, NULL)) return;
    if (si.kind == DP_KIND_DIR) {
        char **names = NULL;
        size_t n = 0;
        if (!dp_dir_list(path, &names, &n, NULL)) {
            for (size_t i = 0; i < n; i++) {
                char sub[4096];
                snprintf(sub, sizeof(sub), "%s/%s", path, names[i]);
                tu_rm_rf(sub);
            }
            free(names);
        }
#ifdef _WIN32
        wchar_t w[4096];
        if (MultiByteToWideChar(CP_UTF8, 0, path, -1, w, 4096) > 0) RemoveDirectoryW(w);
#else
        rmdir(path);
#endif
    } else {
        dp_remove(path, NULL);
    }
}

static void rm_tmp(void) {
    if (g_tmp[0]) tu_rm_rf(g_tmp);
}

const char *tu_tmpdir(void) {
    if (!g_tmp[0]) {
#ifdef _WIN32
        const char *base = getenv("TEMP");
        if (!base || !*base) base = ".";
        /* a fresh name: the pid and a counter past the names that exist */
        for (unsigned i = 0;; i++) {
            snprintf(g_tmp, sizeof(g_tmp), "%s/dptest.%d.%u", base, dp_getpid(), i);
            dp_path_to_slashes(g_tmp);
            if (!dp_path_exists(g_tmp)) break;
        }
        dp_err err = {0};
        if (dp_mkdir_p(g_tmp, &err)) {
            fprintf(stderr, "cannot create a temporary folder: %s\n", err.msg);
            abort();
        }
#else
        const char *base = getenv("TMPDIR");
        snprintf(g_tmp, sizeof(g_tmp), "%s/dptest.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(g_tmp)) {
            perror("mkdtemp");
            abort();
        }
#endif
        atexit(rm_tmp);
    }
    return g_tmp;
}

const char *tu_tmp(const char *name) {
    static char buf[8][600];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 600, "%s/%s", tu_tmpdir(), name);
    return p;
}

struct eng_tokenizer *tu_qwen_tokenizer(void) {
    dp_err err = {0};
    const char *path = tu_fixture("models/qwen35-tiny-f16.gguf");
    if (!path) {
        eng_test_model_params p;
        eng_test_model_defaults(&p, ENG_ARCH_QWEN35);
        path = tu_tmp("tokenizer.gguf");
        if (eng_test_model_write(&p, path, 2, &err)) return NULL;
    }
    eng_gguf *g;
    eng_tokenizer *t = NULL;
    if (eng_gguf_open(path, &g, &err)) return NULL;
    if (eng_tokenizer_load(g, &t, &err)) t = NULL;
    eng_gguf_close(g);
    return t;
}

static char g_stderr[65536];

const char *tu_last_stderr(void) { return g_stderr; }

#ifdef _WIN32
/* The tests write docpipe's arguments as a POSIX shell fragment ('quoted' words, "< file",
 * "> file", "2>&1"); without a POSIX shell this reads that subset into an argument vector and
 * runs the program directly (dp_process_run). */
static int run_fragment(const char *bin, const char *args, char **out) {
    const char *argv[256];
    char words[256][2048];
    int n = 0;
    argv[n++] = bin;
    const char *in_path = NULL, *out_path = NULL;
    bool merge_err = false;
    const char *p = args;
    enum { W_ARG, W_IN, W_OUT } next = W_ARG;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        if (!strncmp(p, "2>&1", 4)) {
            merge_err = true, p += 4;
            continue;
        }
        if (*p == '<') {
            next = W_IN, p++;
            continue;
        }
        if (*p == '>') {
            next = W_OUT, p++;
            continue;
        }
        if (n >= 255) return -1;
        char *w = words[n];
        size_t k = 0;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && k < 2047) {
            if (*p == '\'') {
                for (p++; *p && *p != '\'' && k < 2047; p++) w[k++] = *p;
                if (*p) p++;
            } else if (*p == '"') {
                for (p++; *p && *p != '"' && k < 2047; p++) {
                    if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$')) p++;
                    w[k++] = *p;
                }
                if (*p) p++;
            } else if (*p == '\\' && p[1]) {
                w[k++] = p[1], p += 2;
            } else {
                w[k++] = *p++;
            }
        }
        w[k] = 0;
        if (next == W_IN) in_path = w;
        else if (next == W_OUT) out_path = w;
        else argv[n++] = w;
        next = W_ARG;
    }
    argv[n] = NULL;
    char *in = NULL, *o = NULL;
    size_t in_len = 0, o_len = 0;
    if (in_path && dp_file_read_all(in_path, (size_t)1 << 30, &in, &in_len, NULL)) return -1;
    static char tail[65536];
    int code = -1;
    dp_err err = {0};
    dp_status st = dp_process_run(argv, in, in_len, 3600 * 1000, (size_t)1 << 30, &o, &o_len, tail, sizeof(tail),
                                  &code, &err);
    free(in);
    if (st) {
        snprintf(g_stderr, sizeof(g_stderr), "%s", err.msg);
        return -1;
    }
    snprintf(g_stderr, sizeof(g_stderr), "%s", tail);
    if (merge_err) { /* 2>&1: the tail of stderr after stdout (the tests only search it) */
        char *g = realloc(o, o_len + strlen(tail) + 1);
        if (g) memcpy(g + o_len, tail, strlen(tail) + 1), o = g, o_len += strlen(tail);
    }
    if (out_path) {
        tu_write_file(out_path, o, o_len);
        o[0] = 0;
    }
    if (out) *out = o;
    else free(o);
    /* a process ended by an exception: report it as a signal death would be */
    return code >= 0 && code < 256 ? code : 128 + 9;
}
#endif

int tu_run(char **out, const char *fmt, ...) {
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
#ifdef _WIN32
    return run_fragment(DP_BINARY, args, out);
#else
    char cmd[9000];
    const char *errf = tu_tmp("stderr.txt");
    snprintf(cmd, sizeof(cmd), "'%s' %s 2>'%s'", DP_BINARY, args, errf);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 4096) buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int status = pclose(p);
    FILE *e = fopen(errf, "r");
    g_stderr[0] = '\0';
    if (e) {
        size_t m = fread(g_stderr, 1, sizeof(g_stderr) - 1, e);
        g_stderr[m] = '\0';
        fclose(e);
    }
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
#endif
}

void tu_write_file(const char *path, const void *data, size_t n) {
    FILE *f = dp_fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void tb_grow(tu_bytes *b, size_t n) {
    if (b->n + n <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n) cap *= 2;
    b->p = realloc(b->p, cap);
    b->cap = cap;
}

void tb_raw(tu_bytes *b, const void *p, size_t n) {
    tb_grow(b, n);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}
void tb_u8(tu_bytes *b, uint8_t v) { tb_raw(b, &v, 1); }
void tb_u32(tu_bytes *b, uint32_t v) { tb_raw(b, &v, 4); }
void tb_u64(tu_bytes *b, uint64_t v) { tb_raw(b, &v, 8); }
void tb_f32(tu_bytes *b, float v) { tb_raw(b, &v, 4); }
void tb_str(tu_bytes *b, const char *s) {
    tb_u64(b, strlen(s));
    tb_raw(b, s, strlen(s));
}
void tb_pad(tu_bytes *b, size_t a) {
    while (b->n % a) tb_u8(b, 0);
}
void tb_free(tu_bytes *b) {
    free(b->p);
    memset(b, 0, sizeof(*b));
}

uint64_t tu_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float tu_randn(uint64_t *s) {
    double u1 = ((double)(tu_rand(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(tu_rand(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
