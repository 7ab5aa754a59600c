/*
 * grammar.c - GBNF text (llama.cpp's grammar syntax) to the byte-level program of grammar.h.
 *
 * Syntax accepted: `name ::= alternatives` rules (names of letters, digits and '-'), `|`,
 * "literals" and [classes] / [^negated] with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
 * \UHHHHHHHH, `.` (any character), ( groups ), postfix * + ? {m} {m,} {m,n}, and # comments.
 * A newline ends a rule except inside parentheses or right after `|`. The start rule is root.
 * Token references (<[id]>, <think>) are refused by name rather than misread.
 *
 * Repetitions become right-recursive helper rules (x* = r ::= x r | ), bounded ones a chain of
 * optional rules, so that the matcher's stacks stay as deep as the grammar's nesting, not as
 * long as the text. Left recursion would make the matcher loop; it is found here and refused.
 */
#include "grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_RULES = 1 << 20, MAX_SYMS = 1 << 22, MAX_NEST = 256 };

typedef struct gsym {
    int32_t kind; /* GEL_SET or GEL_REF */
    int32_t arg;
} gsym;

typedef struct galt {
    gsym *s;
    int32_t n, cap;
} galt;

typedef struct grule {
    char *name; /* NULL for helper rules */
    galt *alts;
    int32_t n_alts, cap_alts;
    int32_t line;    /* where it was defined, or first used while undefined */
    bool defined;
} grule;

typedef struct gb {
    grule *r;
    int32_t n_rules, cap_rules;
    gbytes *sets;
    int32_t n_sets, cap_sets;
    int64_t n_syms;
    const char *text, *p, *end;
    int32_t line;
    const char *line_start;
    dp_err *err;
    dp_status st;
    int32_t nest; /* parentheses open where the parser is (it recurses into each) */
} gb;

static dp_status fail(gb *b, const char *fmt, const char *what) {
    if (b->st) return b->st;
    const int col = (int)(b->p - b->line_start) + 1;
    char msg[200];
    snprintf(msg, sizeof(msg), fmt, what ? what : "");
    b->st = dp_err_set(b->err, DP_EFORMAT, "grammar line %d column %d: %s", (int)b->line, col, msg);
    return b->st;
}

static dp_status oom(gb *b) {
    if (!b->st) b->st = dp_err_set(b->err, DP_ENOMEM, "grammar: out of memory");
    return b->st;
}

/* ---- building blocks ------------------------------------------------------------------ */

static int32_t new_rule(gb *b, const char *name, size_t len) {
    if (b->n_rules >= MAX_RULES) return oom(b), -1;
    if (b->n_rules == b->cap_rules) {
        int32_t cap = b->cap_rules ? b->cap_rules * 2 : 64;
        grule *r = realloc(b->r, (size_t)cap * sizeof(*r));
        if (!r) return oom(b), -1;
        b->r = r, b->cap_rules = cap;
    }
    grule *r = &b->r[b->n_rules];
    memset(r, 0, sizeof(*r));
    if (name) {
        if (!(r->name = malloc(len + 1))) return oom(b), -1;
        memcpy(r->name, name, len);
        r->name[len] = 0;
    }
    r->line = b->line;
    return b->n_rules++;
}

static int32_t find_rule(gb *b, const char *name, size_t len) {
    for (int32_t i = 0; i < b->n_rules; i++)
        if (b->r[i].name && strlen(b->r[i].name) == len && !memcmp(b->r[i].name, name, len)) return i;
    return -1;
}

static galt *new_alt(gb *b, int32_t rule) {
    grule *r = &b->r[rule];
    if (r->n_alts == r->cap_alts) {
        int32_t cap = r->cap_alts ? r->cap_alts * 2 : 4;
        galt *a = realloc(r->alts, (size_t)cap * sizeof(*a));
        if (!a) return oom(b), NULL;
        r->alts = a, r->cap_alts = cap;
    }
    galt *a = &r->alts[r->n_alts++];
    memset(a, 0, sizeof(*a));
    return a;
}

