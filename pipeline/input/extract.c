/*
 * extract.c - see extract.h.
 *
 * DESIGN: every decoder writes into a dp_buf capped at max_bytes, so a decompression bomb or a
 * huge file stops at the cap with too_large instead of exhausting memory. The HTML reader is a
 * small state machine (not a DOM): good enough to get the text out of pages, never quadratic.
 */
#include "extract.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <zlib.h>

#include "dynbuf.h"
#include "extract_internal.h"
#include "platform.h"
#include "utf8.h"

const char *pl_doc_error_code(pl_doc_error e) {
    switch (e) {
    case PL_DOC_OK: return "ok";
    case PL_DOC_BINARY: return "binary_file";
    case PL_DOC_TOO_LARGE: return "too_large";
    case PL_DOC_UNREADABLE: return "input_unreadable";
    default: return "unsupported_format";
    }
}

static const char *ext_of(const char *name) {
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? dot + 1 : "";
}

static int ext_is(const char *e, const char *const *list) {
    for (; *list; list++) {
        size_t i = 0;
        while (e[i] && (*list)[i] && tolower((unsigned char)e[i]) == (*list)[i]) i++;
        if (!e[i] && !(*list)[i]) return 1;
    }
    return 0;
}

static const char *const k_text_ext[] = {"txt", "md", "markdown", "rst", "text", "log", "csv", "tsv", "json", "yaml",
                                         "yml", "toml", "ini", "cfg", "xml", "c", "h", "cc", "cpp", "cxx", "hpp",
                                         "hh", "cu", "cuh", "py", "js", "ts", "tsx", "jsx", "go", "rs", "java", "kt",
                                         "scala", "rb", "php", "cs", "swift", "m", "mm", "sh", "bash", "zsh", "ps1",
                                         "sql", "r", "lua", "pl", "pm", "hs", "ml", "ex", "exs", "erl", "clj", "dart",
                                         "vue", "svelte", "css", "scss", "tex", "cmake", "mk", "proto", "gradle",
                                         "", NULL};
static const char *const k_html_ext[] = {"html", "htm", "xhtml", NULL};
static const char *const k_office_ext[] = {"docx", "pptx", "xlsx", "odt", "epub", NULL};

int pl_extract_supported(const char *name) {
    const char *e = ext_of(name);
    return ext_is(e, k_text_ext) || ext_is(e, k_html_ext) ||
           ext_is(e, k_office_ext) || ext_is(e, (const char *const[]){"gz", "jsonl", "pdf", NULL});
}

/* Raw bytes -> valid UTF-8 (BOMs, UTF-16, repair). */
static pl_doc_error decode_text(const uint8_t *d, size_t n, size_t max, dp_buf *out, size_t *n_bad, dp_err *err) {
    *n_bad = 0;
    if (n >= 2 && ((d[0] == 0xFF && d[1] == 0xFE) || (d[0] == 0xFE && d[1] == 0xFF))) {
        const int le = d[0] == 0xFF;
        dp_buf u;
        dp_buf_init(&u, max);
        for (size_t i = 2; i + 1 < n;) {
            uint32_t c = le ? (uint32_t)(d[i] | d[i + 1] << 8) : (uint32_t)(d[i] << 8 | d[i + 1]);
            i += 2;
            if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n) {
                uint32_t c2 = le ? (uint32_t)(d[i] | d[i + 1] << 8) : (uint32_t)(d[i] << 8 | d[i + 1]);
                if (c2 >= 0xDC00 && c2 <= 0xDFFF) {
                    c = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00);
                    i += 2;
                }
            }
            if (c >= 0xD800 && c <= 0xDFFF) c = DP_UTF8_REPLACEMENT, (*n_bad)++;
            if (c == 0) {
                dp_buf_free(&u);
                dp_err_set(err, DP_EFORMAT, "NUL character in UTF-16 text");
                return PL_DOC_BINARY;
            }
            uint8_t e[4];
            if (dp_buf_append(&u, e, dp_utf8_encode(c, e))) {
                dp_buf_free(&u);
                dp_err_set(err, DP_ERANGE, "decoded text exceeds %zu bytes", max);
                return PL_DOC_TOO_LARGE;
            }
        }
        *out = u;
        return PL_DOC_OK;
    }
    if (n >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF) d += 3, n -= 3;
    if (memchr(d, 0, n)) {
        dp_err_set(err, DP_EFORMAT, "NUL byte at offset %zu: not a text document",
                   (size_t)((const uint8_t *)memchr(d, 0, n) - d));
        return PL_DOC_BINARY;
    }
    if (n > max) {
        dp_err_set(err, DP_ERANGE, "text of %zu bytes exceeds the limit of %zu", n, max);
        return PL_DOC_TOO_LARGE;
    }
    dp_buf_init(out, SIZE_MAX / 4);
    if (dp_buf_reserve(out, 3 * n + 1)) {
        dp_err_set(err, DP_ENOMEM, "out of memory for %zu bytes", n);
        return PL_DOC_UNREADABLE;
    }
    out->len = dp_utf8_repair(d, n, out->data, n_bad);
    out->data[out->len] = 0;
    return PL_DOC_OK;
}

