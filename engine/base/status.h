/*
 * status.h - status codes and caller-owned error detail, shared by every module.
 *
 * Functions return a dp_status: DP_OK (0) or a negative code. Codes, names and messages come
 * from one X-macro list so they can never drift apart. Append new codes at the end of the list
 * with the next free number; never renumber an existing one (they appear in logs and tests).
 *
 * Detail travels in a dp_err the caller owns (it may be NULL): the code plus a message that
 * says what was wrong and what is allowed. Callers add context on the way up with
 * dp_err_prefix(): "loading model.gguf: tensor 'x': ...".
 */
#ifndef DP_STATUS_H
#define DP_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, value, message). Only # and ## are applied to NAME, so names that are also libc
 * macros (EOF, ENOMEM) are never expanded. */
#define DP_STATUS_MAP(X)                                                \
    X(OK, 0, "success")                                                 \
    X(ERROR, -1, "unspecified error")                                   \
    X(ENOMEM, -2, "out of memory")                                      \
    X(EINVAL, -3, "invalid argument")                                   \
    X(EIO, -4, "input/output error")                                    \
    X(ENOENT, -5, "no such file or directory")                          \
    X(EFORMAT, -6, "malformed input")                                   \
    X(EUNSUPPORTED, -7, "not supported")                                \
    X(ERANGE, -8, "value out of range")                                 \
    X(EOF, -9, "end of stream")                                         \
    X(EBUSY, -10, "resource busy")                                      \
    X(EACCES, -11, "permission denied")                                 \
    X(ENOSPC, -12, "no space left on device")                           \
    X(ECANCELED, -13, "operation canceled")                             \
    X(EEXIST, -14, "already exists")                                    \
    X(ETIMEDOUT, -15, "timed out")                                     \
    X(ENUMERIC, -16, "numeric failure")

typedef enum dp_status {
#define DP_STATUS_ENUM_(name, val, msg) DP_##name = (val),
    DP_STATUS_MAP(DP_STATUS_ENUM_)
#undef DP_STATUS_ENUM_
} dp_status;

/* "DP_EFORMAT" for DP_EFORMAT; "DP_UNKNOWN" for a value not in the list. Borrowed string. */
const char *dp_status_name(dp_status st);
/* "malformed input" for DP_EFORMAT. Borrowed string. */
const char *dp_status_str(dp_status st);
/* Maps an errno value to the closest status (ENOENT -> DP_ENOENT, ...). */
dp_status dp_status_from_errno(int errnum);

#define DP_ERR_MSG_MAX 1024

/* Caller-owned error detail. Zero-initialise it (dp_err err = {0};). */
typedef struct dp_err {
    dp_status code;
    char msg[DP_ERR_MSG_MAX];
} dp_err;

#if defined(__cplusplus)
#define DP_NORETURN [[noreturn]]
#else
#define DP_NORETURN _Noreturn
#endif

#if defined(__MINGW32__)
/* mingw-w64's C99 printf (__USE_MINGW_ANSI_STDIO), not msvcrt's dialect */
#define DP_PRINTF(fmt_idx, arg_idx) __attribute__((format(gnu_printf, fmt_idx, arg_idx)))
#elif defined(__GNUC__)
#define DP_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define DP_PRINTF(fmt_idx, arg_idx)
#endif

/* Records code and message in err (if not NULL) and returns code, so callers can write
 * `return dp_err_set(err, DP_EFORMAT, "n_dims is %u but must be <= 4", n);`. */
dp_status dp_err_set(dp_err *err, dp_status code, const char *fmt, ...) DP_PRINTF(3, 4);
/* Prepends context to the message: "ctx: old message". No-op when err is NULL. */
void dp_err_prefix(dp_err *err, const char *fmt, ...) DP_PRINTF(2, 3);
/* Resets err to DP_OK and an empty message. */
void dp_err_clear(dp_err *err);
/* The message, or the status text when no message was set. Borrowed. */
const char *dp_err_msg(const dp_err *err);

/* Programmer errors only; stays on in release builds (a wrong invariant must not run on). */
#define DP_ASSERT(cond)                                                          \
    do {                                                                         \
        if (!(cond)) dp_assert_fail(__FILE__, __LINE__, __func__, #cond);        \
    } while (0)
DP_NORETURN void dp_assert_fail(const char *file, int line, const char *func, const char *expr);

#ifdef __cplusplus
}
#endif

#endif /* DP_STATUS_H */
