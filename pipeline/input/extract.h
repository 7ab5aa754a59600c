/*
 * extract.h - document bytes to plain UTF-8 text, by format (the reader stage's decoding half;
 * walking folders is reader.c's job).
 *
 *   text formats  .txt .md .rst and source code: byte-order marks handled (UTF-8, UTF-16 LE/BE)
 *   .html .htm    tags, scripts and styles dropped, entities decoded, block elements -> line breaks
 *   .gz           zlib, every member of a multi-member file, then by the inner name's extension
 *   .docx .pptx .xlsx .odt .epub   zip + XML office documents (office.c): paragraphs; slides as
 *                 pages; sheets as tab-separated rows; chapters in spine order
 *   .pdf          the text layer, by poppler's pdftotext (-layout, UTF-8; the bytes on its stdin,
 *                 no shell, 120 s and the size limit): pages end with a form feed (\f)
 *   .jsonl        not here: each line is a document of its own, see pl_extract_jsonl_line
 *
 * Invalid UTF-8 becomes U+FFFD (counted); NUL bytes in a text document mean binary_file;
 * output past the size limit (after decompression too) means too_large.
 */
#ifndef PL_EXTRACT_H
#define PL_EXTRACT_H

#include <stddef.h>
#include <stdint.h>

#include "headings.h"
#include "status.h"

typedef enum pl_doc_error {
    PL_DOC_OK = 0,
    PL_DOC_BINARY,        /* "binary_file" */
    PL_DOC_TOO_LARGE,     /* "too_large" */
    PL_DOC_UNREADABLE,    /* "input_unreadable": corrupt compressed data, bad encoding */
    PL_DOC_UNSUPPORTED,   /* "unsupported_format" */
} pl_doc_error;

typedef struct pl_doc_text {
    char *text;           /* NUL-terminated UTF-8, owned; free with pl_doc_text_free() */
    size_t len;
    size_t n_replaced;    /* invalid sequences replaced by U+FFFD */
    const char *format;   /* "text", "html", "gz+text", ... (static) */
    pl_headings headings; /* of Markdown (.md, .markdown) and HTML documents */
} pl_doc_text;

/* The record code of an error ("binary_file", ...). */
const char *pl_doc_error_code(pl_doc_error e);
/* True when the file name's extension is one the reader extracts. */
int pl_extract_supported(const char *name);
/* Extracts name's bytes (the name picks the format) into out. Returns PL_DOC_OK or the reason
 * the document is skipped, with a human message in err. max_bytes bounds the decoded size. */
pl_doc_error pl_extract_text(const char *name, const uint8_t *data, size_t len, size_t max_bytes, pl_doc_text *out,
                             dp_err *err);
void pl_doc_text_free(pl_doc_text *t);
/* A document through an external converter (the job's `converters`): the bytes are written to a
 * private temporary file named with the document's extension, "{input}" in argv is replaced by
 * its path, the program runs without a shell, stdin closed, at most timeout_ms and max_bytes
 * of output (stdout, UTF-8 text). A failure, a non-zero exit or a timeout is PL_DOC_UNREADABLE
 * quoting the end of its stderr; a program that is not installed, PL_DOC_UNSUPPORTED. */
pl_doc_error pl_extract_convert(const char *ext, const char *const *argv, size_t argc, const uint8_t *data, size_t len,
                                size_t max_bytes, int timeout_ms, pl_doc_text *out, dp_err *err);
/* One line of a .jsonl file: the string value of `field` (a JSON object per line). Invalid
 * JSON, a missing field or a non-string value is PL_DOC_UNREADABLE with the reason in err. */
pl_doc_error pl_extract_jsonl_line(const char *line, size_t len, const char *field, size_t max_bytes,
                                   pl_doc_text *out, dp_err *err);

#endif /* PL_EXTRACT_H */
