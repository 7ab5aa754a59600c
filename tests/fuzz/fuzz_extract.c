/*
 * fuzz_extract.c - libFuzzer target: any bytes as a document (docs/operations.md, security).
 * The first byte picks the format the name would select (text, HTML, gzip, docx, Markdown, a
 * .jsonl line, pptx, xlsx, odt, epub); the rest is the file. A document is extracted or refused with a reason; what
 * comes out is valid UTF-8 without NUL bytes and within the size limit; never a crash, never
 * more memory than the limit allows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "extract.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const names[] = {"a.txt", "a.html", "a.txt.gz", "a.docx", "a.md", "a.jsonl", "a.htm.gz",
                                        "a.c",   "a.pptx", "a.xlsx",   "a.odt",  "a.epub"};
    const size_t max_bytes = 1u << 20;
    const char *name = names[data[0] % (sizeof(names) / sizeof(names[0]))];
    pl_doc_text t;
    memset(&t, 0, sizeof(t));
    dp_err err = {0};
    pl_doc_error e = !strcmp(name, "a.jsonl")
                         ? pl_extract_jsonl_line((const char *)data + 1, size - 1, "text", max_bytes, &t, &err)
                         : pl_extract_text(name, data + 1, size - 1, max_bytes, &t, &err);
    if (e == PL_DOC_OK) {
        if (!t.text || t.len > max_bytes || strlen(t.text) != t.len || !dp_utf8_valid((const uint8_t *)t.text, t.len))
            __builtin_trap();
        /* headings lie inside the text, in order, with a level 1..6 */
        for (size_t i = 0; i < t.headings.n; i++) {
            const pl_heading *h = &t.headings.v[i];
            if (h->level < 1 || h->level > 6 || h->text_at < h->at || h->text_at + h->text_len > t.len ||
                (i && h->at < t.headings.v[i - 1].at))
                __builtin_trap();
        }
        pl_doc_text_free(&t);
    } else if (!err.msg[0] || !pl_doc_error_code(e)) {
        __builtin_trap(); /* every refusal says why */
    }
    return 0;
}