static dp_status push_sym(gb *b, galt *a, int32_t kind, int32_t arg) {
    if (++b->n_syms > MAX_SYMS) return fail(b, "the grammar expands to more than %s symbols", "4194304");
    if (a->n == a->cap) {
        int32_t cap = a->cap ? a->cap * 2 : 8;
        gsym *s = realloc(a->s, (size_t)cap * sizeof(*s));
        if (!s) return oom(b);
        a->s = s, a->cap = cap;
    }
    a->s[a->n++] = (gsym){kind, arg};
    return DP_OK;
}

static int32_t add_set(gb *b, const gbytes *s) {
    for (int32_t i = b->n_sets - 1; i >= 0 && i >= b->n_sets - 64; i--)
        if (!memcmp(&b->sets[i], s, sizeof(*s))) return i;
    if (b->n_sets == b->cap_sets) {
        int32_t cap = b->cap_sets ? b->cap_sets * 2 : 64;
        gbytes *n = realloc(b->sets, (size_t)cap * sizeof(*n));
        if (!n) return oom(b), -1;
        b->sets = n, b->cap_sets = cap;
    }
    b->sets[b->n_sets] = *s;
    return b->n_sets++;
}

static void set_range(gbytes *s, unsigned lo, unsigned hi) {
    for (unsigned c = lo; c <= hi; c++) s->w[c >> 6] |= 1ull << (c & 63);
}

static dp_status push_byte(gb *b, galt *a, uint8_t c) {
    gbytes s = {{0}};
    set_range(&s, c, c);
    int32_t i = add_set(b, &s);
    return i < 0 ? b->st : push_sym(b, a, GEL_SET, i);
}

/* ---- code point ranges to UTF-8 byte-set sequences ------------------------------------- */

typedef struct cprange { uint32_t lo, hi; } cprange;

static int utf8_enc(uint32_t c, uint8_t *o) {
    if (c < 0x80) return o[0] = (uint8_t)c, 1;
    if (c < 0x800) return o[0] = (uint8_t)(0xC0 | c >> 6), o[1] = (uint8_t)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return o[0] = (uint8_t)(0xE0 | c >> 12), o[1] = (uint8_t)(0x80 | ((c >> 6) & 63)), o[2] = (uint8_t)(0x80 | (c & 63)), 3;
    o[0] = (uint8_t)(0xF0 | c >> 18), o[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 63)), o[3] = (uint8_t)(0x80 | (c & 63));
    return 4;
}

typedef struct seqs {
    uint8_t lo[64][4], hi[64][4], n[64];
    int count;
    gbytes ascii;
    bool any_ascii;
} seqs;

/* Splits [lo, hi] (one encoded length, no surrogates) until every piece is a product of byte
 * ranges, the way regular-expression engines compile Unicode classes. */
static void utf8_split(seqs *q, uint32_t lo, uint32_t hi) {
    static const uint32_t bound[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= bound[i] && hi > bound[i]) {
            utf8_split(q, lo, bound[i]);
            utf8_split(q, bound[i] + 1, hi);
            return;
        }
    if (hi < 0x80) {
        set_range(&q->ascii, lo, hi);
        q->any_ascii = true;
        return;
    }
    uint8_t a[4], z[4];
    const int n = utf8_enc(lo, a);
    for (int i = 1; i < n; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_split(q, lo, lo | m);
                utf8_split(q, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_split(q, lo, (hi & ~m) - 1);
                utf8_split(q, hi & ~m, hi);
                return;
            }
        }
    }
    utf8_enc(hi, z);
    if (q->count == 64) return; /* cannot happen: a class splits into < 40 pieces */
    memcpy(q->lo[q->count], a, 4);
    memcpy(q->hi[q->count], z, 4);
    q->n[q->count++] = (uint8_t)n;
}

/* The symbol that matches one character of the sorted, merged ranges: a byte set, or a helper
 * rule of byte-set runs (which may move b->r: callers re-find their alternative after). */
