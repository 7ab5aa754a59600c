/*
 * json_schema.c - see json_schema.h.
 *
 * DESIGN: one rule per schema node, named by a counter (s12) or by its definition (def3-Name),
 * written into one buffer as the compiler walks the schema; shared pieces (string, number,
 * white space) are written once at the end. Objects keep the schema's property order: with
 * properties p1..pn, F(i) is "props i..n when none has been written yet" and the rest are
 * written as comma-led optional or required items, so a grammar never allows a stray comma
 * and grows linearly with n. Keys of additional properties are any key but the named ones (a
 * trie of the names, complemented), so a validator never sees a named key twice.
 */
#include "json_schema.h"

#include "engine.h"
#include "platform.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64, MAX_DIGITS = 15 };

typedef struct sc {
    dp_buf *out;
    json_t *root;
    dp_err *err;
    dp_status st;
    int n_rules;
    char path[512];
    json_t *defs_done; /* name -> true: definitions already written or being written */
    json_t *def_names; /* $ref string -> its rule's name */
    int depth;
    /* Left recursion: at_start names the definition whose text starts here (NULL once the walk
     * is past a schema that reads a character first); a $ref met there is an edge [from, to,
     * path, ref] in at_start_refs, and a cycle of such edges is a definition that can lead back
     * to itself without reading anything. */
    const char *at_start;
    json_t *at_start_refs;
} sc;

static dp_status fail(sc *c, const char *fmt, ...) DP_PRINTF(2, 3);
static dp_status fail(sc *c, const char *fmt, ...) {
    if (c->st) return c->st;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->st = dp_err_set(c->err, DP_EUNSUPPORTED, "schema %s: %s", c->path[0] ? c->path : "(root)", msg);
    return c->st;
}

static void emit(sc *c, const char *fmt, ...) DP_PRINTF(2, 3);
static void emit(sc *c, const char *fmt, ...) {
    if (c->st) return;
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp) || dp_buf_append(c->out, tmp, (size_t)n))
        c->st = dp_err_set(c->err, DP_ENOMEM, "schema: the grammar grew too large");
}

/* A GBNF literal of bytes s[0..n) (any byte written as an escape when it is not plain). */
static void emit_lit(sc *c, const char *s, size_t n) {
    emit(c, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b == '"' || b == '\\') emit(c, "\\%c", b);
        else if (b < 0x20 || b == 0x7F) emit(c, "\\x%02X", b);
        else if (b < 0x80) emit(c, "%c", b);
        else { /* a whole UTF-8 character as it stands */
            int len = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
            if (i + (size_t)len > n) len = (int)(n - i);
            emit(c, "%.*s", len, s + i);
            i += (size_t)len - 1;
        }
    }
    emit(c, "\"");
}

/* The JSON text of a value, compact, as a literal. */
static void emit_json_lit(sc *c, json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!t) {
        c->st = dp_err_set(c->err, DP_ENOMEM, "schema: out of memory");
        return;
    }
    emit_lit(c, t, strlen(t));
    free(t);
}

static int new_rule(sc *c) { return c->n_rules++; }

static void gen(sc *c, json_t *s, int rule);
static void regex_to_gbnf(sc *c, const char *re);

/* Walks into a sub-schema: the path grows for messages, the rule is written, the path shrinks. */
static int sub(sc *c, json_t *s, const char *seg1, const char *seg2) {
    const size_t at = strlen(c->path);
    if (seg1[0] || seg2) /* (a definition's path is set by its $ref) */
        snprintf(c->path + at, sizeof(c->path) - at, "/%s%s%s", seg1, seg2 ? "/" : "", seg2 ? seg2 : "");
    const int r = new_rule(c);
    if (++c->depth > MAX_DEPTH) fail(c, "nested deeper than %d", MAX_DEPTH);
    else gen(c, s, r);
    c->depth--;
    c->path[at] = 0;
    return r;
}

static const char *const k_known[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                      "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "items",
                                      "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern",
                                      "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                      /* annotations: no effect on what is valid */
                                      "title", "description", "$schema", "$id", "$comment", "examples", "default",
                                      "deprecated", "readOnly", "writeOnly", "strict", "nullable"};

static void check_keywords(sc *c, json_t *s) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        size_t i = 0;
        while (i < sizeof(k_known) / sizeof(k_known[0]) && strcmp(k, k_known[i])) i++;
        if (i == sizeof(k_known) / sizeof(k_known[0])) {
            fail(c, "the keyword '%s' is not supported (docs/structured-output.md lists what is)", k);
            return;
        }
    }
}

/* ---- strings ------------------------------------------------------------------------------ */

static void gen_string(sc *c, json_t *s, int rule) {
    json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    if ((mn && !json_is_integer(mn)) || (mx && !json_is_integer(mx))) {
        fail(c, "minLength and maxLength must be integers");
        return;
    }
    const json_int_t lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : -1;
    if (lo < 0 || (mx && hi < lo) || lo > 10000 || hi > 10000) {
        fail(c, "minLength/maxLength must be 0..10000 with minLength <= maxLength");
        return;
    }
    if ((pat != NULL) + (fmt != NULL) + (mn || mx) > 1) {
        fail(c, "only one of pattern, format and minLength/maxLength may be given on a string");
        return;
    }
    if (fmt) {
        const char *f = json_string_value(fmt);
        static const char *const names[] = {"date", "time", "date-time", "uuid", "email"};
        size_t i = 0;
        while (f && i < 5 && strcmp(f, names[i])) i++;
        if (!f || i == 5) {
            fail(c, "format '%s' is not supported (date, time, date-time, uuid, email are)", f ? f : "?");
            return;
        }
        emit(c, "s%d ::= \"\\\"\" fmt-%s \"\\\"\"\n", rule, f);
        return;
    }
    if (pat) {
        emit(c, "s%d ::= \"\\\"\" ", rule);
        if (!json_is_string(pat)) {
            fail(c, "pattern must be a string");
            return;
        }
        regex_to_gbnf(c, json_string_value(pat));
        emit(c, " \"\\\"\"\n");
        return;
    }
    if (!mn && !mx) emit(c, "s%d ::= string\n", rule);
    else if (hi < 0) emit(c, "s%d ::= \"\\\"\" char{%lld,} \"\\\"\"\n", rule, (long long)lo);
    else emit(c, "s%d ::= \"\\\"\" char{%lld,%lld} \"\\\"\"\n", rule, (long long)lo, (long long)hi);
}

