/*
 * say.h - what a run tells the operator on stderr: errors, warnings, notes, progress lines and
 * the summary, each a log line with a time and a level. `--log-format json` (a global option)
 * makes every line one JSON object: {"time", "level", "event", "message", ...fields}, for a log
 * shipper; the engine's own log lines (-v, -vv) follow the same format.
 *
 *   YYYY-MM-DDTHH:MM:SSZ info  docpipe: 6 documents in 4.1 s: 5 done (22 results), 1 failed ...
 *   {"time":"YYYY-MM-DDTHH:MM:SSZ","level":"info","event":"summary","message":"6 documents ...",
 *    "documents":6,"done":5,"failed":1,...}
 */
#ifndef PL_SAY_H
#define PL_SAY_H

#include <jansson.h>
#include <stdbool.h>

#include "status.h"

typedef enum pl_say_level { PL_SAY_ERROR = 0, PL_SAY_WARN = 1, PL_SAY_INFO = 2 } pl_say_level;

/* JSON lines instead of text (the engine's log lines too). */
void pl_say_json(bool on);
bool pl_say_is_json(void);
/* One line: event names what happened ("error", "summary", "progress", ...); fields (may be
 * NULL; the reference is stolen) are added to the JSON object. */
void pl_say(pl_say_level level, const char *event, json_t *fields, const char *fmt, ...) DP_PRINTF(4, 5);

#endif /* PL_SAY_H */
