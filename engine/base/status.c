/*
 * status.c - names and messages for dp_status, and the dp_err helpers.
 *
 * DESIGN: everything here is generated from DP_STATUS_MAP in status.h; no table is kept by
 * hand. dp_err is plain data owned by the caller, so these functions are thread-safe as long
 * as each thread uses its own dp_err.
 */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dp_status_name(dp_status st) {
    switch (st) {
#define DP_STATUS_NAME_(name, val, msg) case DP_##name: return "DP_" #name;
        DP_STATUS_MAP(DP_STATUS_NAME_)
#undef DP_STATUS_NAME_
    }
    return "DP_UNKNOWN";
}

const char *dp_status_str(dp_status st) {
    switch (st) {
#define DP_STATUS_STR_(name, val, msg) case DP_##name: return msg;
        DP_STATUS_MAP(DP_STATUS_STR_)
#undef DP_STATUS_STR_
    }
    return "unknown status";
}

dp_status dp_status_from_errno(int errnum) {
    switch (errnum) {
    case 0: return DP_OK;
    case ENOMEM: return DP_ENOMEM;
    case EINVAL: return DP_EINVAL;
    case ENOENT: case ENOTDIR: return DP_ENOENT;
    case EACCES: case EPERM: case EROFS: return DP_EACCES;
    case ENOSPC: case EFBIG: return DP_ENOSPC;
#ifdef EDQUOT
    case EDQUOT: return DP_ENOSPC;
#endif
    case EBUSY: case EAGAIN: return DP_EBUSY;
    case EEXIST: return DP_EEXIST;
    case ETIMEDOUT: return DP_ETIMEDOUT;
    case ECANCELED: case EINTR: return DP_ECANCELED;
    case ERANGE: case EOVERFLOW: return DP_ERANGE;
    default: return DP_EIO;
    }
}

dp_status dp_err_set(dp_err *err, dp_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

void dp_err_prefix(dp_err *err, const char *fmt, ...) {
    if (!err) return;
    char ctx[DP_ERR_MSG_MAX / 2];
    char old[DP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    old[sizeof(old) - 1] = '\0';
    const char *tail = old[0] ? old : dp_status_str(err->code);
    size_t n = strlen(ctx);
    /* truncation is fine here: the start of the message carries the context */
    memcpy(err->msg, ctx, n);
    err->msg[n] = '\0';
    size_t room = sizeof(err->msg) - 1 - n;
    size_t sep = room < 2 ? room : 2;
    memcpy(err->msg + n, ": ", sep);
    n += sep;
    room -= sep;
    size_t tl = strlen(tail) < room ? strlen(tail) : room;
    memcpy(err->msg + n, tail, tl);
    err->msg[n + tl] = '\0';
}

void dp_err_clear(dp_err *err) {
    if (!err) return;
    err->code = DP_OK;
    err->msg[0] = '\0';
}

const char *dp_err_msg(const dp_err *err) {
    if (!err) return "";
    return err->msg[0] ? err->msg : dp_status_str(err->code);
}

void dp_assert_fail(const char *file, int line, const char *func, const char *expr) {
    fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", file, line, func, expr);
    fflush(stderr);
    abort();
}