static dp_status class_sym(gb *b, const cprange *r, int n, gsym *out) {
    seqs q;
    memset(&q, 0, sizeof(q));
    for (int i = 0; i < n; i++) {
        uint32_t lo = r[i].lo, hi = r[i].hi > 0x10FFFF ? 0x10FFFF : r[i].hi;
        if (lo > hi) continue;
        if (lo < 0xD800 && hi > 0xDFFF) { /* surrogates have no UTF-8 form */
            utf8_split(&q, lo, 0xD7FF);
            utf8_split(&q, 0xE000, hi);
        } else if (lo >= 0xD800 && hi <= 0xDFFF) {
            continue;
        } else {
            if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
            if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
            if (lo <= hi) utf8_split(&q, lo, hi);
        }
    }
    if (!q.any_ascii && !q.count) return fail(b, "a character class that matches nothing%s", "");
    if (!q.count) {
        int32_t s = add_set(b, &q.ascii);
        *out = (gsym){GEL_SET, s};
        return s < 0 ? b->st : DP_OK;
    }
    const int32_t rule = new_rule(b, NULL, 0);
    if (rule < 0) return b->st;
    b->r[rule].defined = true;
    if (q.any_ascii) {
        galt *x = new_alt(b, rule);
        int32_t s = x ? add_set(b, &q.ascii) : -1;
        if (s < 0 || push_sym(b, x, GEL_SET, s)) return b->st ? b->st : oom(b);
    }
    for (int k = 0; k < q.count; k++) {
        galt *x = new_alt(b, rule);
        if (!x) return b->st;
        for (int j = 0; j < q.n[k]; j++) {
            gbytes s = {{0}};
            set_range(&s, q.lo[k][j], q.hi[k][j]);
            int32_t si = add_set(b, &s);
            if (si < 0 || push_sym(b, x, GEL_SET, si)) return b->st;
        }
    }
    *out = (gsym){GEL_REF, rule};
    return DP_OK;
}

/* ---- parsing ---------------------------------------------------------------------------- */

static void skip_space(gb *b, bool newlines) {
    while (b->p < b->end) {
        const char c = *b->p;
        if (c == '#') {
            while (b->p < b->end && *b->p != '\n') b->p++;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            b->p++;
        } else if (c == '\n' && newlines) {
            b->p++;
            b->line++;
            b->line_start = b->p;
        } else {
            break;
        }
    }
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class: an escape or a UTF-8 encoded code point. */
static bool parse_char(gb *b, uint32_t *out) {
    if (b->p >= b->end) return fail(b, "unexpected end of the grammar%s", ""), false;
    unsigned char c = (unsigned char)*b->p;
    if (c == '\n') return fail(b, "a literal or class runs into the end of the line%s", ""), false;
    if (c == '\\') {
        b->p++;
        if (b->p >= b->end) return fail(b, "unexpected end of the grammar after '\\'%s", ""), false;
        const char e = *b->p++;
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int h = b->p < b->end ? hexval(*b->p) : -1;
                if (h < 0) return fail(b, "\\%s escape needs hexadecimal digits", e == 'x' ? "x" : e == 'u' ? "u" : "U"), false;
                v = v << 4 | (uint32_t)h;
                b->p++;
            }
            if (v > 0x10FFFF) return fail(b, "code point past U+10FFFF%s", ""), false;
            *out = v;
            return true;
        }
        switch (e) {
        case 'n': *out = '\n'; return true;
        case 'r': *out = '\r'; return true;
        case 't': *out = '\t'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '/': case '^': case '\'': *out = (uint8_t)e; return true;
        default: {
            char w[2] = {e, 0};
            return fail(b, "unknown escape '\\%s'", w), false;
        }
        }
    }
    /* a UTF-8 sequence as it stands in the grammar text */
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || b->p + n > b->end) return fail(b, "the grammar text is not valid UTF-8%s", ""), false;
    uint32_t v = n == 1 ? c : n == 2 ? (c & 31u) : n == 3 ? (c & 15u) : (c & 7u);
    for (int i = 1; i < n; i++) {
        unsigned char d = (unsigned char)b->p[i];
        if ((d & 0xC0) != 0x80) return fail(b, "the grammar text is not valid UTF-8%s", ""), false;
        v = v << 6 | (d & 63u);
    }
    b->p += n;
    *out = v;
    return true;
}

static int cmp_range(const void *x, const void *y) {
    const cprange *a = x, *c = y;
    return a->lo < c->lo ? -1 : a->lo > c->lo;
}

