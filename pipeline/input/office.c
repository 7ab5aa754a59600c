/*
 * office.c - the text of zip + XML documents, with no library beyond zlib: .docx (Word), .pptx
 * (PowerPoint: one page per slide), .xlsx (Excel: one tab-separated line per row, a heading per
 * sheet), .odt (OpenDocument text) and .epub (the book's chapters in reading order).
 *
 * DESIGN: the archive is untrusted. Every offset and size of the zip directory is checked
 * against the file; a member's inflated size is capped by the document limit (a zip bomb stops
 * there); XML is scanned, not parsed into a tree, and only the elements that carry text are
 * read. A member that is missing or corrupt makes the document input_unreadable, naming it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "extract_internal.h"

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }

/* The central directory: its entry count and offset, from the end-of-directory record (found in
 * the last 64 KiB + 22 bytes, where a zip comment may push it). */
static pl_doc_error zip_directory(const uint8_t *d, size_t n, size_t *n_ent, size_t *cd_off, dp_err *err) {
    if (n < 22) return dp_err_set(err, DP_EFORMAT, "not a zip archive"), PL_DOC_UNREADABLE;
    size_t eocd = SIZE_MAX;
    for (size_t i = n - 22 + 1; i-- > 0 && n - i <= 65557;)
        if (rd32(d + i) == 0x06054b50u) {
            eocd = i;
            break;
        }
    if (eocd == SIZE_MAX) return dp_err_set(err, DP_EFORMAT, "zip end-of-directory record not found"), PL_DOC_UNREADABLE;
    *n_ent = rd16(d + eocd + 10);
    *cd_off = rd32(d + eocd + 16);
    return PL_DOC_OK;
}

/* Finds and inflates one member of a zip archive, every offset checked against n. */
static pl_doc_error zip_member(const uint8_t *d, size_t n, const char *want, size_t max, dp_buf *out, dp_err *err) {
    size_t n_ent = 0, cd_off = 0;
    const pl_doc_error dr = zip_directory(d, n, &n_ent, &cd_off, err);
    if (dr) return dr;
    size_t p = cd_off;
    const size_t wl = strlen(want);
    for (size_t e = 0; e < n_ent; e++) {
        if (p > n || n - p < 46 || rd32(d + p) != 0x02014b50u)
            return dp_err_set(err, DP_EFORMAT, "corrupt zip central directory"), PL_DOC_UNREADABLE;
        const uint32_t method = rd16(d + p + 10), csize = rd32(d + p + 20), usize = rd32(d + p + 24);
        const size_t nl = rd16(d + p + 28), xl = rd16(d + p + 30), cl = rd16(d + p + 32), lho = rd32(d + p + 42);
        if (n - p - 46 < nl) return dp_err_set(err, DP_EFORMAT, "corrupt zip entry name"), PL_DOC_UNREADABLE;
        if (nl == wl && !memcmp(d + p + 46, want, wl)) {
            if (lho > n || n - lho < 30 || rd32(d + lho) != 0x04034b50u)
                return dp_err_set(err, DP_EFORMAT, "corrupt zip local header"), PL_DOC_UNREADABLE;
            const size_t data_off = lho + 30 + rd16(d + lho + 26) + rd16(d + lho + 28);
            if (data_off > n || n - data_off < csize)
                return dp_err_set(err, DP_EFORMAT, "zip member '%s' runs past the end", want), PL_DOC_UNREADABLE;
            if (usize > max) return dp_err_set(err, DP_ERANGE, "'%s' is %u bytes uncompressed", want, usize), PL_DOC_TOO_LARGE;
            dp_buf_init(out, max);
            if (method == 0) {
                if (dp_buf_append(out, d + data_off, csize)) return PL_DOC_TOO_LARGE;
                return PL_DOC_OK;
            }
            if (method != 8) return dp_err_set(err, DP_EUNSUPPORTED, "zip method %u", method), PL_DOC_UNREADABLE;
            z_stream z;
            memset(&z, 0, sizeof(z));
            if (inflateInit2(&z, -MAX_WBITS) != Z_OK) return PL_DOC_UNREADABLE;
            z.next_in = (Bytef *)(uintptr_t)(d + data_off);
            z.avail_in = csize;
            uint8_t chunk[65536];
            pl_doc_error rc = PL_DOC_OK;
            for (;;) {
                z.next_out = chunk;
                z.avail_out = sizeof(chunk);
                int r = inflate(&z, Z_NO_FLUSH);
                if (dp_buf_append(out, chunk, sizeof(chunk) - z.avail_out)) {
                    dp_err_set(err, DP_ERANGE, "'%s' inflates past %zu bytes", want, max);
                    rc = PL_DOC_TOO_LARGE;
                    break;
                }
                if (r == Z_STREAM_END) break;
                if (r != Z_OK) {
                    dp_err_set(err, DP_EFORMAT, "corrupt deflate data in '%s'", want);
                    rc = PL_DOC_UNREADABLE;
                    break;
                }
            }
            inflateEnd(&z);
            if (rc) dp_buf_free(out);
            return rc;
        }
        p += 46 + nl + xl + cl;
    }
    dp_err_set(err, DP_EFORMAT, "no '%s' in the archive", want);
    return PL_DOC_UNREADABLE;
}