/* ---- HTML -------------------------------------------------------------------------------- */

static const char *const k_block[] = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr",
                                      "table", "section", "article", "header", "footer", "blockquote", "pre", "hr",
                                      "dt", "dd", "title", "td", "th", "nav", "aside", "main", "figure", "form",
                                      NULL};

int pl_put_entity(const char *s, size_t n, dp_buf *o) {
    /* s points after '&', n bytes available; returns bytes consumed after '&' or 0 */
    static const struct { const char *name; uint32_t cp; } named[] = {
        {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}, {"nbsp", 0xA0}, {"copy", 0xA9},
        {"reg", 0xAE}, {"mdash", 0x2014}, {"ndash", 0x2013}, {"hellip", 0x2026}, {"lsquo", 0x2018},
        {"rsquo", 0x2019}, {"ldquo", 0x201C}, {"rdquo", 0x201D}, {"euro", 0x20AC}, {"middot", 0xB7},
    };
    size_t semi = 0;
    while (semi < n && semi < 12 && s[semi] != ';') semi++;
    if (semi == n || semi >= 12 || s[semi] != ';' || semi == 0) return 0;
    uint32_t cp = 0;
    if (s[0] == '#') {
        const int hex = semi > 1 && (s[1] == 'x' || s[1] == 'X');
        size_t i = hex ? 2 : 1;
        if (i == semi) return 0;
        for (; i < semi; i++) {
            int c = s[i], v = isdigit(c) ? c - '0' : hex && isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
            if (v < 0 || cp > 0x10FFFF) return 0;
            cp = cp * (hex ? 16 : 10) + (uint32_t)v;
        }
        if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = DP_UTF8_REPLACEMENT;
    } else {
        size_t k = 0;
        for (; k < sizeof(named) / sizeof(named[0]); k++)
            if (strlen(named[k].name) == semi && !memcmp(named[k].name, s, semi)) break;
        if (k == sizeof(named) / sizeof(named[0])) return 0;
        cp = named[k].cp;
    }
    uint8_t e[4];
    dp_buf_append(o, e, dp_utf8_encode(cp, e));
    return (int)semi + 1;
}