static dp_status parse_class(gb *b, gsym *out) {
    b->p++; /* [ */
    bool neg = b->p < b->end && *b->p == '^';
    if (neg) b->p++;
    cprange *r = NULL;
    int n = 0, cap = 0;
    while (b->p < b->end && *b->p != ']') {
        uint32_t lo, hi;
        if (!parse_char(b, &lo)) break;
        hi = lo;
        if (b->p + 1 < b->end && *b->p == '-' && b->p[1] != ']') {
            b->p++;
            if (!parse_char(b, &hi)) break;
            if (hi < lo) {
                fail(b, "a class range runs backwards%s", "");
                break;
            }
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            cprange *x = realloc(r, (size_t)(cap + 2) * sizeof(*r));
            if (!x) {
                oom(b);
                break;
            }
            r = x;
        }
        r[n++] = (cprange){lo, hi};
    }
    if (!b->st && b->p >= b->end) fail(b, "a character class is not closed with ']'%s", "");
    if (b->st) {
        free(r);
        return b->st;
    }
    b->p++; /* ] */
    if (!r && !(r = malloc(2 * sizeof(*r)))) return oom(b);
    qsort(r, (size_t)n, sizeof(*r), cmp_range);
    int m = 0; /* merge */
    for (int i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    if (neg) { /* complement within [0, 0x10FFFF] */
        cprange *c = malloc((size_t)(m + 2) * sizeof(*c));
        if (!c) {
            free(r);
            return oom(b);
        }
        int k = 0;
        uint32_t next = 0;
        for (int i = 0; i < m; i++) {
            if (r[i].lo > next) c[k++] = (cprange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) c[k++] = (cprange){next, 0x10FFFF};
        free(r);
        r = c, m = k;
    }
    dp_status st = class_sym(b, r, m, out);
    free(r);
    return st;
}

static dp_status parse_alternatives(gb *b, int32_t rule, bool nested);

/* Replaces the item a->s[from..n) by x{lo,hi} (hi < 0: unbounded). */
static dp_status repeat(gb *b, int32_t rule, int32_t alt_i, int32_t from, long lo, long hi) {
    galt *a = &b->r[rule].alts[alt_i];
    if (from >= a->n) return fail(b, "a repetition without anything before it%s", "");
    if (lo > ENG_GRAMMAR_MAX_REPEAT || hi > ENG_GRAMMAR_MAX_REPEAT) {
        char max[16];
        snprintf(max, sizeof(max), "%d", ENG_GRAMMAR_MAX_REPEAT);
        return fail(b, "a repetition count above %s", max);
    }
    gsym item = a->s[from];
    if (a->n - from > 1) { /* a literal of several bytes: one helper rule for the item */
        int32_t h = new_rule(b, NULL, 0);
        if (h < 0) return b->st;
        a = &b->r[rule].alts[alt_i];
        b->r[h].defined = true;
        galt *x = new_alt(b, h);
        if (!x) return b->st;
        a = &b->r[rule].alts[alt_i];
        for (int32_t i = from; i < a->n; i++)
            if (push_sym(b, x, a->s[i].kind, a->s[i].arg)) return b->st;
        item = (gsym){GEL_REF, h};
    }
    a->n = from;
    for (long i = 0; i < lo; i++)
        if (push_sym(b, &b->r[rule].alts[alt_i], item.kind, item.arg)) return b->st;
    if (hi >= 0 && hi == lo) return DP_OK;
    int32_t tail;
    if (hi < 0) { /* t ::= x t | */
        if ((tail = new_rule(b, NULL, 0)) < 0) return b->st;
        b->r[tail].defined = true;
        galt *x = new_alt(b, tail);
        if (!x || push_sym(b, x, item.kind, item.arg) || push_sym(b, x, GEL_REF, tail) || !new_alt(b, tail))
            return b->st ? b->st : oom(b);
    } else { /* o1 ::= x | ; ok ::= x o(k-1) | */
        tail = -1;
        for (long k = 1; k <= hi - lo; k++) {
            int32_t o = new_rule(b, NULL, 0);
            if (o < 0) return b->st;
            b->r[o].defined = true;
            galt *x = new_alt(b, o);
            if (!x || push_sym(b, x, item.kind, item.arg) || (tail >= 0 && push_sym(b, x, GEL_REF, tail)) ||
                !new_alt(b, o))
                return b->st ? b->st : oom(b);
            tail = o;
        }
    }
    return push_sym(b, &b->r[rule].alts[alt_i], GEL_REF, tail);
}

static bool parse_count(gb *b, long *v) {
    if (b->p >= b->end || *b->p < '0' || *b->p > '9') return false;
    long x = 0;
    while (b->p < b->end && *b->p >= '0' && *b->p <= '9') {
        x = x * 10 + (*b->p++ - '0');
        if (x > 100000000) x = 100000000;
    }
    *v = x;
    return true;
}

static dp_status parse_sequence(gb *b, int32_t rule, bool nested) {
    galt *a = new_alt(b, rule);
    if (!a) return b->st;
    const int32_t alt_i = b->r[rule].n_alts - 1;
    int32_t item = -1; /* where the last item starts, for a postfix operator */
    for (;;) {
        skip_space(b, nested);
        if (b->p >= b->end) break;
        a = &b->r[rule].alts[alt_i];
        const char c = *b->p;
        if (c == '"') {
            b->p++;
            item = a->n;
            while (b->p < b->end && *b->p != '"') {
                uint32_t cp;
                if (!parse_char(b, &cp)) return b->st;
                uint8_t e[4];
                int n = utf8_enc(cp, e);
                for (int i = 0; i < n; i++)
                    if (push_byte(b, &b->r[rule].alts[alt_i], e[i])) return b->st;
            }
            if (b->p >= b->end) return fail(b, "a literal is not closed with '\"'%s", "");
            b->p++;
            if (b->r[rule].alts[alt_i].n == item) item = -1; /* "" adds nothing */
        } else if (c == '[' || c == '.') {
            gsym s;
            cprange any = {0, 0x10FFFF};
            if (c == '.') b->p++;
            if (c == '[' ? parse_class(b, &s) : class_sym(b, &any, 1, &s)) return b->st;
            item = b->r[rule].alts[alt_i].n;
            if (push_sym(b, &b->r[rule].alts[alt_i], s.kind, s.arg)) return b->st;
        } else if (is_name_char(c)) {
            const char *s = b->p;
            while (b->p < b->end && is_name_char(*b->p)) b->p++;
            const char *e = b->p;
            skip_space(b, false);
            if (b->p + 2 < b->end && !memcmp(b->p, "::=", 3)) { /* the next rule begins */
                if (!nested) {
                    b->p = s;
                    break;
                }
                return fail(b, "a new rule inside parentheses; is a ')' missing?%s", "");
            }
            int32_t r = find_rule(b, s, (size_t)(e - s));
            if (r < 0 && (r = new_rule(b, s, (size_t)(e - s))) < 0) return b->st;
            item = b->r[rule].alts[alt_i].n;
            if (push_sym(b, &b->r[rule].alts[alt_i], GEL_REF, r)) return b->st;
        } else if (c == '(') {
            if (b->nest == MAX_NEST) return fail(b, "parentheses nested deeper than %s", "256");
            b->p++;
            int32_t g = new_rule(b, NULL, 0);
            if (g < 0) return b->st;
            b->r[g].defined = true;
            b->nest++;
            if (parse_alternatives(b, g, true)) return b->st;
            b->nest--;
            skip_space(b, true);
            if (b->p >= b->end || *b->p != ')') return fail(b, "'(' without its ')'%s", "");
            b->p++;
            item = b->r[rule].alts[alt_i].n;
            if (push_sym(b, &b->r[rule].alts[alt_i], GEL_REF, g)) return b->st;
        } else if (c == '*' || c == '+' || c == '?') {
            b->p++;
            if (item < 0) return fail(b, "'%s' without anything before it", c == '*' ? "*" : c == '+' ? "+" : "?");
            if (repeat(b, rule, alt_i, item, c == '+' ? 1 : 0, c == '?' ? 1 : -1)) return b->st;
            item = -1;
        } else if (c == '{') {
            b->p++;
            long lo = 0, hi = -1;
            skip_space(b, false);
            if (!parse_count(b, &lo)) return fail(b, "'{' needs a count%s", "");
            skip_space(b, false);
            if (b->p < b->end && *b->p == ',') {
                b->p++;
                skip_space(b, false);
                if (!parse_count(b, &hi)) hi = -1;
                else if (hi < lo) return fail(b, "{m,n} with n < m%s", "");
            } else {
                hi = lo;
            }
            skip_space(b, false);
            if (b->p >= b->end || *b->p != '}') return fail(b, "'{' without its '}'%s", "");
            b->p++;
            if (item < 0) return fail(b, "'{' without anything before it%s", "");
            if (repeat(b, rule, alt_i, item, lo, hi)) return b->st;
            item = -1;
        } else if (c == '<') {
            return fail(b, "token references (<...>) are not supported; write the text as a literal%s", "");
        } else if (c == '|' || c == ')' || c == '\n') {
            break;
        } else {
            char w[2] = {c, 0};
            return fail(b, "unexpected '%s'", w);
        }
    }
    return b->st;
}

static dp_status parse_alternatives(gb *b, int32_t rule, bool nested) {
    for (;;) {
        if (parse_sequence(b, rule, nested)) return b->st;
        skip_space(b, nested);
        if (b->p < b->end && *b->p == '|') {
            b->p++;
            skip_space(b, true); /* a newline may follow '|' */
            continue;
        }
        return DP_OK;
    }
}

static dp_status parse_rules(gb *b) {
    for (;;) {
        skip_space(b, true);
        if (b->p >= b->end) return DP_OK;
        const char *s = b->p;
        while (b->p < b->end && is_name_char(*b->p)) b->p++;
        if (b->p == s) {
            char w[2] = {*b->p, 0};
            return fail(b, "a rule name was expected, found '%s'", w);
        }
        const size_t len = (size_t)(b->p - s);
        skip_space(b, false);
        if (b->end - b->p < 3 || memcmp(b->p, "::=", 3)) return fail(b, "'::=' was expected after the rule name%s", "");
        b->p += 3;
        skip_space(b, true); /* the body may start on the next line */
        int32_t r = find_rule(b, s, len);
        if (r >= 0 && b->r[r].defined) {
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)(len > 60 ? 60 : len), s);
            return fail(b, "rule '%s' is defined twice", name);
        }
        if (r < 0 && (r = new_rule(b, s, len)) < 0) return b->st;
        b->r[r].defined = true;
        b->r[r].line = b->line;
        if (parse_alternatives(b, r, false)) return b->st;
        skip_space(b, false);
        if (b->p < b->end && *b->p == ')') return fail(b, "')' without its '('%s", "");
        if (b->p < b->end && *b->p != '\n') {
            char w[2] = {*b->p, 0};
            return fail(b, "unexpected '%s' at the end of a rule", w);
        }
    }
}

