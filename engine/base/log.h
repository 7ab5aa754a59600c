/*
 * log.h - leveled logging to stderr (or a callback). stdout is for data, never for logs.
 *
 * DP_LOG_INFO("loaded %d tensors", n) checks the level before evaluating its arguments, and
 * prefixes the calling function's name. Nothing should log per token or per row.
 */
#ifndef DP_LOG_H
#define DP_LOG_H

#include "status.h"

typedef enum dp_log_level {
    DP_LOG_LEVEL_ERROR = 0,
    DP_LOG_LEVEL_WARN = 1,
    DP_LOG_LEVEL_INFO = 2,
    DP_LOG_LEVEL_DEBUG = 3,
} dp_log_level;

/* Receives one formatted line (no trailing newline). */
typedef void (*dp_log_fn)(dp_log_level level, const char *line, void *ud);

void dp_log_set_level(dp_log_level level);
dp_log_level dp_log_get_level(void);
/* Routes log lines to fn instead of stderr; fn == NULL restores stderr. Borrows ud. */
void dp_log_set_callback(dp_log_fn fn, void *ud);
/* Parses "error|warn|info|debug"; returns DP_EINVAL for anything else. */
dp_status dp_log_level_parse(const char *s, dp_log_level *out);

void dp_log_write(dp_log_level level, const char *func, const char *fmt, ...) DP_PRINTF(3, 4);

#define DP_LOG(level, ...)                                                  \
    do {                                                                    \
        if ((level) <= dp_log_get_level()) dp_log_write((level), __func__, __VA_ARGS__); \
    } while (0)
#define DP_LOG_ERROR(...) DP_LOG(DP_LOG_LEVEL_ERROR, __VA_ARGS__)
#define DP_LOG_WARN(...)  DP_LOG(DP_LOG_LEVEL_WARN, __VA_ARGS__)
#define DP_LOG_INFO(...)  DP_LOG(DP_LOG_LEVEL_INFO, __VA_ARGS__)
#define DP_LOG_DEBUG(...) DP_LOG(DP_LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif /* DP_LOG_H */