void pl_html_to_text(const char *s, size_t n, dp_buf *o, pl_headings *h) {
    int skip = 0; /* inside <script> or <style> */
    int h_level = 0;           /* inside <hN> */
    size_t h_at = SIZE_MAX;    /* where its text starts in o */
    int pending_nl = 0, pending_space = 0;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '<') {
            if (i + 3 < n && !memcmp(s + i, "<!--", 4)) { /* comment */
                const char *e = NULL;
                for (size_t j = i + 4; j + 2 < n; j++)
                    if (!memcmp(s + j, "-->", 3)) { e = s + j + 3; break; }
                i = e ? (size_t)(e - s) : n;
                continue;
            }
            size_t j = i + 1;
            int closing = j < n && s[j] == '/';
            if (closing) j++;
            char name[16];
            size_t k = 0;
            while (j < n && k < sizeof(name) - 1 && (isalnum((unsigned char)s[j]))) name[k++] = (char)tolower((unsigned char)s[j++]);
            name[k] = 0;
            const char *gt = memchr(s + i, '>', n - i);
            i = gt ? (size_t)(gt - s) + 1 : n;
            if (!strcmp(name, "script") || !strcmp(name, "style")) skip = !closing;
            if (h && name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && !name[2]) {
                if (!closing) h_level = name[1] - '0', h_at = SIZE_MAX;
                else if (h_level && h_at != SIZE_MAX && o->len > h_at)
                    pl_headings_add(h, h_at, h_at, o->len - h_at, h_level);
                if (closing) h_level = 0;
            }
            for (const char *const *b = k_block; *b; b++)
                if (!strcmp(name, *b)) pending_nl = 1;
            continue;
        }
        if (skip) {
            i++;
            continue;
        }
        if (isspace((unsigned char)c)) {
            pending_space = 1;
            i++;
            continue;
        }
        if (pending_nl && o->len) {
            dp_buf_append(o, "\n", 1);
            pending_space = 0;
        } else if (pending_space && o->len && o->data[o->len - 1] != '\n') {
            dp_buf_append(o, " ", 1);
        }
        pending_nl = pending_space = 0;
        if (h_level && h_at == SIZE_MAX) h_at = o->len;
        if (c == '&') {
            int used = pl_put_entity(s + i + 1, n - i - 1, o);
            if (used) {
                i += (size_t)used + 1;
                continue;
            }
        }
        dp_buf_append(o, &c, 1);
        i++;
    }
}

/* ---- gzip (multi-member) ----------------------------------------------------------------- */

static pl_doc_error gunzip(const uint8_t *d, size_t n, size_t max, dp_buf *out, dp_err *err) {
    dp_buf_init(out, max);
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        dp_err_set(err, DP_ENOMEM, "cannot start zlib");
        return PL_DOC_UNREADABLE;
    }
    z.next_in = (Bytef *)(uintptr_t)d;
    z.avail_in = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
    uint8_t chunk[65536];
    pl_doc_error rc = PL_DOC_OK;
    for (;;) {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        int r = inflate(&z, Z_NO_FLUSH);
        size_t got = sizeof(chunk) - z.avail_out;
        if (got && dp_buf_append(out, chunk, got)) {
            dp_err_set(err, DP_ERANGE, "decompressed data exceeds %zu bytes", max);
            rc = PL_DOC_TOO_LARGE;
            break;
        }
        if (r == Z_STREAM_END) {
            /* gzip(1) concatenates members: keep going while input remains */
            if (z.avail_in == 0) break;
            if (inflateReset(&z) != Z_OK) {
                rc = PL_DOC_UNREADABLE;
                break;
            }
            continue;
        }
        if (r != Z_OK && r != Z_BUF_ERROR) {
            dp_err_set(err, DP_EFORMAT, "corrupt gzip data: %s", z.msg ? z.msg : "inflate failed");
            rc = PL_DOC_UNREADABLE;
            break;
        }
        if (r == Z_BUF_ERROR && z.avail_in == 0) {
            dp_err_set(err, DP_EFORMAT, "truncated gzip data");
            rc = PL_DOC_UNREADABLE;
            break;
        }
    }
    inflateEnd(&z);
    if (rc) dp_buf_free(out);
    return rc;
}

/* ---- docx: zip container, word/document.xml ---------------------------------------------- */

pl_doc_error pl_extract_jsonl_line(const char *line, size_t len, const char *field, size_t max, pl_doc_text *out,
                                   dp_err *err) {
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o) {
        dp_err_set(err, DP_EFORMAT, "invalid JSON at column %d: %s", je.column, je.text);
        return PL_DOC_UNREADABLE;
    }
    json_t *v = json_is_object(o) ? json_object_get(o, field) : NULL;
    pl_doc_error rc = PL_DOC_OK;
    if (!json_is_string(v)) {
        dp_err_set(err, DP_EFORMAT, "the line has no string field '%s'", field);
        rc = PL_DOC_UNREADABLE;
    } else if (json_string_length(v) > max) {
        dp_err_set(err, DP_ERANGE, "field '%s' is %zu bytes, over %zu", field, json_string_length(v), max);
        rc = PL_DOC_TOO_LARGE;
    } else if (memchr(json_string_value(v), 0, json_string_length(v))) {
        dp_err_set(err, DP_EFORMAT, "field '%s' contains a NUL character", field);
        rc = PL_DOC_BINARY;
    } else {
        out->len = json_string_length(v);
        out->text = malloc(out->len + 1);
        if (!out->text) rc = PL_DOC_UNREADABLE;
        else {
            memcpy(out->text, json_string_value(v), out->len + 1);
            out->format = "jsonl";
        }
    }
    json_decref(o);
    return rc;
}

