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

bool pl_kv_option(pl_kv_opts *kv, const char *opt, const char *val, bool *bad) {
    const bool k = !strcmp(opt, "-ctk") || !strcmp(opt, "--cache-type-k"), v = !strcmp(opt, "-ctv") ||
                   !strcmp(opt, "--cache-type-v"), both = !strcmp(opt, "--kv-type");
    if (!k && !v && !both) return false;
    const int t = val ? eng_type_from_name(val) : -1;
    if (t != ENG_TYPE_F16 && t != ENG_TYPE_Q8_0 && t != ENG_TYPE_F32) {
        fprintf(stderr, "docpipe: %s: '%s' is not a KV cache type: f16, q8_0 or f32\n", opt, val ? val : "");
        *bad = true;
        return true;
    }
    if (k || both) kv->k = t;
    if (v || both) kv->v = t;
    return true;
}

bool pl_kv_type(const pl_kv_opts *kv, int *kv_type) {
    if (kv->k >= 0 && kv->v >= 0 && kv->k != kv->v) {
        fprintf(stderr, "docpipe: -ctk %s and -ctv %s differ: docpipe keeps K and V in one type\n",
                eng_type_name(kv->k), eng_type_name(kv->v));
        return false;
    }
    *kv_type = kv->k >= 0 ? kv->k : kv->v >= 0 ? kv->v : ENG_TYPE_F16;
    return true;
}
