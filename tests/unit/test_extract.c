/*
 * test_extract.c - document bytes to text: encodings (BOMs, UTF-16, invalid UTF-8), binary and
 * size limits, HTML to text, gzip including multi-member files and decompression bombs.
 */
#include "testutil.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_encodings),
        cmocka_unit_test(test_html_to_text),
        cmocka_unit_test(test_gzip_members_and_bombs),
        cmocka_unit_test(test_docx_paragraphs),
        cmocka_unit_test(test_jsonl_lines),
    };
    return cmocka_run_group_tests_name("extract", tests, NULL, NULL);
}
