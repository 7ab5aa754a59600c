/*
 * args.c - the option values every command parses the same way (cli.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine.h"

/* strtoull of an option's value; false (said on stderr) when the value is missing. */
static bool option_number(const char *opt, const char *val, unsigned long long *v, char **end) {
    if (!val) {
        fprintf(stderr, "docpipe: %s needs a value\n", opt);
        return false;
    }
    errno = 0;
    *v = strtoull(val, end, 10);
    return true;
}

bool pl_parse_u32(const char *opt, const char *val, uint32_t lo, uint32_t hi, uint32_t *out) {
    char *end;
    unsigned long long v;
    if (!option_number(opt, val, &v, &end)) return false;
    if (errno || end == val || *end || val[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "docpipe: %s: '%s' is not an integer in [%u, %u]\n", opt, val, lo, hi);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

bool pl_parse_size(const char *opt, const char *val, uint64_t *out) {
    char *end;
    unsigned long long v;
    if (!option_number(opt, val, &v, &end)) return false;
    unsigned shift = 0;
    if (*end && !end[1]) {
        const char *units = "KMGT", *u = strchr(units, end[0] & ~0x20);
        if (u && end[0]) shift = 10u * (unsigned)(u - units + 1), end++;
    }
    if (errno || end == val || *end || val[0] == '-' || v == 0 || v > (~0ull >> shift)) {
        fprintf(stderr, "docpipe: %s: '%s' is not a size such as 512M or 12G\n", opt, val);
        return false;
    }
    *out = (uint64_t)v << shift;
    return true;
}

bool pl_parse_device(const char *v, int *out) {
    dp_device d;
    if (!v) return false;
    if (!dp_device_parse(v, &d)) {
        fprintf(stderr, "docpipe: --device must be cpu, cuda or auto (got '%s')\n", v);
        return false;
    }
    *out = (int)d;
    return true;
}