static uint32_t next_cp(const char **p) {
    const unsigned char *s = (const unsigned char *)*p;
    uint32_t v;
    int n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : 4;
    v = n == 1 ? s[0] : n == 2 ? (s[0] & 31u) : n == 3 ? (s[0] & 15u) : (s[0] & 7u);
    for (int i = 1; i < n && s[i]; i++) v = v << 6 | (s[i] & 63u);
    *p += n;
    return v;
}

/* ---- patterns: a regular-expression subset to GBNF over the string's JSON text -------------------- */

typedef struct rx {
    sc *c;
    const char *p, *start;
    bool empty; /* the part just parsed can match the empty string */
} rx;

static void rx_fail(rx *r, const char *what) {
    fail(r->c, "pattern at offset %d: %s (docs/structured-output.md lists the subset)", (int)(r->p - r->start), what);
}

/* One character of the decoded string as it is written inside the JSON string. */
static void rx_char(rx *r, uint32_t cp) {
    sc *c = r->c;
    if (cp == '"') emit(c, "\"\\\\\\\"\"");
    else if (cp == '\\') emit(c, "\"\\\\\\\\\"");
    else if (cp == '\n') emit(c, "\"\\\\n\"");
    else if (cp == '\t') emit(c, "\"\\\\t\"");
    else if (cp == '\r') emit(c, "\"\\\\r\"");
    else if (cp < 0x20) emit(c, "\"\\\\u%04X\"", cp);
    else emit(c, cp > 0xFFFF ? "\"\\U%08X\"" : "\"\\u%04X\"", cp);
}

typedef struct rrange { uint32_t lo, hi; } rrange;

static int cmp_rr(const void *a, const void *b) {
    const rrange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A class of raw characters: written as a GBNF class without '"', '\' and controls (those would
 * need escapes in the JSON text; a class that allows them yields strings without them, which
 * still match). */
static void rx_class_emit(rx *r, rrange *v, int n, bool neg) {
    qsort(v, (size_t)n, sizeof(*v), cmp_rr);
    rrange m[140];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k && v[i].lo <= m[k - 1].hi + 1) {
            if (v[i].hi > m[k - 1].hi) m[k - 1].hi = v[i].hi;
        } else {
            m[k++] = v[i];
        }
    }
    rrange pos[140];
    int np = 0;
    if (neg) {
        uint32_t next = 0;
        for (int i = 0; i < k; i++) {
            if (m[i].lo > next) pos[np++] = (rrange){next, m[i].lo - 1};
            next = m[i].hi + 1;
        }
        if (next <= 0x10FFFF) pos[np++] = (rrange){next, 0x10FFFF};
    } else {
        memcpy(pos, m, (size_t)k * sizeof(*m));
        np = k;
    }
    /* cut out controls, '"' and '\' */
    static const rrange cut[] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    rrange out[150];
    int no = 0;
    for (int i = 0; i < np; i++) {
        rrange x = pos[i];
        for (int q = 0; q < 3 && x.lo <= x.hi; q++) {
            if (x.hi < cut[q].lo || x.lo > cut[q].hi) continue;
            if (x.lo < cut[q].lo) out[no++] = (rrange){x.lo, cut[q].lo - 1};
            x.lo = cut[q].hi + 1;
        }
        if (x.lo <= x.hi && no < 149) out[no++] = x;
    }
    if (!no) {
        rx_fail(r, "a class that allows no character a JSON string can hold unescaped");
        return;
    }
    emit(r->c, "[");
    for (int i = 0; i < no; i++) {
        emit(r->c, out[i].lo > 0xFFFF ? "\\U%08X" : "\\u%04X", out[i].lo);
        if (out[i].hi != out[i].lo) emit(r->c, out[i].hi > 0xFFFF ? "-\\U%08X" : "-\\u%04X", out[i].hi);
    }
    emit(r->c, "]");
}

/* \d \w \s and their negations as ranges; 0 when e is none of them. */
static int rx_shorthand(char e, rrange *v, bool *neg) {
    *neg = e == 'D' || e == 'W' || e == 'S';
    switch (e) {
    case 'd': case 'D': v[0] = (rrange){'0', '9'}; return 1;
    case 'w': case 'W': v[0] = (rrange){'0', '9'}, v[1] = (rrange){'A', 'Z'}, v[2] = (rrange){'a', 'z'}, v[3] = (rrange){'_', '_'}; return 4;
    case 's': case 'S': v[0] = (rrange){' ', ' '}, v[1] = (rrange){'\t', '\r'}; return 2;
    default: return 0;
    }
}

static uint32_t rx_escape_char(rx *r, char e) {
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    /* before the default, where strchr would find the terminator */
    case '\0': rx_fail(r, "a '\\' at the end of the pattern"); return 0;
    default:
        if (strchr("\\.^$|?*+()[]{}/-\"' ", e)) return (uint8_t)e;
        rx_fail(r, "an escape that is not supported (\\b, back references and such are not)");
        return 0;
    }
}

static uint32_t rx_cp(rx *r) {
    const char *q = r->p;
    uint32_t v = next_cp(&q);
    r->p = q;
    return v;
}

static void rx_alt(rx *r, int depth);

