/*
 * sink.c - see sink.h.
 */
#include "sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "iofault.h"

static dp_status hash_prefix(const char *path, uint64_t n, dp_sha256 *h, dp_err *err) {
    dp_sha256_init(h);
    if (n == 0) return DP_OK;
    dp_file f = {.handle = -1};
    dp_status st = dp_file_open(&f, path, DP_FILE_READ, err);
    if (st) return st;
    const size_t chunk = (size_t)1 << 20;
    uint8_t *buf = malloc(chunk);
    if (!buf) st = dp_err_set(err, DP_ENOMEM, "%s: out of memory", path);
    for (uint64_t off = 0; !st && off < n;) {
        const size_t k = n - off < chunk ? (size_t)(n - off) : chunk;
        if (!(st = dp_file_pread(&f, buf, k, off, err))) {
            dp_sha256_update(h, buf, k);
            off += k;
        }
    }
    free(buf);
    dp_file_close(&f, NULL);
    return st;
}

static dp_status check_hash(const char *path, uint64_t n, dp_sha256 *h, const char *want, dp_err *err) {
    if (!want || !want[0]) return DP_OK;
    dp_sha256 copy = *h;
    uint8_t d[32];
    char hex[65];
    dp_sha256_final(&copy, d);
    dp_sha256_hex(d, hex);
    if (!strcmp(hex, want)) return DP_OK;
    return dp_err_set(err, DP_EFORMAT, "%s: its first %llu bytes do not match the sha256 the checkpoint recorded at "
                      "the last commit: the file was edited or damaged after docpipe wrote it. Nothing was modified; "
                      "restore the file, or move the outputs and the state folder aside (--restart does that) and "
                      "start over", path, (unsigned long long)n);
}

static dp_status short_file(const char *path, uint64_t size, uint64_t committed, dp_err *err) {
    return dp_err_set(err, DP_EIO, "%s: has %llu bytes, the checkpoint says %llu were written and synced; the file "
                      "was changed or the storage lost data (nothing was modified)", path, (unsigned long long)size,
                      (unsigned long long)committed);
}

dp_status pl_file_check_prefix(const char *path, uint64_t n, const char *want_sha256, dp_err *err) {
    dp_stat_info si;
    dp_status st = dp_stat(path, true, &si, err);
    if (st) return st;
    if (si.size < n) return short_file(path, si.size, n, err);
    dp_sha256 h;
    if ((st = hash_prefix(path, n, &h, err))) return st;
    return check_hash(path, n, &h, want_sha256, err);
}

void pl_sink_sha256(const pl_sink *s, char hex[65]) {
    dp_sha256 h = s->hash; /* finalising a copy leaves the running hash open for more lines */
    uint8_t d[32];
    dp_sha256_final(&h, d);
    dp_sha256_hex(d, hex);
}

dp_status pl_sink_open(pl_sink *s, const char *path, bool gzip, bool fresh, uint64_t committed,
                       const char *want_sha256, dp_err *err) {
    memset(s, 0, sizeof(*s));
    s->f.handle = -1;
    s->gzip = gzip;
    dp_sha256_init(&s->hash);
    dp_buf_init(&s->pending, (size_t)1 << 31);
    if (!(s->path = strdup(path))) return dp_err_set(err, DP_ENOMEM, "out of memory");
    dp_status st;
    if (fresh) {
        st = dp_file_open(&s->f, path, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_EXCL | DP_FILE_APPEND, err);
        if (st == DP_EEXIST)
            dp_err_set(err, DP_EEXIST, "%s already exists and no checkpoint of this job owns it; move it away or "
                       "choose another output path", path);
        return st;
    }
    if (!dp_path_exists(path) && committed == 0)
        return dp_file_open(&s->f, path, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_APPEND, err);
    if ((st = dp_file_open(&s->f, path, DP_FILE_WRITE | DP_FILE_APPEND, err))) return st;
    uint64_t size = 0;
    if ((st = dp_file_size(&s->f, &size, err))) return st;
    if (size < committed) return short_file(path, size, committed, err);
    /* verified before anything is cut: a damaged file is left exactly as it was found */
    if ((st = hash_prefix(path, committed, &s->hash, err)) ||
        (st = check_hash(path, committed, &s->hash, want_sha256, err)))
        return st;
    if (size > committed) {
        if ((st = pl_io_point("truncate", path, err)) || (st = dp_file_truncate(&s->f, committed, err)) ||
            (st = dp_file_datasync(&s->f, err)))
            return st;
    }
    s->size = committed;
    return DP_OK;
}

dp_status pl_sink_add(pl_sink *s, const char *line, size_t len, dp_err *err) {
    if (dp_buf_append(&s->pending, line, len) || dp_buf_append(&s->pending, "\n", 1))
        return dp_err_set(err, DP_ENOMEM, "%s: out of memory for pending lines", s->path);
    s->n_pending++;
    return DP_OK;
}

dp_status pl_gzip_member(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return DP_ENOMEM;
    const uLong bound = deflateBound(&z, (uLong)n) + 32;
    uint8_t *buf = malloc(bound);
    if (!buf) {
        deflateEnd(&z);
        return DP_ENOMEM;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)bound;
    const int rc = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return DP_ERROR;
    }
    *out = buf;
    return DP_OK;
}

dp_status pl_sink_flush(pl_sink *s, dp_err *err) {
    dp_status st = DP_OK;
    if (s->pending.len) {
        const uint8_t *data = s->pending.data;
        size_t n = s->pending.len;
        uint8_t *gz = NULL;
        if (s->gzip) {
            if (n > 0x7fffffffu || pl_gzip_member(data, n, &gz, &n))
                return dp_err_set(err, DP_ENOMEM, "%s: cannot compress %zu bytes", s->path, s->pending.len);
            data = gz;
        }
        st = pl_io_point("write", s->path, err);
        if (!st) st = dp_file_write(&s->f, data, n, err);
        if (!st) dp_sha256_update(&s->hash, data, n);
        free(gz);
        if (st) return st;
        s->size += n;
        dp_buf_reset(&s->pending);
        s->n_pending = 0;
    }
    if ((st = pl_io_point("sync", s->path, err))) return st;
    return dp_file_datasync(&s->f, err);
}

uint64_t pl_sink_size(const pl_sink *s) { return s->size; }

dp_status pl_sink_close(pl_sink *s, dp_err *err) {
    dp_status st = dp_file_close(&s->f, err);
    dp_buf_free(&s->pending);
    free(s->path);
    s->path = NULL;
    return st;
}

dp_status pl_write_atomic(const char *path, const void *data, size_t len, dp_err *err) {
    char tmp[4200], dir[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return dp_err_set(err, DP_EINVAL, "%s: path too long", path);
    dp_path_dir(path, dir, sizeof(dir));
    dp_file f = {.handle = -1};
    dp_status st = pl_io_point("write", tmp, err);
    if (!st) st = dp_file_open(&f, tmp, DP_FILE_WRITE | DP_FILE_CREATE | DP_FILE_TRUNC, err);
    if (!st) st = dp_file_write(&f, data, len, err);
    if (!st) st = pl_io_point("sync", tmp, err);
    if (!st) st = dp_file_sync(&f, err);
    dp_status cst = dp_file_close(&f, st ? NULL : err);
    if (!st) st = cst;
    if (!st) st = pl_io_point("rename", path, err);
    if (!st) st = dp_rename(tmp, path, err);
    if (!st) st = pl_io_point("sync", dir, err);
    if (!st) st = dp_dir_sync(dir, err);
    return st;
}