/* The names of the archive's members, in directory order; free each and the array. */
static pl_doc_error zip_names(const uint8_t *d, size_t n, char ***names, size_t *count, dp_err *err) {
    *names = NULL;
    *count = 0;
    size_t n_ent = 0, p = 0;
    const pl_doc_error dr = zip_directory(d, n, &n_ent, &p, err);
    if (dr) return dr;
    char **v = calloc(n_ent ? n_ent : 1, sizeof(char *));
    if (!v) return dp_err_set(err, DP_ENOMEM, "out of memory"), PL_DOC_UNREADABLE;
    size_t k = 0;
    for (; k < n_ent; k++) {
        if (p > n || n - p < 46 || rd32(d + p) != 0x02014b50u) break;
        const size_t nl = rd16(d + p + 28), xl = rd16(d + p + 30), cl = rd16(d + p + 32);
        if (n - p - 46 < nl || !(v[k] = malloc(nl + 1))) break;
        memcpy(v[k], d + p + 46, nl);
        v[k][nl] = 0;
        p += 46 + nl + xl + cl;
    }
    if (k < n_ent) {
        for (size_t i = 0; i < k; i++) free(v[i]);
        free(v);
        return dp_err_set(err, DP_EFORMAT, "corrupt zip central directory"), PL_DOC_UNREADABLE;
    }
    *names = v;
    *count = k;
    return PL_DOC_OK;
}

static void free_names(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* Which elements carry text in one XML vocabulary. text: inside these (NULL: all character
 * data); para: their end is a line end; brk: a line break; tab: a tab; cell: their end is a tab
 * (a table cell). Names with their prefix, e.g. "w:t". */
typedef struct xml_rules {
    const char *const *text, *const *para, *const *brk, *const *tab, *const *cell;
} xml_rules;

static bool name_in(const char *name, size_t n, const char *const *list) {
    for (; list && *list; list++)
        if (strlen(*list) == n && !memcmp(*list, name, n)) return true;
    return false;
}

/* The text of XML s[0..n) by the rules, appended to o. */
static void xml_text(const char *s, size_t n, const xml_rules *r, dp_buf *o) {
    size_t i = 0;
    int in_t = 0;
    while (i < n) {
        if (s[i] == '<') {
            const char *gt = memchr(s + i, '>', n - i);
            const size_t end = gt ? (size_t)(gt - s) + 1 : n;
            const bool closing = i + 1 < n && s[i + 1] == '/';
            const bool self = end >= 2 && s[end - 2] == '/';
            const char *nm = s + i + 1 + closing;
            size_t nl = 0;
            while (nm + nl < s + end && nm[nl] != ' ' && nm[nl] != '/' && nm[nl] != '>' && nm[nl] != '\t' &&
                   nm[nl] != '\n' && nm[nl] != '\r')
                nl++;
            if (name_in(nm, nl, r->text) && !self) in_t = !closing;
            else if (closing && name_in(nm, nl, r->para)) dp_buf_append(o, "\n", 1);
            else if (closing && name_in(nm, nl, r->cell)) dp_buf_append(o, "\t", 1);
            else if (!closing && name_in(nm, nl, r->brk)) dp_buf_append(o, "\n", 1);
            else if (!closing && name_in(nm, nl, r->tab)) dp_buf_append(o, "\t", 1);
            i = end;
            continue;
        }
        if (in_t || !r->text) {
            if (s[i] == '&') {
                const int used = pl_put_entity(s + i + 1, n - i - 1, o);
                if (used) {
                    i += (size_t)used + 1;
                    continue;
                }
            }
            dp_buf_append(o, s + i, 1);
        }
        i++;
    }
}

/* A member read as XML: NUL bytes refused (XML has none, and text must not carry one). */
static pl_doc_error xml_member(const uint8_t *d, size_t n, const char *name, size_t max, dp_buf *xml, dp_err *err) {
    pl_doc_error r = zip_member(d, n, name, max, xml, err);
    if (r) return r;
    const uint8_t *nul = xml->len ? memchr(xml->data, 0, xml->len) : NULL;
    if (nul) {
        dp_err_set(err, DP_EFORMAT, "%s: NUL byte at offset %zu", name, (size_t)(nul - xml->data));
        dp_buf_free(xml);
        return PL_DOC_UNREADABLE;
    }
    if (!xml->data) dp_buf_append(xml, "", 0);
    return PL_DOC_OK;
}

static const char *const k_none[] = {NULL};

static pl_doc_error one_member(const uint8_t *d, size_t n, const char *member, const xml_rules *r, size_t max,
                               dp_buf *text, dp_err *err) {
    dp_buf xml;
    pl_doc_error rc = xml_member(d, n, member, max, &xml, err);
    if (rc) return rc;
    xml_text((const char *)xml.data, xml.len, r, text);
    dp_buf_free(&xml);
    return PL_DOC_OK;
}

/* "ppt/slides/slide12.xml" -> 12 (0: not a slide). */
static unsigned slide_number(const char *name, const char *prefix) {
    const size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl)) return 0;
    char *end;
    const unsigned long v = strtoul(name + pl, &end, 10);
    return end != name + pl && !strcmp(end, ".xml") && v > 0 && v < 100000 ? (unsigned)v : 0;
}