static void rx_atom(rx *r, int depth) {
    sc *c = r->c;
    const char ch = *r->p;
    r->empty = false; /* (a group: what rx_alt finds) */
    if (ch == '(') {
        r->p++;
        if (r->p[0] == '?') {
            if (r->p[1] != ':') {
                rx_fail(r, "only (?: ) groups are supported, not look-arounds or named groups");
                return;
            }
            r->p += 2;
        }
        emit(c, "(");
        rx_alt(r, depth + 1);
        if (*r->p != ')') {
            rx_fail(r, "'(' without its ')'");
            return;
        }
        r->p++;
        emit(c, ")");
    } else if (ch == '[') {
        r->p++;
        bool neg = *r->p == '^';
        if (neg) r->p++;
        rrange v[128];
        int n = 0;
        bool first = true;
        while (*r->p && (*r->p != ']' || first) && n < 120 && !c->st) {
            first = false;
            uint32_t lo;
            if (*r->p == '\\') {
                bool sn;
                int k = rx_shorthand(r->p[1], v + n, &sn);
                if (k && !sn) {
                    n += k;
                    r->p += 2;
                    continue;
                }
                if (k) {
                    rx_fail(r, "\\D, \\W and \\S inside a class are not supported");
                    return;
                }
                lo = rx_escape_char(r, r->p[1]);
                if (c->st) return;
                r->p += 2;
            } else {
                lo = rx_cp(r);
            }
            uint32_t hi = lo;
            if (r->p[0] == '-' && r->p[1] && r->p[1] != ']') {
                r->p++;
                if (*r->p == '\\') {
                    hi = rx_escape_char(r, r->p[1]);
                    if (c->st) return;
                    r->p += 2;
                } else {
                    hi = rx_cp(r);
                }
                if (hi < lo) {
                    rx_fail(r, "a class range runs backwards");
                    return;
                }
            }
            v[n++] = (rrange){lo, hi};
        }
        if (*r->p != ']') {
            rx_fail(r, "a class without its ']' (or too many ranges)");
            return;
        }
        r->p++;
        rx_class_emit(r, v, n, neg);
    } else if (ch == '.') {
        r->p++;
        emit(c, "pchar");
    } else if (ch == '\\') {
        rrange v[4];
        bool neg;
        int k = rx_shorthand(r->p[1], v, &neg);
        if (k) {
            r->p += 2;
            rx_class_emit(r, v, k, neg);
            return;
        }
        uint32_t e = rx_escape_char(r, r->p[1]);
        if (c->st) return;
        r->p += 2;
        rx_char(r, e);
    } else if (ch == '^' || ch == '$') {
        rx_fail(r, "'^' and '$' are supported at the start and end of the pattern only");
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
        rx_fail(r, "a quantifier without anything before it");
    } else {
        rx_char(r, rx_cp(r));
    }
}

/* The decimal number at *q, *q moved past it; held at 1000001 at most; -1 where there is none. */
static long rx_number(const char **q) {
    long v = -1;
    for (; **q >= '0' && **q <= '9'; (*q)++) {
        v = (v < 0 ? 0 : v) * 10 + (**q - '0');
        if (v > 1000000) v = 1000001;
    }
    return v;
}

/* A quantifier after an atom, if any. A repetition without an upper bound of a part that can be
 * empty is refused: the grammar would be left-recursive (its rule for the repetition could
 * begin with itself), and it matches what the same repetition without the empty choice does. */
static void rx_quant(rx *r) {
    sc *c = r->c;
    const char ch = *r->p;
    const bool atom_empty = r->empty;
    bool unbounded = ch == '*' || ch == '+';
    if (ch == '*' || ch == '+' || ch == '?') {
        if (ch != '+') r->empty = true;
        emit(c, "%c", ch);
        r->p++;
    } else if (ch == '{') {
        /* {m}, {m,} or {m,n} with the counts the grammar takes, checked here: a count the
         * grammar refused ("{}", "{,5}", "{3,1}") would reach users as a bug of the compiler */
        const char *q = r->p + 1;
        const long lo = rx_number(&q);
        long hi = lo;
        if (*q == ',') q++, hi = rx_number(&q); /* (none: no upper bound) */
        if (lo < 0 || *q != '}') {
            rx_fail(r, "a '{' that is not a {m}, {m,} or {m,n} count");
            return;
        }
        if (lo > ENG_GRAMMAR_MAX_REPEAT || hi > ENG_GRAMMAR_MAX_REPEAT) {
            char msg[48];
            snprintf(msg, sizeof(msg), "a count above %d", ENG_GRAMMAR_MAX_REPEAT);
            rx_fail(r, msg);
            return;
        }
        if (hi >= 0 && hi < lo) {
            rx_fail(r, "a {m,n} count with n < m");
            return;
        }
        if (hi == lo)
            emit(c, "{%ld}", lo);
        else if (hi < 0)
            emit(c, "{%ld,}", lo);
        else
            emit(c, "{%ld,%ld}", lo, hi);
        unbounded = hi < 0;
        if (!lo) r->empty = true;
        r->p = q + 1;
    } else {
        return;
    }
    if (unbounded && atom_empty) {
        rx_fail(r, "a repetition (*, + or {m,}) of a part that can match nothing: leave the empty choice out of "
                   "it, as in a* for (a?)* or (a|b)* for (a|b|)*");
        return;
    }
    if (*r->p == '?') r->p++; /* lazy: the same set of strings */
    if (*r->p == '+') rx_fail(r, "possessive quantifiers are not supported");
}

static void rx_seq(rx *r, int depth) {
    sc *c = r->c;
    bool any = false, empty = true;
    while (*r->p && *r->p != '|' && *r->p != ')' && !c->st) {
        if (*r->p == '$' && !r->p[1] && depth == 0) break;
        emit(c, any ? " " : "");
        rx_atom(r, depth);
        rx_quant(r);
        empty = empty && r->empty;
        any = true;
    }
    if (!any) emit(c, "\"\"");
    r->empty = empty;
}

static void rx_alt(rx *r, int depth) {
    if (depth > 32) {
        rx_fail(r, "groups nested too deeply");
        return;
    }
    rx_seq(r, depth);
    bool empty = r->empty;
    while (*r->p == '|' && !r->c->st) {
        r->p++;
        emit(r->c, " | ");
        rx_seq(r, depth);
        empty = empty || r->empty;
    }
    r->empty = empty;
}