/* out's text: s[0..n) with invalid UTF-8 replaced by U+FFFD (counted); false out of memory. */
static bool set_repaired(const uint8_t *s, size_t n, pl_doc_text *out) {
    uint8_t *fixed = malloc(3 * n + 1);
    if (!fixed) return false;
    size_t bad = 0;
    out->len = dp_utf8_repair(s, n, fixed, &bad);
    fixed[out->len] = 0;
    out->text = (char *)fixed;
    out->n_replaced = bad;
    return true;
}

/* A PDF's text layer through pdftotext. The document's bytes go to its stdin (the file is not
 * opened again by name, so what was read is what is converted); without poppler-utils the
 * document is unsupported_format with the package to install. */
static pl_doc_error pdf_text(const uint8_t *data, size_t len, size_t max, pl_doc_text *out, dp_err *err) {
    const char *argv[] = {"pdftotext", "-layout", "-enc", "UTF-8", "-", "-", NULL};
    char *text = NULL, tail[512];
    size_t n = 0;
    int code = 0;
    dp_status st = dp_process_run(argv, data, len, 120000, max, &text, &n, tail, sizeof(tail), &code, err);
    if (st == DP_ENOENT) {
        dp_err_set(err, DP_EUNSUPPORTED, "reading .pdf files needs pdftotext (apt-get install poppler-utils)");
        return PL_DOC_UNSUPPORTED;
    }
    if (st == DP_ERANGE) return PL_DOC_TOO_LARGE;
    if (st) return PL_DOC_UNREADABLE;
    if (code != 0) {
        free(text);
        char *nl;
        while ((nl = strrchr(tail, '\n')) && !nl[1]) *nl = 0; /* the last line says why */
        nl = strrchr(tail, '\n');
        dp_err_set(err, DP_EFORMAT, "pdftotext exit %d: %s", code, nl ? nl + 1 : tail[0] ? tail : "no message");
        return PL_DOC_UNREADABLE;
    }
    const size_t nul = strlen(text); /* (pdftotext writes no NUL; one would never reach a prompt) */
    const bool ok = set_repaired((const uint8_t *)text, nul < n ? nul : n, out);
    free(text);
    return ok ? PL_DOC_OK : PL_DOC_UNREADABLE;
}

pl_doc_error pl_extract_text(const char *name, const uint8_t *data, size_t len, size_t max, pl_doc_text *out,
                             dp_err *err) {
    memset(out, 0, sizeof(*out));
    const char *e = ext_of(name);
    if (ext_is(e, k_office_ext)) {
        dp_buf t;
        const char *format = NULL;
        pl_doc_error r = pl_extract_office(e, data, len, max, &t, &format, err);
        if (r) return r;
        dp_buf_append(&t, "", 0);
        const bool ok = set_repaired(t.data, t.len, out);
        dp_buf_free(&t);
        out->format = format;
        return ok ? PL_DOC_OK : PL_DOC_UNREADABLE;
    }
    dp_buf raw = {0};
    char inner[1024];
    const char *fmt_prefix = "";
    if (ext_is(e, (const char *const[]){"gz", NULL})) {
        pl_doc_error r = gunzip(data, len, max, &raw, err);
        if (r) return r;
        size_t nl = (size_t)(e - 1 - name);
        if (nl >= sizeof(inner)) nl = sizeof(inner) - 1;
        memcpy(inner, name, nl);
        inner[nl] = 0;
        name = inner;
        e = ext_of(name);
        data = raw.data ? raw.data : (const uint8_t *)"";
        len = raw.len;
        fmt_prefix = "gz+";
    }
    if (ext_is(e, (const char *const[]){"pdf", NULL})) {
        pl_doc_error r = pdf_text(data, len, max, out, err);
        dp_buf_free(&raw);
        out->format = fmt_prefix[0] ? "gz+pdf" : "pdf";
        return r;
    }
    const int html = ext_is(e, k_html_ext);
    if (!html && !ext_is(e, k_text_ext)) {
        dp_buf_free(&raw);
        dp_err_set(err, DP_EUNSUPPORTED, "no reader for '.%s' files", e);
        return PL_DOC_UNSUPPORTED;
    }
    dp_buf text;
    size_t bad = 0;
    pl_doc_error r = decode_text(data, len, max, &text, &bad, err);
    dp_buf_free(&raw);
    if (r) return r;
    if (html) {
        dp_buf h;
        dp_buf_init(&h, max);
        pl_html_to_text((const char *)text.data, text.len, &h, &out->headings);
        dp_buf_free(&text);
        text = h;
    }
    if (!text.data) dp_buf_append(&text, "", 0); /* an empty document is "", never NULL */
    if (ext_is(e, (const char *const[]){"md", "markdown", NULL}) &&
        pl_headings_markdown((const char *)text.data, text.len, &out->headings)) {
        dp_buf_free(&text);
        pl_headings_free(&out->headings);
        dp_err_set(err, DP_ENOMEM, "out of memory");
        return PL_DOC_UNREADABLE;
    }
    out->text = (char *)text.data;
    out->len = text.len;
    out->n_replaced = bad;
    static const char *const fmts[] = {"text", "html", "gz+text", "gz+html"};
    out->format = fmts[(fmt_prefix[0] ? 2 : 0) + html];
    return PL_DOC_OK;
}