/* Slides in their numbers' order, each ending with a form feed: one page per slide. */
static pl_doc_error pptx_text(const uint8_t *d, size_t n, size_t max, dp_buf *text, dp_err *err) {
    char **names = NULL;
    size_t count = 0;
    pl_doc_error rc = zip_names(d, n, &names, &count, err);
    if (rc) return rc;
    unsigned last = 0;
    for (size_t i = 0; i < count; i++) {
        const unsigned k = slide_number(names[i], "ppt/slides/slide");
        if (k > last) last = k;
    }
    static const char *const t[] = {"a:t", NULL}, *const p[] = {"a:p", NULL}, *const b[] = {"a:br", NULL};
    const xml_rules r = {t, p, b, k_none, k_none};
    for (unsigned k = 1; k <= last && !rc; k++) {
        char member[64];
        snprintf(member, sizeof(member), "ppt/slides/slide%u.xml", k);
        bool present = false;
        for (size_t i = 0; i < count && !present; i++) present = !strcmp(names[i], member);
        if (!present) continue;
        rc = one_member(d, n, member, &r, max, text, err);
        if (!rc && dp_buf_append(text, "\f", 1)) rc = PL_DOC_TOO_LARGE;
    }
    free_names(names, count);
    if (!rc && !last) {
        dp_err_set(err, DP_EFORMAT, "no ppt/slides/slideN.xml in the archive");
        rc = PL_DOC_UNREADABLE;
    }
    return rc;
}

/* The value of attribute attr in the tag that starts at tag (up to '>'), into out. */
static bool attr(const char *tag, const char *attr_name, char *out, size_t cap) {
    const char *gt = strchr(tag, '>');
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=\"", attr_name);
    const char *a = strstr(tag, pat);
    if (!a || (gt && a > gt)) return false;
    a += strlen(pat);
    const char *q = strchr(a, '"');
    if (!q || (size_t)(q - a) >= cap) return false;
    memcpy(out, a, (size_t)(q - a));
    out[q - a] = 0;
    return true;
}

/* Sheets in the workbook's order, each headed "# NAME", a row per line, cells tab-separated:
 * shared strings resolved, inline strings and numbers as written. */