/* JSON Schema patterns search: unanchored ends take any characters. */
static void regex_to_gbnf(sc *c, const char *re) {
    rx r = {c, re, re, false};
    const bool a0 = *re == '^';
    if (a0) r.p++;
    const size_t n = strlen(re);
    const bool a1 = n > 0 && re[n - 1] == '$' && (n < 2 || re[n - 2] != '\\');
    if (!a0) emit(c, "char* ");
    emit(c, "(");
    rx_alt(&r, 0);
    if (!c->st && *r.p == ')') rx_fail(&r, "')' without its '('");
    if (!c->st && *r.p == '$') r.p++;
    if (!c->st && *r.p) rx_fail(&r, "unexpected character");
    emit(c, ")");
    if (!a1) emit(c, " char*");
}

/* ---- integers in a range --------------------------------------------------------------------- */

static bool all_digit(const char *s, char d) {
    for (; *s; s++)
        if (*s != d) return false;
    return true;
}

/* Decimal strings of exactly the length of a and b, a <= x <= b (digit strings). A side whose
 * tail is all 0s (or all 9s) takes the middle's shape, so only one side recurses per digit and
 * the grammar grows linearly with the number of digits. */
static void digits_between(sc *c, const char *a, const char *b) {
    const size_t n = strlen(a);
    if (!n) return;
    if (a[0] == b[0]) {
        emit(c, "\"%c\"", a[0]);
        if (n > 1) {
            emit(c, " (");
            digits_between(c, a + 1, b + 1);
            emit(c, ")");
        }
        return;
    }
    const bool lo_free = all_digit(a + 1, '0'), hi_free = all_digit(b + 1, '9');
    char nines[32], zeros[32];
    memset(nines, '9', n - 1), nines[n - 1] = 0;
    memset(zeros, '0', n - 1), zeros[n - 1] = 0;
    const char first = lo_free ? a[0] : (char)(a[0] + 1), last = hi_free ? b[0] : (char)(b[0] - 1);
    bool any = false;
    emit(c, "(");
    if (!lo_free) {
        emit(c, "\"%c\" (", a[0]);
        digits_between(c, a + 1, nines);
        emit(c, ")");
        any = true;
    }
    if (first <= last) {
        emit(c, "%s[%c-%c]", any ? " | " : "", first, last);
        if (n > 1) emit(c, " [0-9]{%zu}", n - 1);
        any = true;
    }
    if (!hi_free) {
        emit(c, "%s\"%c\" (", any ? " | " : "", b[0]);
        digits_between(c, zeros, b + 1);
        emit(c, ")");
    }
    emit(c, ")");
}

/* Non-negative integers lo..hi (hi < 0: no bound), written without leading zeros. */
static void nonneg_range(sc *c, long long lo, long long hi) {
    char a[32], b[32];
    int la = snprintf(a, sizeof(a), "%lld", lo);
    const int lmax = hi < 0 ? MAX_DIGITS : snprintf(b, sizeof(b), "%lld", hi);
    emit(c, "(");
    bool first = true;
    for (int len = la; len <= lmax; len++) {
        char x[32], y[32];
        if (len == la) snprintf(x, sizeof(x), "%s", a);
        else snprintf(x, sizeof(x), "1%0*d", len - 1, 0);
        if (hi >= 0 && len == lmax) snprintf(y, sizeof(y), "%s", b);
        else memset(y, '9', (size_t)len), y[len] = 0;
        if (strlen(x) != (size_t)len) continue;
        if (!first) emit(c, " | ");
        first = false;
        emit(c, "(");
        digits_between(c, x, y);
        emit(c, ")");
    }
    emit(c, ")");
}

static void gen_integer(sc *c, json_t *s, int rule) {
    json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    json_t *xmn = json_object_get(s, "exclusiveMinimum"), *xmx = json_object_get(s, "exclusiveMaximum");
    if (!mn && !mx && !xmn && !xmx) {
        emit(c, "s%d ::= integer\n", rule);
        return;
    }
    const double big = 1e15;
    double lo = -big, hi = big;
    if (mn) lo = json_number_value(mn);
    if (xmn) lo = json_number_value(xmn) + 1;
    if (mx) hi = json_number_value(mx);
    if (xmx) hi = json_number_value(xmx) - 1;
    if (lo < -big || hi > big || ((mn || xmn) && (mx || xmx) && hi < lo) || lo != (double)(long long)lo ||
        hi != (double)(long long)hi) {
        fail(c, "integer bounds must be whole numbers within +-1e15 with minimum <= maximum");
        return;
    }
    const bool has_lo = mn || xmn, has_hi = mx || xmx;
    const long long L = (long long)lo, H = (long long)hi;
    emit(c, "s%d ::= ", rule);
    bool alt = false;
    if (!has_lo || L < 0) { /* the negative part: -(max(1,-H) .. -L) */
        const long long nlo = has_hi && H < 0 ? -H : 1, nhi = has_lo ? -L : -1;
        emit(c, "\"-\" ");
        nonneg_range(c, nlo, nhi);
        alt = true;
    }
    if (!has_hi || H >= 0) {
        if (alt) emit(c, " | ");
        nonneg_range(c, has_lo && L > 0 ? L : 0, has_hi ? H : -1);
    }
    emit(c, "\n");
}

static void gen_number(sc *c, json_t *s, int rule) {
    json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
    if (json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum") || mx ||
        (mn && json_number_value(mn) != 0)) {
        fail(c, "bounds on a number are supported as minimum: 0 only (use type integer for other ranges)");
        return;
    }
    emit(c, "s%d ::= %snumber\n", rule, mn ? "unsigned-" : "");
}

/* ---- objects and arrays ------------------------------------------------------------------------ */

/* Any key but the names: a trie of the names with, at each node, the way out. */
typedef struct knode {
    uint32_t cp[64];
    int child[64];
    int n;
    bool end;
} knode;


