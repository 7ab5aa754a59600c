/*
 * help.h - `docpipe help [COMMAND]`, `docpipe COMMAND --help`: the command's section of
 * docs/cli.md, embedded in the binary at build time, so the help and the reference are one
 * text. Markdown is flattened for a terminal: code indentation, backticks, links and table
 * rules removed.
 */
#ifndef PL_HELP_H
#define PL_HELP_H

#include <stdbool.h>
#include <stdio.h>

/* Prints the section "## docpipe CMD" to f; false when there is none. */
bool pl_help_print(FILE *f, const char *cmd);

#endif /* PL_HELP_H */
