/*
 * sink.h - an append-only output file with a committed size: the unit of the exactly-once
 * protocol (docs/operations.md). Lines are collected in memory, written and fdatasync'ed by
 * pl_sink_flush; the caller then records pl_sink_size() in the checkpoint. On resume the file
 * is cut back to the size the checkpoint names, which removes torn and uncommitted lines.
 *
 * A gzip sink writes every flush as one complete gzip member (RFC 1952 allows concatenated
 * members; zcat and gzip -d read them as one stream), so a committed size is always a member
 * boundary and cutting the file back leaves a valid .gz.
 */
#ifndef PL_SINK_H
#define PL_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dynbuf.h"
#include "platform.h"
#include "sha256.h"

typedef struct pl_sink {
    dp_file f;
    char *path;
    bool gzip;
    uint64_t size;      /* bytes on disk after the last flush */
    dp_buf pending;     /* lines not written yet */
    size_t n_pending;
    dp_sha256 hash;     /* of every byte on disk: the checkpoint records it at each commit */
} pl_sink;

/* Opens path for appending. fresh: the file must not exist (DP_EEXIST: someone else's file).
 * Otherwise the file holds `committed` bytes we own: a shorter file is DP_EIO ("has N bytes,
 * the checkpoint says M"); with want_sha256 (hex; NULL or "" = nothing recorded) those bytes
 * must hash to it (DP_EFORMAT: the file was edited or damaged); only then is a longer file cut
 * back and synced. A missing file is created when committed is 0. Nothing is changed when
 * an error is returned. */
dp_status pl_sink_open(pl_sink *s, const char *path, bool gzip, bool fresh, uint64_t committed,
                       const char *want_sha256, dp_err *err);
/* Queues one line (a newline is added). */
dp_status pl_sink_add(pl_sink *s, const char *line, size_t len, dp_err *err);
/* Writes the queued lines and fdatasyncs. An error is final for the run (never retry a sync). */
dp_status pl_sink_flush(pl_sink *s, dp_err *err);
uint64_t pl_sink_size(const pl_sink *s);
/* The sha256 (hex) of the file's first pl_sink_size() bytes. */
void pl_sink_sha256(const pl_sink *s, char hex[65]);
/* Checks that the first n bytes of path hash to want_sha256 (hex): DP_EFORMAT with a message
 * that says what to do when not, DP_EIO when the file is shorter. For readers (`docpipe
 * status`) that do not open the file for writing. */
dp_status pl_file_check_prefix(const char *path, uint64_t n, const char *want_sha256, dp_err *err);
dp_status pl_sink_close(pl_sink *s, dp_err *err);

/* data[0..n) as one complete gzip member in a new buffer (free() it). */
dp_status pl_gzip_member(const uint8_t *data, size_t n, uint8_t **out, size_t *out_len);

/* Replaces path atomically and durably with data: temp file, fsync, rename, fsync the folder. */
dp_status pl_write_atomic(const char *path, const void *data, size_t len, dp_err *err);

#endif /* PL_SINK_H */