static void emit_other_key(sc *c, int rule, const char *const *names, size_t n_names) {
    knode *t = calloc(1 + 2048, sizeof(knode));
    if (!t) {
        c->st = dp_err_set(c->err, DP_ENOMEM, "schema: out of memory");
        return;
    }
    int nt = 1;
    for (size_t i = 0; i < n_names && !c->st; i++) {
        int at = 0;
        for (const char *p = names[i]; *p;) {
            const uint32_t cp = next_cp(&p);
            int k = 0;
            while (k < t[at].n && t[at].cp[k] != cp) k++;
            if (k == t[at].n) {
                if (t[at].n == 64 || nt > 2048) {
                    fail(c, "too many or too long property names beside additionalProperties");
                    break;
                }
                t[at].cp[k] = cp, t[at].child[k] = nt++, t[at].n++;
            }
            at = t[at].child[k];
        }
        t[at].end = true;
    }
    /* k<rule>-<node> ::= "\"" (end) | [^ children ] pchar* "\"" | child k-next */
    for (int i = 0; i < nt && !c->st; i++) {
        emit(c, "k%d-%d ::= ", rule, i);
        if (!t[i].end) emit(c, "\"\\\"\" | ");
        emit(c, "[^\"\\\\\\x00-\\x1F");
        for (int k = 0; k < t[i].n; k++) emit(c, t[i].cp[k] > 0xFFFF ? "\\U%08X" : "\\u%04X", t[i].cp[k]);
        emit(c, "] pchar* \"\\\"\"");
        for (int k = 0; k < t[i].n; k++) {
            emit(c, " | \"");
            emit(c, t[i].cp[k] > 0xFFFF ? "\\U%08X" : "\\u%04X", t[i].cp[k]);
            emit(c, "\" k%d-%d", rule, t[i].child[k]);
        }
        emit(c, "\n");
    }
    emit(c, "k%d ::= \"\\\"\" k%d-0\n", rule, rule);
    free(t);
}

static void gen_object(sc *c, json_t *s, int rule) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) {
        fail(c, "properties must be an object");
        return;
    }
    if (req && !json_is_array(req)) {
        fail(c, "required must be an array of names");
        return;
    }
    if (add && !json_is_boolean(add) && !json_is_object(add)) {
        fail(c, "additionalProperties must be true, false or a schema");
        return;
    }
    const size_t n = props ? json_object_size(props) : 0;
    /* without properties an object is open unless told otherwise; with them, closed unless told */
    const bool open = add ? !json_is_false(add) : n == 0;
    for (size_t i = 0; req && i < json_array_size(req); i++) {
        const char *r = json_string_value(json_array_get(req, i));
        if (!r || !json_object_get(props, r)) {
            fail(c, "required names '%s', which is not among the properties", r ? r : "?");
            return;
        }
    }
    const char **names = calloc(n + 1, sizeof(char *));
    int *vr = calloc(n + 1, sizeof(int));
    bool *rq = calloc(n + 1, sizeof(bool));
    if (!names || !vr || !rq) {
        free(names), free(vr), free(rq);
        c->st = dp_err_set(c->err, DP_ENOMEM, "schema: out of memory");
        return;
    }
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(props, k, v) {
        names[i] = k;
        for (size_t q = 0; req && q < json_array_size(req); q++)
            if (!strcmp(k, json_string_value(json_array_get(req, q)))) rq[i] = true;
        vr[i++] = sub(c, v, "properties", k);
    }
    int addv = -1;
    if (open) {
        addv = json_is_object(add) ? sub(c, add, "additionalProperties", NULL) : -1;
        emit_other_key(c, rule, names, n);
        if (addv >= 0) emit(c, "a%d ::= k%d ws \":\" ws s%d ws\n", rule, rule, addv);
        else emit(c, "a%d ::= k%d ws \":\" ws value ws\n", rule, rule);
    }
    /* kv i: "name" ws ":" ws value ws */
    for (i = 0; i < n; i++) {
        emit(c, "p%d-%zu ::= ", rule, i);
        json_t *name = json_string(names[i]);
        emit_json_lit(c, name);
        json_decref(name);
        emit(c, " ws \":\" ws s%d ws\n", vr[i]);
    }
    /* r i: props i..n after one was written */
    for (i = 0; i <= n; i++) {
        emit(c, "r%d-%zu ::= ", rule, i);
        if (i == n) emit(c, open ? "( \",\" ws a%d )*\n" : "\"\"\n", rule);
        else if (rq[i]) emit(c, "\",\" ws p%d-%zu r%d-%zu\n", rule, i, rule, i + 1);
        else emit(c, "( \",\" ws p%d-%zu )? r%d-%zu\n", rule, i, rule, i + 1);
    }
    /* f i: props i..n before any was written */
    for (i = 0; i <= n; i++) {
        emit(c, "f%d-%zu ::= ", rule, i);
        if (i == n) emit(c, open ? "( a%d r%d-%zu )?\n" : "\"\"\n", rule, rule, n);
        else if (rq[i]) emit(c, "p%d-%zu r%d-%zu\n", rule, i, rule, i + 1);
        else emit(c, "p%d-%zu r%d-%zu | f%d-%zu\n", rule, i, rule, i + 1, rule, i + 1);
    }
    emit(c, "s%d ::= \"{\" ws f%d-0 \"}\"\n", rule, rule);
    free(names), free(vr), free(rq);
}

