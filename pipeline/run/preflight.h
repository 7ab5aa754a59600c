/*
 * preflight.h - the checks of a loaded job against the file system that need no model and
 * write nothing: what `docpipe validate` reports and what `docpipe run` refuses before it
 * takes the lock. One list, so that validate refuses everything run refuses.
 *
 * Every problem is printed ("PROG: FILE:LINE:COL: message"), not only the first; the result
 * is the exit code of the first one (exit_codes.h), 0 when there is none.
 */
#ifndef PL_PREFLIGHT_H
#define PL_PREFLIGHT_H

#include "job.h"

typedef enum pl_preflight_depth {
    PL_PREFLIGHT_RUN = 0, /* paths only: cheap; run meets the rest as it goes */
    PL_PREFLIGHT_FULL = 1 /* also lists the inputs (a job that matches no file) and checks that
                           * the outputs and the state folder can be created */
} pl_preflight_depth;

int pl_preflight(const job_spec *j, pl_preflight_depth depth, const char *prog);

#endif /* PL_PREFLIGHT_H */
