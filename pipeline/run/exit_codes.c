/*
 * exit_codes.c - the outcome -> exit code table (exit_codes.h). The numbers follow BSD's
 * sysexits.h where one fits, so shells, cron and systemd units can tell a bad job file from a
 * full disk; docs/errors.md says what each means for the user.
 */
#include "exit_codes.h"

static const int k_exit_codes[PL_EXIT_COUNT] = {
    [PL_EXIT_OK] = 0,
    [PL_EXIT_PARTIAL] = 3,
    [PL_EXIT_USAGE] = 64,
    [PL_EXIT_DATAERR] = 65,
    [PL_EXIT_NOINPUT] = 66,
    [PL_EXIT_SOFTWARE] = 70,
    [PL_EXIT_OSERR] = 71,
    [PL_EXIT_CANTCREAT] = 73,
    [PL_EXIT_IOERR] = 74,
    [PL_EXIT_TEMPFAIL] = 75,
    [PL_EXIT_CONFIG] = 78,
};

int pl_exit_code(int outcome) {
    return outcome >= 0 && outcome < PL_EXIT_COUNT ? k_exit_codes[outcome] : k_exit_codes[PL_EXIT_SOFTWARE];
}