static void gen_array(sc *c, json_t *s, int rule) {
    json_t *items = json_object_get(s, "items"), *pre = json_object_get(s, "prefixItems");
    json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
    if ((mn && !json_is_integer(mn)) || (mx && !json_is_integer(mx))) {
        fail(c, "minItems and maxItems must be integers");
        return;
    }
    if (pre && !json_is_array(pre)) {
        fail(c, "prefixItems must be an array of schemas");
        return;
    }
    if (items && !json_is_object(items) && !json_is_boolean(items)) {
        fail(c, "items must be a schema or false");
        return;
    }
    const long long lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : -1;
    const long long k = pre ? (long long)json_array_size(pre) : 0;
    if (lo < 0 || lo > 1000 || hi > 1000 || (mx && hi < lo)) {
        fail(c, "minItems/maxItems must be 0..1000 with minItems <= maxItems");
        return;
    }
    const bool more = !json_is_false(items); /* after the prefix */
    if (!more && lo > k) {
        fail(c, "minItems is above the number of prefixItems and items is false");
        return;
    }
    int *pr = calloc((size_t)k + 1, sizeof(int));
    if (!pr) {
        c->st = dp_err_set(c->err, DP_ENOMEM, "schema: out of memory");
        return;
    }
    for (long long i = 0; i < k; i++) {
        char idx[24];
        snprintf(idx, sizeof(idx), "%lld", i);
        pr[i] = sub(c, json_array_get(pre, (size_t)i), "prefixItems", idx);
    }
    const int it = json_is_object(items) ? sub(c, items, "items", NULL) : -1;
    /* e i: elements from index i on, i already written; bounded: up to last, else a free tail */
    const bool bounded = !more || hi >= 0;
    long long last = !more ? k : hi;
    if (!more && hi >= 0 && hi < last) last = hi;
    if (!bounded) last = lo > k ? lo : k;
    for (long long i = 0; i <= last && !c->st; i++) {
        emit(c, "e%d-%lld ::= ", rule, i);
        char el[32];
        if (i < k) snprintf(el, sizeof(el), "s%d", pr[i]);
        else if (it >= 0) snprintf(el, sizeof(el), "s%d", it);
        else snprintf(el, sizeof(el), "value");
        const char *sep = i ? "\",\" ws " : "";
        if (i == last && bounded) emit(c, "\"\"\n");
        else if (i == last) emit(c, "( %s%s ws ( \",\" ws %s ws )* )?\n", sep, el, el);
        else if (i < lo) emit(c, "%s%s ws e%d-%lld\n", sep, el, rule, i + 1);
        else emit(c, "( %s%s ws e%d-%lld )?\n", sep, el, rule, i + 1);
    }
    emit(c, "s%d ::= \"[\" ws e%d-0 \"]\"\n", rule, rule);
    free(pr);
}

/* ---- the walk ----------------------------------------------------------------------------------- */

/* The definition a $ref names, and the name of its rule in name: "def<N>-" and the definition's
 * name in letters and digits, N counting the definitions in the order first referred to (the
 * letters alone would give "a_b" and "a-b" one rule). */
static json_t *resolve_ref(sc *c, const char *ref, char *name, size_t cap) {
    const char *p = NULL;
    json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) p = ref + 8, defs = json_object_get(c->root, "$defs");
    else if (!strncmp(ref, "#/definitions/", 14)) p = ref + 14, defs = json_object_get(c->root, "definitions");
    else if (!strcmp(ref, "#")) return snprintf(name, cap, "root-schema"), c->root;
    json_t *d = p ? json_object_get(defs, p) : NULL;
    if (!d || strchr(p, '/')) return NULL;
    const char *known = json_string_value(json_object_get(c->def_names, ref));
    if (known) {
        snprintf(name, cap, "%s", known);
        return d;
    }
    size_t o = (size_t)snprintf(name, cap, "def%zu-", json_object_size(c->def_names));
    for (; *p && o + 1 < cap && o < 64; p++)
        name[o++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '-');
    name[o] = 0;
    json_object_set_new(c->def_names, ref, json_string(name));
    return d;
}

static void gen_alts(sc *c, json_t *list, const char *kw, int rule) {
    if (!json_is_array(list) || !json_array_size(list)) {
        fail(c, "%s must be a non-empty array of schemas", kw);
        return;
    }
    int r[256];
    size_t n = json_array_size(list);
    if (n > 256) {
        fail(c, "%s has more than 256 schemas", kw);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char idx[24];
        snprintf(idx, sizeof(idx), "%zu", i);
        r[i] = sub(c, json_array_get(list, i), kw, idx);
    }
    emit(c, "s%d ::= ", rule);
    for (size_t i = 0; i < n; i++) emit(c, "%ss%d", i ? " | " : "", r[i]);
    emit(c, "\n");
}

/* allOf of object schemas: one object with all their properties and required names. */
static void gen_all_of(sc *c, json_t *s, int rule) {
    json_t *list = json_object_get(s, "allOf");
    json_t *m = json_object(), *props = json_object(), *req = json_array();
    bool closed = false;
    for (size_t i = 0; json_is_array(list) && i < json_array_size(list); i++) {
        json_t *x = json_array_get(list, i), *r;
        if (json_is_object(x) && (r = json_object_get(x, "$ref"))) {
            char name[200];
            x = resolve_ref(c, json_string_value(r) ? json_string_value(r) : "", name, sizeof(name));
        }
        json_t *t = x ? json_object_get(x, "type") : NULL;
        if (!json_is_object(x) || (t && (!json_is_string(t) || strcmp(json_string_value(t), "object"))) ||
            json_object_get(x, "anyOf") || json_object_get(x, "oneOf") || json_object_get(x, "allOf")) {
            fail(c, "allOf is supported for object schemas (properties, required) only; entry %zu is not one", i);
            break;
        }
        if (json_is_object(json_object_get(x, "properties"))) json_object_update(props, json_object_get(x, "properties"));
        if (json_is_array(json_object_get(x, "required"))) json_array_extend(req, json_object_get(x, "required"));
        if (json_is_false(json_object_get(x, "additionalProperties"))) closed = true;
    }
    if (!json_is_array(list)) fail(c, "allOf must be an array of schemas");
    json_object_set_new(m, "type", json_string("object"));
    json_object_set(m, "properties", props);
    json_object_set(m, "required", req);
    json_object_set_new(m, "additionalProperties", json_boolean(!closed ? json_is_true(json_object_get(s, "additionalProperties")) : 0));
    if (!c->st) gen_object(c, m, rule);
    json_decref(m), json_decref(props), json_decref(req);
}

