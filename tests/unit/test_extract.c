/*
 * test_extract.c - document bytes to text: encodings (BOMs, UTF-16, invalid UTF-8), binary and
 * size limits, HTML to text, gzip including multi-member files and decompression bombs.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "extract.h"

static pl_doc_error run(const char *name, const void *d, size_t n, size_t max, pl_doc_text *t) {
    dp_err err = {0};
    return pl_extract_text(name, d, n, max, t, &err);
}

static void test_text_encodings(void **state) {
    (void)state;
    pl_doc_text t;
    assert_int_equal(run("a.txt", "\xEF\xBB\xBFhello", 8, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "hello"); /* UTF-8 BOM dropped */
    pl_doc_text_free(&t);
    const uint8_t le[] = {0xFF, 0xFE, 'h', 0, 'i', 0, 0x2D, 0x4E, 0x3D, 0xD8, 0x00, 0xDE}; /* hi中😀 */
    assert_int_equal(run("a.txt", le, sizeof(le), 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "hi\xE4\xB8\xAD\xF0\x9F\x98\x80");
    pl_doc_text_free(&t);
    const uint8_t be[] = {0xFE, 0xFF, 0, 'o', 0, 'k', 0xD8, 0x00}; /* lone high surrogate at the end */
    assert_int_equal(run("a.md", be, sizeof(be), 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "ok\xEF\xBF\xBD");
    assert_int_equal(t.n_replaced, 1);
    pl_doc_text_free(&t);
    assert_int_equal(run("a.c", "a\xFF" "b\xC3", 4, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
    assert_int_equal(t.n_replaced, 2);
    assert_string_equal(t.format, "text");
    pl_doc_text_free(&t);
    assert_int_equal(run("a.txt", "ab\0cd", 5, 1 << 20, &t), PL_DOC_BINARY);
    assert_int_equal(run("a.txt", "abcdef", 6, 4, &t), PL_DOC_TOO_LARGE);
    /* a .pdf goes to pdftotext: a truncated one is unreadable (or unsupported without poppler) */
    const pl_doc_error pdf = run("a.pdf", "%PDF", 4, 1 << 20, &t);
    assert_true(pdf == PL_DOC_UNREADABLE || pdf == PL_DOC_UNSUPPORTED);
    assert_int_equal(run("a.png", "\x89PNG", 4, 1 << 20, &t), PL_DOC_UNSUPPORTED);
    assert_string_equal(pl_doc_error_code(PL_DOC_BINARY), "binary_file");
    assert_string_equal(pl_doc_error_code(PL_DOC_TOO_LARGE), "too_large");
    assert_string_equal(pl_doc_error_code(PL_DOC_UNREADABLE), "input_unreadable");
    assert_true(pl_extract_supported("src/main.rs") && pl_extract_supported("x.HTML") &&
                pl_extract_supported("notes.txt.gz") && !pl_extract_supported("a.png"));
}

static void test_html_to_text(void **state) {
    (void)state;
    const char *h = "<html><head><title>T</title><style>p{color:red}</style>"
                    "<script>var x = '<p>no</p>';</script></head><body><!-- hidden -->"
                    "<h1>Report</h1><p>Fish &amp; chips &lt;cheap&gt; &#x4E2D;&#25991;&nbsp;ok</p>"
                    "<ul><li>one</li><li>two</li></ul>a  <b>bold</b>\n\n  word &unknown; &#0;</body></html>";
    pl_doc_text t;
    assert_int_equal(run("page.html", h, strlen(h), 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "T\nReport\nFish & chips <cheap> \xE4\xB8\xAD\xE6\x96\x87\xC2\xA0ok\none\ntwo\n"
                                "a bold word &unknown; \xEF\xBF\xBD");
    assert_string_equal(t.format, "html");
    pl_doc_text_free(&t);
}

static size_t gz(const void *in, size_t n, uint8_t *out, size_t cap) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t m = cap - z.avail_out;
    deflateEnd(&z);
    return m;
}

static void test_gzip_members_and_bombs(void **state) {
    (void)state;
    uint8_t *buf = malloc(1 << 20);
    size_t a = gz("first member, ", 14, buf, 1 << 19);
    size_t b = gz("second member", 13, buf + a, 1 << 19);
    pl_doc_text t;
    assert_int_equal(run("log.txt.gz", buf, a + b, 1 << 20, &t), PL_DOC_OK); /* as gzip(1): all members */
    assert_string_equal(t.text, "first member, second member");
    assert_string_equal(t.format, "gz+text");
    pl_doc_text_free(&t);
    const char *h = "<p>in</p><p>side</p>";
    size_t c = gz(h, strlen(h), buf, 1 << 20);
    assert_int_equal(run("page.html.gz", buf, c, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "in\nside");
    assert_string_equal(t.format, "gz+html");
    pl_doc_text_free(&t);
    assert_int_equal(run("x.gz", buf, c / 2, 1 << 20, &t), PL_DOC_UNREADABLE); /* truncated */
    buf[c / 2] ^= 0xFF;
    assert_int_equal(run("x.gz", buf, c, 1 << 20, &t), PL_DOC_UNREADABLE); /* corrupt */
    char *zeros = calloc(8 << 20, 1);
    memset(zeros, 'a', 8 << 20);
    size_t bomb = gz(zeros, 8 << 20, buf, 1 << 20);
    assert_true(bomb < 64 << 10);
    assert_int_equal(run("bomb.txt.gz", buf, bomb, 1 << 20, &t), PL_DOC_TOO_LARGE); /* stops at the cap */
    free(zeros);
    free(buf);
}

/* A minimal zip with one member, deflated (method 8) or stored (0). */
static size_t make_zip(const char *member, const char *content, int method, uint8_t *out) {
    uint8_t comp[1 << 16];
    size_t clen, n = strlen(content), nl = strlen(member);
    if (method == 8) {
        z_stream z;
        memset(&z, 0, sizeof(z));
        assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
        z.next_in = (Bytef *)(uintptr_t)content;
        z.avail_in = (uInt)n;
        z.next_out = comp;
        z.avail_out = sizeof(comp);
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        clen = sizeof(comp) - z.avail_out;
        deflateEnd(&z);
    } else {
        memcpy(comp, content, n);
        clen = n;
    }
    size_t o = 0;
#define W16(v) (out[o++] = (uint8_t)(v), out[o++] = (uint8_t)((v) >> 8))
#define W32(v) (W16((v) & 0xFFFF), W16(((uint32_t)(v)) >> 16))
    W32(0x04034b50); W16(20); W16(0); W16(method); W16(0); W16(0); W32(0); W32(clen); W32(n); W16(nl); W16(0);
    memcpy(out + o, member, nl); o += nl;
    memcpy(out + o, comp, clen); o += clen;
    size_t cd = o;
    W32(0x02014b50); W16(20); W16(20); W16(0); W16(method); W16(0); W16(0); W32(0); W32(clen); W32(n); W16(nl);
    W16(0); W16(0); W16(0); W16(0); W32(0); W32(0);
    memcpy(out + o, member, nl); o += nl;
    size_t cd_size = o - cd;
    W32(0x06054b50); W16(0); W16(0); W16(1); W16(1); W32(cd_size); W32(cd); W16(0);
#undef W16
#undef W32
    return o;
}

static void test_docx_paragraphs(void **state) {
    (void)state;
    const char *xml = "<?xml version=\"1.0\"?><w:document><w:body>"
                      "<w:p><w:r><w:t>Quarterly</w:t></w:r><w:r><w:t xml:space=\"preserve\"> report &amp; plan</w:t></w:r></w:p>"
                      "<w:p><w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>\xE4\xB8\xAD</w:t></w:r></w:p>"
                      "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>cell</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
                      "</w:body></w:document>";
    uint8_t *zip = malloc(1 << 17);
    pl_doc_text t;
    for (int method = 0; method <= 8; method += 8) {
        size_t n = make_zip("word/document.xml", xml, method, zip);
        assert_int_equal(run("r.docx", zip, n, 1 << 20, &t), PL_DOC_OK);
        assert_string_equal(t.text, "Quarterly report & plan\na\tb\n\xE4\xB8\xAD\ncell");
        assert_string_equal(t.format, "docx");
        pl_doc_text_free(&t);
        for (size_t cut = 0; cut < n; cut += 7) /* every truncation fails cleanly */
            assert_int_not_equal(run("r.docx", zip, cut, 1 << 20, &t), PL_DOC_OK);
    }
    size_t n = make_zip("word/other.xml", xml, 8, zip);
    assert_int_equal(run("r.docx", zip, n, 1 << 20, &t), PL_DOC_UNREADABLE);
    n = make_zip("word/document.xml", xml, 8, zip);
    assert_int_equal(run("r.docx", zip, n, 64, &t), PL_DOC_TOO_LARGE);
    assert_int_equal(run("r.docx", "not a zip at all, just text", 27, 1 << 20, &t), PL_DOC_UNREADABLE);
    free(zip);
}

/* A zip of several members, stored (method 0), in the order given. */
static size_t make_zip_many(const char *const *members, const char *const *contents, int n_members, uint8_t *out) {
    size_t o = 0, offs[16];
#define W16(v) (out[o++] = (uint8_t)(v), out[o++] = (uint8_t)((v) >> 8))
#define W32(v) (W16((v) & 0xFFFF), W16(((uint32_t)(v)) >> 16))
    for (int i = 0; i < n_members; i++) {
        const size_t n = strlen(contents[i]), nl = strlen(members[i]);
        offs[i] = o;
        W32(0x04034b50); W16(20); W16(0); W16(0); W16(0); W16(0); W32(0); W32(n); W32(n); W16(nl); W16(0);
        memcpy(out + o, members[i], nl); o += nl;
        memcpy(out + o, contents[i], n); o += n;
    }
    const size_t cd = o;
    for (int i = 0; i < n_members; i++) {
        const size_t n = strlen(contents[i]), nl = strlen(members[i]);
        W32(0x02014b50); W16(20); W16(20); W16(0); W16(0); W16(0); W16(0); W32(0); W32(n); W32(n); W16(nl);
        W16(0); W16(0); W16(0); W16(0); W32(0); W32(offs[i]);
        memcpy(out + o, members[i], nl); o += nl;
    }
    const size_t cd_size = o - cd;
    W32(0x06054b50); W16(0); W16(0); W16(n_members); W16(n_members); W32(cd_size); W32(cd); W16(0);
#undef W16
#undef W32
    return o;
}

/* pptx (slides by number, one page each), xlsx (sheets, shared and inline strings, numbers),
 * odt (paragraphs, tabs, table cells), epub (chapters in spine order, not archive order). */
static void test_office_formats(void **state) {
    (void)state;
    uint8_t *zip = malloc(1 << 17);
    pl_doc_text t;
    const char *sl = "<p:sld><p:txBody><a:p><a:r><a:t>Slide %s</a:t></a:r><a:br/><a:r><a:t>b&amp;c</a:t></a:r></a:p>"
                     "</p:txBody></p:sld>";
    char s1[256], s2[256], s10[256];
    snprintf(s1, sizeof(s1), sl, "one");
    snprintf(s2, sizeof(s2), sl, "two");
    snprintf(s10, sizeof(s10), sl, "ten");
    const char *pm[] = {"[Content_Types].xml", "ppt/slides/slide10.xml", "ppt/slides/slide2.xml", "ppt/slides/slide1.xml"};
    const char *pc[] = {"<Types/>", s10, s2, s1};
    size_t n = make_zip_many(pm, pc, 4, zip);
    assert_int_equal(run("deck.pptx", zip, n, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "Slide one\nb&c\n\fSlide two\nb&c\n\fSlide ten\nb&c\n\f");
    assert_string_equal(t.format, "pptx");
    pl_doc_text_free(&t);

    const char *xm[] = {"xl/workbook.xml", "xl/sharedStrings.xml", "xl/worksheets/sheet1.xml", "xl/worksheets/sheet2.xml"};
    const char *xc[] = {"<workbook><sheets><sheet name=\"Costs\" sheetId=\"1\"/><sheet name=\"Notes\" sheetId=\"2\"/>"
                        "</sheets></workbook>",
                        "<sst><si><t>item</t></si><si><r><t>rent</t></r><r><t> hall</t></r></si></sst>",
                        "<worksheet><sheetData><row r=\"1\"><c r=\"A1\" t=\"s\"><v>0</v></c><c r=\"B1\"><v>12.5</v></c>"
                        "</row><row r=\"2\"><c r=\"A2\" t=\"s\"><v>1</v></c><c r=\"B2\"/><c r=\"C2\"><v>3</v></c></row>"
                        "</sheetData></worksheet>",
                        "<worksheet><sheetData><row><c t=\"inlineStr\"><is><t>see &lt;p&gt;</t></is></c></row></sheetData>"
                        "</worksheet>"};
    n = make_zip_many(xm, xc, 4, zip);
    assert_int_equal(run("book.xlsx", zip, n, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "# Costs\nitem\t12.5\nrent hall\t3\n\n# Notes\nsee <p>");
    pl_doc_text_free(&t);
    /* a cell whose start tag has no '>' before its "</c>" (found by fuzz_extract: the cell's text
     * was taken from its '>' back to its end, a negative length) is skipped */
    const char *bm[] = {"xl/workbook.xml", "xl/worksheets/sheet1.xml"};
    const char *bc[] = {"<workbook><sheets><sheet name=\"S\" sheetId=\"1\"/></sheets></workbook>",
                        "<worksheet><sheetData><row><c t=\"inlineStr\"</v.</c><c><v>7</v></c></row></sheetData>"
                        "</worksheet>"};
    n = make_zip_many(bm, bc, 2, zip);
    assert_int_equal(run("bad.xlsx", zip, n, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "# S\n7");
    pl_doc_text_free(&t);

    const char *om[] = {"mimetype", "content.xml"};
    const char *oc[] = {"application/vnd.oasis.opendocument.text",
                        "<office:document-content><office:automatic-styles><style:style/></office:automatic-styles>"
                        "<office:body><office:text><text:h>Title</text:h><text:p>a<text:tab/>b<text:line-break/>c</text:p>"
                        "<table:table><table:table-row><table:table-cell><text:p>x</text:p></table:table-cell>"
                        "<table:table-cell><text:p>y</text:p></table:table-cell></table:table-row></table:table>"
                        "</office:text></office:body></office:document-content>"};
    n = make_zip_many(om, oc, 2, zip);
    assert_int_equal(run("memo.odt", zip, n, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "Title\na\tb\nc\nx\n\ty");
    pl_doc_text_free(&t);

    const char *em[] = {"mimetype", "META-INF/container.xml", "OEBPS/ch2.xhtml", "OEBPS/ch1.xhtml", "OEBPS/book.opf"};
    const char *ec[] = {"application/epub+zip",
                        "<container><rootfiles><rootfile full-path=\"OEBPS/book.opf\" media-type=\"x\"/></rootfiles>"
                        "</container>",
                        "<html><body><p>Second chapter.</p></body></html>",
                        "<html><body><h1>One</h1><p>First chapter.</p></body></html>",
                        "<package><manifest><item id=\"c2\" href=\"ch2.xhtml\"/><item id=\"c1\" href=\"ch1.xhtml\"/>"
                        "</manifest><spine><itemref idref=\"c1\"/><itemref idref=\"c2\"/></spine></package>"};
    n = make_zip_many(em, ec, 5, zip);
    assert_int_equal(run("book.epub", zip, n, 1 << 20, &t), PL_DOC_OK);
    assert_string_equal(t.text, "One\nFirst chapter.\n\nSecond chapter.");
    pl_doc_text_free(&t);
    /* broken ones are refused, never a crash */
    for (size_t cut = 0; cut < n; cut += 5) assert_int_not_equal(run("book.epub", zip, cut, 1 << 20, &t), PL_DOC_OK);
    assert_int_equal(run("deck.pptx", "PK\x05\x06", 4, 1 << 20, &t), PL_DOC_UNREADABLE);
    assert_true(pl_extract_supported("a.pptx") && pl_extract_supported("a.xlsx") && pl_extract_supported("a.odt") &&
                pl_extract_supported("a.epub"));
    free(zip);
}

static void test_jsonl_lines(void **state) {
    (void)state;
    pl_doc_text t;
    dp_err err = {0};
    const char *ok = "{\"id\": 1, \"text\": \"hello \\u4e2d\"}";
    assert_int_equal(pl_extract_jsonl_line(ok, strlen(ok), "text", 1 << 20, &t, &err), PL_DOC_OK);
    assert_string_equal(t.text, "hello \xE4\xB8\xAD");
    pl_doc_text_free(&t);
    assert_int_equal(pl_extract_jsonl_line(ok, strlen(ok), "body", 1 << 20, &t, &err), PL_DOC_UNREADABLE);
    assert_non_null(strstr(err.msg, "no string field 'body'"));
    assert_int_equal(pl_extract_jsonl_line("{\"text\": ", 9, "text", 1 << 20, &t, &err), PL_DOC_UNREADABLE);
    assert_non_null(strstr(err.msg, "invalid JSON"));
    const char *nul = "{\"text\": \"a\\u0000b\"}";
    assert_int_equal(pl_extract_jsonl_line(nul, strlen(nul), "text", 1 << 20, &t, &err), PL_DOC_BINARY);
    assert_int_equal(pl_extract_jsonl_line(ok, strlen(ok), "text", 4, &t, &err), PL_DOC_TOO_LARGE);
}

/* Titles of the headings of a Markdown text, "level:title" joined by '|'. */
static void md_titles(const char *text, char *out, size_t cap) {
    pl_headings h = {0};
    assert_int_equal(pl_headings_markdown(text, strlen(text), &h), DP_OK);
    out[0] = 0;
    for (size_t i = 0; i < h.n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%d:%.*s", i ? "|" : "", h.v[i].level,
                 (int)h.v[i].text_len, text + h.v[i].text_at);
    pl_headings_free(&h);
}

static void test_markdown_headings(void **state) {
    (void)state;
    char got[512];
    md_titles("# One\ntext\n## Two ##\n#hashtag\n####### seven\n    # indented code\n", got, sizeof(got));
    assert_string_equal(got, "1:One|2:Two");
    md_titles("```sh\n# comment\n```\n~~~\n# still code\n```\n~~~~\n# Out\n", got, sizeof(got));
    assert_string_equal(got, "1:Out");
    md_titles("Title\n=====\n\n- item\n---\n\nSub  \n---\n# C# and F# #\n#\n", got, sizeof(got));
    assert_string_equal(got, "1:Title|2:Sub|1:C# and F#|1:");
    md_titles("unclosed\n```\n# never\n", got, sizeof(got));
    assert_string_equal(got, "");
    /* paths: a deeper heading nests, a shallower one closes the deeper ones, levels may skip */
    const char *doc = "# A\nx\n### C\ny\n## B\nz\n# D\n";
    pl_headings h = {0};
    assert_int_equal(pl_headings_markdown(doc, strlen(doc), &h), DP_OK);
    pl_heading_cursor c = {0};
    size_t p[PL_HEADING_DEPTH];
    assert_int_equal(pl_headings_path(&h, &c, 0, p), 1);
    assert_int_equal(pl_headings_path(&h, &c, (size_t)(strstr(doc, "y") - doc), p), 2);
    assert_int_equal(h.v[p[1]].level, 3);
    assert_int_equal(pl_headings_path(&h, &c, (size_t)(strstr(doc, "z") - doc), p), 2);
    assert_int_equal(h.v[p[1]].level, 2);
    assert_int_equal(pl_headings_path(&h, &c, strlen(doc), p), 1);
    assert_int_equal(h.v[p[0]].at, (size_t)(strstr(doc, "# D") - doc));
    assert_int_equal(pl_headings_path(&h, &c, 1, p), 1); /* backwards: the cursor starts over */
    assert_int_equal(p[0], 0);
    pl_headings_free(&h);
    /* HTML: <h1>..<h6> recorded at their offsets in the text */
    pl_doc_text t;
    dp_err err = {0};
    const char *html = "<h1>Top</h1><p>a</p><h3> Deep &amp; low </h3><p>b</p>";
    assert_int_equal(pl_extract_text("x.html", (const uint8_t *)html, strlen(html), 1 << 20, &t, &err), PL_DOC_OK);
    assert_int_equal(t.headings.n, 2);
    assert_memory_equal(t.text + t.headings.v[1].text_at, "Deep & low", t.headings.v[1].text_len);
    assert_int_equal(t.headings.v[1].level, 3);
    pl_doc_text_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_encodings),
        cmocka_unit_test(test_html_to_text),
        cmocka_unit_test(test_markdown_headings),
        cmocka_unit_test(test_gzip_members_and_bombs),
        cmocka_unit_test(test_docx_paragraphs),
        cmocka_unit_test(test_office_formats),
        cmocka_unit_test(test_jsonl_lines),
    };
    return cmocka_run_group_tests_name("extract", tests, NULL, NULL);
}