static pl_doc_error xlsx_text(const uint8_t *d, size_t n, size_t max, dp_buf *text, dp_err *err) {
    dp_buf wb, ss = {0};
    pl_doc_error rc = xml_member(d, n, "xl/workbook.xml", max, &wb, err);
    if (rc) return rc;
    /* the shared strings, one per <si>, its <t> runs joined */
    char **strs = NULL;
    size_t n_strs = 0, cap_strs = 0;
    if (!xml_member(d, n, "xl/sharedStrings.xml", max, &ss, NULL)) {
        static const char *const t[] = {"t", NULL};
        const xml_rules r = {t, k_none, k_none, k_none, k_none};
        for (const char *si = strstr((const char *)ss.data, "<si>"); si; si = strstr(si + 4, "<si>")) {
            const char *e = strstr(si, "</si>");
            if (!e) break;
            dp_buf one;
            dp_buf_init(&one, max);
            xml_text(si, (size_t)(e - si), &r, &one);
            dp_buf_append(&one, "", 0);
            if (n_strs == cap_strs) {
                cap_strs = cap_strs ? 2 * cap_strs : 64;
                char **g = realloc(strs, cap_strs * sizeof(char *));
                if (!g) {
                    dp_buf_free(&one);
                    break;
                }
                strs = g;
            }
            strs[n_strs++] = (char *)one.data;
        }
        dp_buf_free(&ss);
    }
    unsigned k = 0;
    for (const char *sh = strstr((const char *)wb.data, "<sheet "); sh && !rc; sh = strstr(sh + 7, "<sheet ")) {
        char name[256] = "", member[64];
        attr(sh, "name", name, sizeof(name));
        snprintf(member, sizeof(member), "xl/worksheets/sheet%u.xml", ++k);
        dp_buf xml;
        if (xml_member(d, n, member, max, &xml, NULL)) continue; /* (a chart sheet has none) */
        dp_buf_append(text, "# ", 2);
        dp_buf_append(text, name, strlen(name));
        dp_buf_append(text, "\n", 1);
        const char *x = (const char *)xml.data;
        for (const char *row = strstr(x, "<row"); row; row = strstr(row + 4, "<row")) {
            if (row[4] != ' ' && row[4] != '>') continue; /* (not <rowBreaks>) */
            const char *row_end = strstr(row, "</row>");
            if (!row_end) break;
            bool first = true;
            for (const char *c = strstr(row, "<c"); c && c < row_end; c = strstr(c + 2, "<c")) {
                if (c[2] != ' ' && c[2] != '>') continue;
                const char *c_end = strstr(c, "</c>"), *gt = strchr(c, '>');
                if (!gt || gt > row_end) break;
                /* an empty cell; or one whose start tag runs into its end (no '>' before "</c>") */
                if (gt[-1] == '/' || !c_end || c_end > row_end || c_end < gt) continue;
                char type[16] = "";
                attr(c, "t", type, sizeof(type));
                if (!first) dp_buf_append(text, "\t", 1);
                first = false;
                const char *v = strstr(gt, "<v>");
                if (!strcmp(type, "inlineStr")) {
                    static const char *const t[] = {"t", NULL};
                    const xml_rules r = {t, k_none, k_none, k_none, k_none};
                    xml_text(gt + 1, (size_t)(c_end - gt - 1), &r, text);
                } else if (v && v < c_end) {
                    const char *ve = strstr(v, "</v>");
                    if (!ve || ve > c_end) continue;
                    if (!strcmp(type, "s")) {
                        const unsigned long idx = strtoul(v + 3, NULL, 10);
                        if (idx < n_strs) dp_buf_append(text, strs[idx], strlen(strs[idx]));
                    } else {
                        static const xml_rules all = {NULL, NULL, NULL, NULL, NULL};
                        xml_text(v + 3, (size_t)(ve - v - 3), &all, text);
                    }
                }
            }
            dp_buf_append(text, "\n", 1);
            row = row_end;
        }
        dp_buf_append(text, "\n", 1);
        dp_buf_free(&xml);
        if (text->len >= max) rc = PL_DOC_TOO_LARGE;
    }
    for (size_t i = 0; i < n_strs; i++) free(strs[i]);
    free(strs);
    dp_buf_free(&wb);
    if (rc == PL_DOC_TOO_LARGE) dp_err_set(err, DP_ERANGE, "the text passes %zu bytes", max);
    return rc;
}

/* The chapters in the order of the package's spine (META-INF/container.xml names the package
 * file), each read as HTML. */