static void gen_type(sc *c, json_t *s, const char *t, int rule) {
    if (!strcmp(t, "object")) gen_object(c, s, rule);
    else if (!strcmp(t, "array")) gen_array(c, s, rule);
    else if (!strcmp(t, "string")) gen_string(c, s, rule);
    else if (!strcmp(t, "integer")) gen_integer(c, s, rule);
    else if (!strcmp(t, "number")) gen_number(c, s, rule);
    else if (!strcmp(t, "boolean")) emit(c, "s%d ::= boolean\n", rule);
    else if (!strcmp(t, "null")) emit(c, "s%d ::= null\n", rule);
    else fail(c, "unknown type '%s'", t);
}

static void gen_typed(sc *c, json_t *s, int rule);

static void gen(sc *c, json_t *s, int rule) {
    if (c->st) return;
    if (json_is_true(s) || (json_is_object(s) && !json_object_size(s))) {
        emit(c, "s%d ::= value\n", rule);
        return;
    }
    if (!json_is_object(s)) {
        fail(c, "a schema must be an object or true");
        return;
    }
    check_keywords(c, s);
    json_t *v;
    if ((v = json_object_get(s, "$ref"))) {
        char name[200];
        json_t *d = json_is_string(v) ? resolve_ref(c, json_string_value(v), name, sizeof(name)) : NULL;
        if (!d) {
            fail(c, "$ref '%s' is not #/$defs/NAME or #/definitions/NAME of this schema", json_string_value(v) ? json_string_value(v) : "?");
            return;
        }
        if (c->at_start)
            json_array_append_new(c->at_start_refs,
                                  json_pack("[ssss]", c->at_start, name, c->path, json_string_value(v)));
        emit(c, "s%d ::= %s\n", rule, name);
        if (!json_object_get(c->defs_done, name)) { /* written once; recursion refers to it by name */
            json_object_set_new(c->defs_done, name, json_true());
            char saved[sizeof(c->path)];
            memcpy(saved, c->path, sizeof(saved));
            snprintf(c->path, sizeof(c->path), "%s", json_string_value(v) + 1);
            const char *outer = c->at_start;
            c->at_start = name;
            const int r = sub(c, d, "", NULL);
            c->at_start = outer;
            memcpy(c->path, saved, sizeof(saved));
            emit(c, "%s ::= s%d\n", name, r);
        }
        return;
    }
    if ((v = json_object_get(s, "const"))) {
        emit(c, "s%d ::= ", rule);
        emit_json_lit(c, v);
        emit(c, "\n");
        return;
    }
    if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || !json_array_size(v)) {
            fail(c, "enum must be a non-empty array");
            return;
        }
        emit(c, "s%d ::= ", rule);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) emit(c, " | ");
            emit_json_lit(c, json_array_get(v, i));
        }
        emit(c, "\n");
        return;
    }
    if ((v = json_object_get(s, "anyOf")) || (v = json_object_get(s, "oneOf"))) {
        gen_alts(c, v, json_object_get(s, "anyOf") ? "anyOf" : "oneOf", rule);
        return;
    }
    /* what is left reads a character ({, [, a quote, a digit...) before any schema inside it */
    const char *outer = c->at_start;
    c->at_start = NULL;
    gen_typed(c, s, rule);
    c->at_start = outer;
}

/* An allOf, a type or a list of types, or what the keywords imply. */
static void gen_typed(sc *c, json_t *s, int rule) {
    if (json_object_get(s, "allOf")) {
        gen_all_of(c, s, rule);
        return;
    }
    json_t *t = json_object_get(s, "type");
    if (json_is_array(t)) { /* a list of types: one alternative each */
        int r[8];
        size_t n = json_array_size(t);
        if (!n || n > 8) {
            fail(c, "type lists hold 1 to 8 types");
            return;
        }
        for (size_t i = 0; i < n; i++) {
            const char *name = json_string_value(json_array_get(t, i));
            if (!name) {
                fail(c, "type lists hold type names");
                return;
            }
            r[i] = new_rule(c);
            gen_type(c, s, name, r[i]);
        }
        emit(c, "s%d ::= ", rule);
        for (size_t i = 0; i < n; i++) emit(c, "%ss%d", i ? " | " : "", r[i]);
        emit(c, "\n");
        return;
    }
    if (t && !json_is_string(t)) {
        fail(c, "type must be a name or a list of names");
        return;
    }
    const char *tn = t ? json_string_value(t) : NULL;
    if (!tn) { /* no type: what the keywords imply */
        if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") || json_object_get(s, "required")) tn = "object";
        else if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) tn = "array";
        else if (json_object_get(s, "pattern") || json_object_get(s, "format") || json_object_get(s, "minLength") || json_object_get(s, "maxLength")) tn = "string";
    }
    if (!tn) {
        emit(c, "s%d ::= value\n", rule);
        return;
    }
    gen_type(c, s, tn, rule);
}

static const char k_common[] =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,16}\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "pchar ::= [^\"\\\\\\x00-\\x1F]\n"
    "char ::= pchar | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-C] hex{3} | [dD] [0-7] hex{2} | [eEfF] hex{3} ) )\n"
    "hex ::= [0-9a-fA-F]\n"
    "unsigned-number ::= ( \"0\" | [1-9] [0-9]{0,14} ) ( \".\" [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?\n"
    "number ::= \"-\"? unsigned-number\n"
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,14} )\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    "d2 ::= [0-9] [0-9]\n"
    "fmt-date ::= [0-9] [0-9] [0-9] [0-9] \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )\n"
    "fmt-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "fmt-date-time ::= fmt-date \"T\" fmt-time\n"
    "fmt-uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n"
    "fmt-email ::= [a-zA-Z0-9._%+-]{1,64} \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,62} ( \".\" [a-zA-Z0-9] [a-zA-Z0-9-]{0,62} ){1,4}\n";