/* ---- checks and flattening ---------------------------------------------------------------- */

/* A rule that can start with itself without consuming a byte makes the matcher loop. */
static dp_status check_left_recursion(gb *b) {
    const int32_t n = b->n_rules;
    bool *nullable = calloc((size_t)n, 1);
    uint8_t *mark = calloc((size_t)n, 1);
    int32_t *stack = malloc((size_t)n * 3 * sizeof(int32_t)); /* [rule, alternative, element] per level */
    if (!nullable || !mark || !stack) {
        free(nullable), free(mark), free(stack);
        return oom(b);
    }
    /* nullable rules by a work list (a fixed-point loop over all rules is quadratic on the long
     * chains of helper rules that counted repetitions make): each alternative counts the
     * symbols not yet known to be nullable; a rule becomes nullable when one reaches 0 */
    int32_t n_alts = 0, n_refs = 0;
    for (int32_t r = 0; r < n; r++) {
        n_alts += b->r[r].n_alts;
        for (int32_t k = 0; k < b->r[r].n_alts; k++) n_refs += b->r[r].alts[k].n;
    }
    int32_t *left = malloc(((size_t)n_alts + 1) * sizeof(int32_t)), *owner = malloc(((size_t)n_alts + 1) * sizeof(int32_t));
    int32_t *use_off = calloc((size_t)n + 1, sizeof(int32_t)), *uses = malloc(((size_t)n_refs + 1) * sizeof(int32_t));
    int32_t *queue = malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!left || !owner || !use_off || !uses || !queue) {
        free(left), free(owner), free(use_off), free(uses), free(queue), free(nullable), free(mark), free(stack);
        return oom(b);
    }
    int32_t ai = 0, qn = 0;
    for (int32_t r = 0; r < n; r++)
        for (int32_t k = 0; k < b->r[r].n_alts; k++) {
            const galt *a = &b->r[r].alts[k];
            bool set = false;
            for (int32_t i = 0; i < a->n; i++)
                if (a->s[i].kind == GEL_SET) set = true;
                else use_off[a->s[i].arg + 1]++;
            owner[ai] = r;
            left[ai++] = set ? -1 : a->n; /* -1: holds a byte set, never nullable */
        }
    for (int32_t r = 0; r < n; r++) use_off[r + 1] += use_off[r];
    {
        int32_t *fill = calloc((size_t)n + 1, sizeof(int32_t));
        if (!fill) {
            free(left), free(owner), free(use_off), free(uses), free(queue), free(nullable), free(mark), free(stack);
            return oom(b);
        }
        ai = 0;
        for (int32_t r = 0; r < n; r++)
            for (int32_t k = 0; k < b->r[r].n_alts; k++, ai++) {
                const galt *a = &b->r[r].alts[k];
                for (int32_t i = 0; i < a->n; i++)
                    if (a->s[i].kind == GEL_REF) uses[use_off[a->s[i].arg] + fill[a->s[i].arg]++] = ai;
                if (left[ai] == 0 && !nullable[r]) nullable[r] = true, queue[qn++] = r;
            }
        free(fill);
    }
    for (int32_t qi = 0; qi < qn; qi++) {
        const int32_t x = queue[qi];
        for (int32_t u = use_off[x]; u < use_off[x + 1]; u++) {
            const int32_t al = uses[u];
            if (left[al] > 0 && --left[al] == 0 && !nullable[owner[al]]) nullable[owner[al]] = true, queue[qn++] = owner[al];
        }
    }
    free(left), free(owner), free(use_off), free(uses), free(queue);
    /* depth-first over "may begin with" edges; mark 1 = on the path, 2 = done. A level keeps
     * where its walk over the rule's alternatives stands (a rule's edges are the references of
     * each alternative's nullable prefix and the one after it), so that a rule with many edges
     * (the expansion of "( x? ){100000}") is walked once, not once per edge. */
    for (int32_t root = 0; root < n && !b->st; root++) {
        if (mark[root]) continue;
        int32_t sp = 0;
        stack[sp++] = root, stack[sp++] = 0, stack[sp++] = 0;
        mark[root] = 1;
        while (sp && !b->st) {
            const int32_t r = stack[sp - 3];
            int32_t *k = &stack[sp - 2], *i = &stack[sp - 1];
            int32_t next = -1;
            while (next < 0 && *k < b->r[r].n_alts) {
                const galt *a = &b->r[r].alts[*k];
                if (*i < a->n && a->s[*i].kind == GEL_REF) {
                    next = a->s[*i].arg;
                    if (nullable[next])
                        (*i)++;
                    else
                        (*k)++, *i = 0;
                } else {
                    (*k)++, *i = 0;
                }
            }
            if (next < 0) {
                mark[r] = 2;
                sp -= 3;
                continue;
            }
            if (mark[next] == 1) {
                int32_t named = next;
                for (int32_t q = sp - 3; q >= 0 && !b->r[named].name; q -= 3)
                    named = stack[q];
                b->st = dp_err_set(b->err, DP_EFORMAT, "grammar line %d: rule '%s' is left-recursive (it can begin "
                                   "with itself without reading a character)", (int)b->r[named].line,
                                   b->r[named].name ? b->r[named].name : "?");
            } else if (!mark[next]) {
                mark[next] = 1;
                stack[sp++] = next, stack[sp++] = 0, stack[sp++] = 0;
            }
        }
    }
    free(nullable), free(mark), free(stack);
    return b->st;
}

