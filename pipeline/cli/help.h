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
/* "docpipe CMD: unknown option 'OPT'" on stderr, with "did you mean" when an option of CMD's
 * help is close (one or two edits). */
void pl_unknown_option(const char *cmd, const char *opt);
/* The manual page docpipe(1), in roff, from the same text: what `cmake --install` installs. */
void pl_help_man(FILE *f, const char *version);
/* A completion script for bash (zsh: false) or zsh: the commands, and each command's options. */
void pl_help_completion(FILE *f, bool zsh);
/* Levenshtein distance of two short words (99 for words over 31 bytes). */
size_t pl_edit_distance(const char *a, const char *b);

#endif /* PL_HELP_H */