/* Edges e of list by one end: list[start[v] .. start[v + 1]) are those whose end[e] is v. */
static void edges_by(const size_t *end, size_t ne, size_t n, size_t *start, size_t *list, size_t *fill) {
    memset(start, 0, (n + 1) * sizeof(size_t));
    memset(fill, 0, n * sizeof(size_t));
    for (size_t e = 0; e < ne; e++)
        start[end[e] + 1]++;
    for (size_t v = 0; v < n; v++)
        start[v + 1] += start[v];
    for (size_t e = 0; e < ne; e++)
        list[start[end[e]] + fill[end[e]]++] = e;
}

/* Refuses a cycle of at_start_refs (see sc). Kahn's algorithm removes the definitions no cycle
 * runs through; every one left has an edge in from another one left, so walking those edges
 * backwards as many steps as there are definitions ends on a cycle, whose next edge is named. */
static void refuse_left_recursion(sc *c) {
    const size_t ne = json_array_size(c->at_start_refs), nv = 2 * ne; /* nv: at most, the ends */
    if (c->st || !ne) return;
    json_t *idx = json_object();
    size_t *from = malloc(ne * sizeof(size_t)), *to = malloc(ne * sizeof(size_t));
    size_t *ostart = malloc((nv + 1) * sizeof(size_t)), *out = malloc(ne * sizeof(size_t));
    size_t *istart = malloc((nv + 1) * sizeof(size_t)), *in = malloc(ne * sizeof(size_t));
    size_t *indeg = malloc(nv * sizeof(size_t)), *queue = malloc(nv * sizeof(size_t));
    if (!idx || !from || !to || !ostart || !out || !istart || !in || !indeg || !queue) {
        c->st = dp_err_set(c->err, DP_ENOMEM, "schema: out of memory");
        goto done;
    }
    size_t n = 0;
    for (size_t e = 0; e < ne; e++)
        for (int end = 0; end < 2; end++) {
            const char *name = json_string_value(json_array_get(json_array_get(c->at_start_refs, e), (size_t)end));
            json_t *k = json_object_get(idx, name);
            if (!k) json_object_set_new(idx, name, k = json_integer((json_int_t)n++));
            (end ? to : from)[e] = (size_t)json_integer_value(k);
        }
    edges_by(from, ne, n, ostart, out, indeg);
    edges_by(to, ne, n, istart, in, indeg);
    memset(indeg, 0, n * sizeof(size_t));
    for (size_t e = 0; e < ne; e++)
        indeg[to[e]]++;
    size_t qn = 0;
    for (size_t v = 0; v < n; v++)
        if (!indeg[v]) queue[qn++] = v;
    for (size_t qi = 0; qi < qn; qi++)
        for (size_t i = ostart[queue[qi]]; i < ostart[queue[qi] + 1]; i++)
            if (!--indeg[to[out[i]]]) queue[qn++] = to[out[i]];
    if (qn < n) {
        size_t v = 0, e = 0;
        while (!indeg[v])
            v++;
        for (size_t step = 0; step <= n; step++) {
            for (size_t i = istart[v]; i < istart[v + 1]; i++)
                if (indeg[from[in[i]]]) {
                    e = in[i];
                    break;
                }
            v = from[e];
        }
        json_t *edge = json_array_get(c->at_start_refs, e);
        snprintf(c->path, sizeof(c->path), "%s", json_string_value(json_array_get(edge, 2)));
        fail(c,
             "$ref '%s' leads back to itself without reading anything (through $ref, anyOf or oneOf only); "
             "recursion must pass through an array or an object",
             json_string_value(json_array_get(edge, 3)));
    }
done:
    json_decref(idx);
    free(from), free(to), free(ostart), free(out), free(istart), free(in), free(indeg), free(queue);
}

dp_status pl_schema_to_gbnf(const char *schema, size_t len, dp_buf *out, dp_err *err) {
    json_error_t je;
    json_t *root = json_loadb(schema, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return dp_err_set(err, DP_EFORMAT, "schema: not JSON: line %d column %d: %s", je.line, je.column, je.text);
    sc c = {.out = out,
            .root = root,
            .err = err,
            .defs_done = json_object(),
            .def_names = json_object(),
            .at_start_refs = json_array()};
    const int r = new_rule(&c);
    emit(&c, "root ::= s%d\n", r);
    gen(&c, root, r);
    refuse_left_recursion(&c);
    if (!c.st && dp_buf_append(out, k_common, sizeof(k_common) - 1))
        c.st = dp_err_set(err, DP_ENOMEM, "schema: the grammar grew too large");
    json_decref(c.defs_done);
    json_decref(c.def_names);
    json_decref(c.at_start_refs);
    json_decref(root);
    return c.st;
}

dp_status pl_json_object_gbnf(dp_buf *out, dp_err *err) {
    if (dp_buf_append(out, "root ::= object\n", 16) || dp_buf_append(out, k_common, sizeof(k_common) - 1))
        return dp_err_set(err, DP_ENOMEM, "out of memory");
    return DP_OK;
}

dp_status pl_grammar_from_file(const char *path, bool schema, dp_buf *out, dp_err *err) {
    char *text = NULL;
    size_t len = 0;
    dp_status st = dp_file_read_all(path, (size_t)1 << 24, &text, &len, err);
    if (st) return st;
    dp_err e = {0};
    if (schema) st = pl_schema_to_gbnf(text, len, out, &e);
    else st = dp_buf_append(out, text, len) ? dp_err_set(&e, DP_ENOMEM, "out of memory") : DP_OK;
    if (!st) st = eng_grammar_check((const char *)out->data, out->len, &e);
    free(text);
    if (st) dp_err_set(err, st, "%s: %s%s", path, schema && st == DP_EFORMAT && !strncmp(e.msg, "grammar", 7)
                       ? "the grammar made of the schema is refused (a bug; please report it): " : "", e.msg);
    return st;
}
