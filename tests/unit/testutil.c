/*
 * testutil.c - see testutil.h.
 */
#include "testutil.h"

#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tu_fixture(const char *rel) {
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ & 7];
    const char *dir = getenv("DOCPIPE_FIXTURES"); /* a machine where ../shared is elsewhere */
    snprintf(p, 4096, "%s/%s", dir && *dir ? dir : DP_FIXTURES_DIR, rel);
    struct stat st;
    return stat(p, &st) == 0 ? p : NULL;
}

static char g_tmp[256];

static void rm_tmp(void) {
    if (!g_tmp[0]) return;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
}

const char *tu_tmpdir(void) {
    if (!g_tmp[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_tmp, sizeof(g_tmp), "%s/dptest.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(g_tmp)) {
            perror("mkdtemp");
            abort();
        }
        atexit(rm_tmp);
    }
    return g_tmp;
}

const char *tu_tmp(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 512, "%s/%s", tu_tmpdir(), name);
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

int tu_run(char **out, const char *fmt, ...) {
    char args[8192], cmd[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
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
}

void tu_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
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
