/*
 * testutil.h - helpers shared by the cmocka tests: fixture paths (with skip), temp dirs,
 * running the docpipe binary, and a byte builder for handcrafted GGUF files.
 */
#ifndef DP_TESTUTIL_H
#define DP_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>

#ifdef _WIN32 /* the POSIX environment calls the tests use */
static inline int setenv(const char *name, const char *value, int overwrite) {
    return (!overwrite && getenv(name)) ? 0 : _putenv_s(name, value);
}
static inline int unsetenv(const char *name) { return _putenv_s(name, ""); }
#endif

/* Absolute path of a file under ../shared/fixtures (or $DOCPIPE_FIXTURES), or NULL when the
 * folder is absent. */
const char *tu_fixture(const char *rel);
/* Calls skip() with a clear message when fixtures are absent. */
#define TU_NEED_FIXTURES()                                                                             \
    do {                                                                                               \
        if (!tu_fixture("README.md")) {                                                                \
            print_message("[  SKIPPED ] fixtures not found at %s (a user's clone has no ../shared)\n", \
                          DP_FIXTURES_DIR);                                                           \
            skip();                                                                                    \
        }                                                                                              \
    } while (0)

/* A fresh temporary directory (removed at exit). Borrowed string. */
const char *tu_tmpdir(void);
/* Removes path and everything under it. */
void tu_rm_rf(const char *path);
/* tmpdir/name, in a static rotating buffer. */
const char *tu_tmp(const char *name);

/* Runs `docpipe ARGS` (a shell fragment); captures stdout into *out (malloc'd, may be NULL)
 * and returns the exit code. stderr goes to tmpdir/stderr.txt, readable with tu_last_stderr. */
int tu_run(char **out, const char *fmt, ...);
const char *tu_last_stderr(void);

/* The tokenizer of the qwen35-tiny fixture (Qwen's real BPE vocabulary) when fixtures are
 * present, else of a built-in-vocabulary test model written to the temporary directory; NULL
 * on failure. Free with eng_tokenizer_free. */
struct eng_tokenizer *tu_qwen_tokenizer(void);

/* Writes bytes to path. */
void tu_write_file(const char *path, const void *data, size_t n);

/* Growable byte buffer for building files. */
typedef struct tu_bytes {
    uint8_t *p;
    size_t n, cap;
} tu_bytes;
void tb_u8(tu_bytes *b, uint8_t v);
void tb_u32(tu_bytes *b, uint32_t v);
void tb_u64(tu_bytes *b, uint64_t v);
void tb_f32(tu_bytes *b, float v);
void tb_raw(tu_bytes *b, const void *p, size_t n);
void tb_str(tu_bytes *b, const char *s);
void tb_pad(tu_bytes *b, size_t align);
void tb_free(tu_bytes *b);

/* Simple deterministic PRNG for tests. */
uint64_t tu_rand(uint64_t *s);
float tu_randn(uint64_t *s);

#endif /* DP_TESTUTIL_H */