void pl_doc_text_free(pl_doc_text *t) {
    if (!t) return;
    free(t->text);
    pl_headings_free(&t->headings);
    memset(t, 0, sizeof(*t));
}

pl_doc_error pl_extract_convert(const char *ext, const char *const *argv, size_t argc, const uint8_t *data, size_t len,
                                size_t max, int timeout_ms, pl_doc_text *out, dp_err *err) {
    memset(out, 0, sizeof(*out));
    char tmp[4200];
    /* the bytes the reader checked, not the file by name: nothing swapped in since is read */
    if (dp_temp_file(ext, data, len, tmp, sizeof(tmp), err)) return PL_DOC_UNREADABLE;
    const char **av = calloc(argc + 1, sizeof(char *));
    char **owned = calloc(argc + 1, sizeof(char *));
    pl_doc_error rc = PL_DOC_UNREADABLE;
    if (!av || !owned) {
        dp_err_set(err, DP_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < argc; i++) { /* "{input}" anywhere in an argument: the file's path */
        const char *at = strstr(argv[i], "{input}");
        if (!at) {
            av[i] = argv[i];
            continue;
        }
        const size_t n = strlen(argv[i]) - 7 + strlen(tmp) + 1;
        if (!(owned[i] = malloc(n))) {
            dp_err_set(err, DP_ENOMEM, "out of memory");
            goto done;
        }
        snprintf(owned[i], n, "%.*s%s%s", (int)(at - argv[i]), argv[i], tmp, at + 7);
        av[i] = owned[i];
    }
    char *text = NULL, tail[512];
    size_t n = 0;
    int code = 0;
    dp_status st = dp_process_run(av, NULL, 0, timeout_ms, max, &text, &n, tail, sizeof(tail), &code, err);
    if (st == DP_ENOENT) {
        dp_err_set(err, DP_EUNSUPPORTED, "converter for %s: %s is not installed", ext, argv[0]);
        rc = PL_DOC_UNSUPPORTED;
    } else if (st == DP_ERANGE) {
        rc = PL_DOC_TOO_LARGE;
    } else if (!st && code != 0) {
        char *nl;
        while ((nl = strrchr(tail, '\n')) && !nl[1]) *nl = 0;
        nl = strrchr(tail, '\n');
        dp_err_set(err, DP_EFORMAT, "%s exit %d: %s", argv[0], code, nl ? nl + 1 : tail[0] ? tail : "no message");
    } else if (!st) {
        const size_t nul = strlen(text);
        if (set_repaired((const uint8_t *)text, nul < n ? nul : n, out)) {
            out->format = "converted";
            rc = PL_DOC_OK;
        }
    }
    free(text);
done:
    for (size_t i = 0; owned && i < argc; i++) free(owned[i]);
    free(owned);
    free(av);
    dp_remove(tmp, NULL);
    return rc;
}