static pl_doc_error epub_text(const uint8_t *d, size_t n, size_t max, dp_buf *text, dp_err *err) {
    dp_buf cont, opf;
    pl_doc_error rc = xml_member(d, n, "META-INF/container.xml", max, &cont, err);
    if (rc) return rc;
    char opf_path[512] = "";
    const char *rf = strstr((const char *)cont.data, "<rootfile "); /* (not <rootfiles>) */
    const bool found = rf && attr(rf, "full-path", opf_path, sizeof(opf_path));
    dp_buf_free(&cont);
    if (!found) return dp_err_set(err, DP_EFORMAT, "META-INF/container.xml names no package file"), PL_DOC_UNREADABLE;
    if ((rc = xml_member(d, n, opf_path, max, &opf, err))) return rc;
    char base[512] = "";
    const char *slash = strrchr(opf_path, '/');
    if (slash) snprintf(base, sizeof(base), "%.*s/", (int)(slash - opf_path), opf_path);
    const char *o = (const char *)opf.data;
    size_t chapters = 0;
    for (const char *ir = strstr(o, "<itemref "); ir && !rc; ir = strstr(ir + 9, "<itemref ")) {
        char idref[256];
        if (!attr(ir, "idref", idref, sizeof(idref))) continue;
        /* the manifest item with that id */
        char pat[300], href[512], member[1100];
        snprintf(pat, sizeof(pat), " id=\"%s\"", idref);
        const char *it = strstr(o, pat);
        while (it && it > o && *it != '<') it--;
        if (!it || !attr(it, "href", href, sizeof(href))) continue;
        snprintf(member, sizeof(member), "%s%s", base, href);
        dp_buf page;
        if (zip_member(d, n, member, max, &page, NULL)) continue; /* (a spine item may be missing) */
        if (page.data && !memchr(page.data, 0, page.len)) {
            dp_buf ch; /* each chapter on its own, then a blank line between chapters */
            dp_buf_init(&ch, max);
            pl_html_to_text((const char *)page.data, page.len, &ch, NULL);
            if (ch.len) {
                if (chapters) dp_buf_append(text, "\n\n", 2);
                dp_buf_append(text, ch.data, ch.len);
                chapters++;
            }
            dp_buf_free(&ch);
        }
        dp_buf_free(&page);
        if (text->len >= max) {
            dp_err_set(err, DP_ERANGE, "the text passes %zu bytes", max);
            rc = PL_DOC_TOO_LARGE;
        }
    }
    dp_buf_free(&opf);
    if (!rc && !chapters) {
        dp_err_set(err, DP_EFORMAT, "%s: the spine names no readable chapter", opf_path);
        rc = PL_DOC_UNREADABLE;
    }
    return rc;
}

pl_doc_error pl_extract_office(const char *e, const uint8_t *data, size_t len, size_t max, dp_buf *text,
                               const char **format, dp_err *err) {
    dp_buf_init(text, max);
    pl_doc_error rc;
    if (!strcmp(e, "docx") || !strcmp(e, "DOCX")) {
        static const char *const t[] = {"w:t", NULL}, *const p[] = {"w:p", NULL}, *const b[] = {"w:br", "w:cr", NULL},
                                 *const tab[] = {"w:tab", NULL};
        const xml_rules r = {t, p, b, tab, k_none};
        rc = one_member(data, len, "word/document.xml", &r, max, text, err);
        *format = "docx";
    } else if (!strcmp(e, "odt") || !strcmp(e, "ODT")) {
        static const char *const p[] = {"text:p", "text:h", NULL}, *const b[] = {"text:line-break", NULL},
                                 *const tab[] = {"text:tab", NULL}, *const cell[] = {"table:table-cell", NULL};
        const xml_rules r = {NULL, p, b, tab, cell};
        /* (only the body: the styles before it hold no character data) */
        rc = one_member(data, len, "content.xml", &r, max, text, err);
        *format = "odt";
    } else if (!strcmp(e, "pptx") || !strcmp(e, "PPTX")) {
        rc = pptx_text(data, len, max, text, err);
        *format = "pptx";
    } else if (!strcmp(e, "xlsx") || !strcmp(e, "XLSX")) {
        rc = xlsx_text(data, len, max, text, err);
        *format = "xlsx";
    } else {
        rc = epub_text(data, len, max, text, err);
        *format = "epub";
    }
    if (rc) {
        dp_buf_free(text);
        return rc;
    }
    while (text->len && (text->data[text->len - 1] == '\n' || text->data[text->len - 1] == '\t')) text->len--;
    if (text->data) text->data[text->len] = 0;
    return PL_DOC_OK;
}