static dp_status flatten(gb *b, int32_t root, int32_t lead, gprog *p) {
    int32_t n_alts = 0;
    int64_t n_el = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        n_alts += b->r[r].n_alts;
        for (int32_t k = 0; k < b->r[r].n_alts; k++) n_el += b->r[r].alts[k].n + 1;
    }
    memset(p, 0, sizeof(*p));
    p->el = malloc((size_t)n_el * sizeof(gel));
    p->alt_start = malloc((size_t)(n_alts + 1) * sizeof(int32_t));
    p->rule_alt = malloc((size_t)(b->n_rules + 1) * sizeof(int32_t));
    if (!p->el || !p->alt_start || !p->rule_alt) {
        gprog_free(p);
        return oom(b);
    }
    int32_t ai = 0, ei = 0;
    for (int32_t r = 0; r < b->n_rules; r++) {
        p->rule_alt[r] = ai;
        for (int32_t k = 0; k < b->r[r].n_alts; k++) {
            const galt *a = &b->r[r].alts[k];
            p->alt_start[ai++] = ei;
            for (int32_t i = 0; i < a->n; i++) p->el[ei++] = (gel){(uint8_t)a->s[i].kind, a->s[i].arg};
            p->el[ei++] = (gel){GEL_END, 0};
        }
    }
    p->rule_alt[b->n_rules] = ai;
    p->n_el = ei;
    p->n_rules = b->n_rules;
    p->sets = b->sets, p->n_sets = b->n_sets;
    b->sets = NULL;
    p->root = root, p->root_lead = lead;
    return DP_OK;
}

