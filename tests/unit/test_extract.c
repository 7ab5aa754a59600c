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
    assert_int_equal(run("a.pdf", "%PDF", 4, 1 << 20, &t), PL_DOC_UNSUPPORTED);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_encodings),
        cmocka_unit_test(test_html_to_text),
        cmocka_unit_test(test_gzip_members_and_bombs),
    };
    return cmocka_run_group_tests_name("extract", tests, NULL, NULL);
}