static void gb_free(gb *b) {
    for (int32_t r = 0; r < b->n_rules; r++) {
        for (int32_t k = 0; k < b->r[r].n_alts; k++) free(b->r[r].alts[k].s);
        free(b->r[r].alts);
        free(b->r[r].name);
    }
    free(b->r);
    free(b->sets);
}

dp_status gprog_build(const char *text, size_t len, gprog *out, dp_err *err) {
    memset(out, 0, sizeof(*out));
    gb b;
    memset(&b, 0, sizeof(b));
    b.text = b.p = b.line_start = text;
    b.end = text + len;
    b.line = 1;
    b.err = err;
    if (memchr(text, 0, len)) {
        gb_free(&b);
        return dp_err_set(err, DP_EFORMAT, "grammar: the text holds a NUL byte");
    }
    parse_rules(&b);
    int32_t root = b.st ? -1 : find_rule(&b, "root", 4);
    if (!b.st && root < 0) b.st = dp_err_set(err, DP_EFORMAT, "grammar: there is no rule named 'root'");
    for (int32_t r = 0; r < b.n_rules && !b.st; r++)
        if (!b.r[r].defined)
            b.st = dp_err_set(err, DP_EFORMAT, "grammar line %d: rule '%s' is used but never defined", (int)b.r[r].line,
                              b.r[r].name);
    /* the start after a reasoning block: up to 8 bytes of white space, then root */
    int32_t lead = -1;
    if (!b.st && (lead = new_rule(&b, NULL, 0)) >= 0) {
        b.r[lead].defined = true;
        cprange ws[] = {{'\t', '\n'}, {'\r', '\r'}, {' ', ' '}};
        gsym s = {GEL_SET, 0};
        if (new_alt(&b, lead) && !class_sym(&b, ws, 3, &s) && !push_sym(&b, &b.r[lead].alts[0], s.kind, s.arg) &&
            !repeat(&b, lead, 0, 0, 0, 8))
            push_sym(&b, &b.r[lead].alts[0], GEL_REF, root);
    }
    if (!b.st) check_left_recursion(&b);
    if (!b.st) flatten(&b, root, lead, out);
    dp_status st = b.st;
    gb_free(&b);
    return st;
}

void gprog_free(gprog *p) {
    if (!p) return;
    free(p->el);
    free(p->sets);
    free(p->alt_start);
    free(p->rule_alt);
    memset(p, 0, sizeof(*p));
}
