#!/usr/bin/env python3
"""Writes the seed corpora for fuzz_gguf (tests/fuzz/corpus/gguf) and fuzz_extract
(tests/fuzz/corpus/extract). Standard library only.

GGUF seeds are small valid files covering every metadata type, arrays of strings, v2 and v3
headers, a non-default alignment and a few tensor types, so mutations reach deep parser states.
Document seeds are one format byte (the order of names[] in fuzz_extract.c) and a small
document of each kind the reader decodes: UTF-8 and UTF-16 text, HTML with entities, scripts
and comments, gzip (one and two members), a docx, a .jsonl line, a pptx, an xlsx, an odt and
an epub.
Run from this folder: python3 make_corpus.py
"""
import gzip
import io
import os
import struct
import zipfile

OUT = os.path.join(os.path.dirname(__file__), "corpus", "gguf")
OUT_EXTRACT = os.path.join(os.path.dirname(__file__), "corpus", "extract")


def s(x: bytes) -> bytes:
    return struct.pack("<Q", len(x)) + x


def kv(key, typ, payload):
    return s(key.encode()) + struct.pack("<I", typ) + payload


def gguf(version, kvs, tensors, align=32):
    """tensors: list of (name, dims, type, data bytes)"""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs)
    infos, off, blobs = b"", 0, []
    for name, dims, typ, data in tensors:
        infos += s(name.encode()) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", typ, off)
        pad = (-len(data)) % align
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    body = head + infos
    body += b"\0" * ((-len(body)) % align)
    return body + b"".join(blobs)


def main():
    os.makedirs(OUT, exist_ok=True)
    f32 = struct.pack("<64f", *[i * 0.25 for i in range(64)])
    q8 = struct.pack("<e", 0.5) + bytes((i * 7) & 0xFF for i in range(32))
    f16 = struct.pack("<32e", *[i / 8 for i in range(32)])
    q4k = struct.pack("<ee", 0.1, 0.01) + bytes(range(12)) + bytes((i * 13) & 0xFF for i in range(128))
    q6k = bytes((i * 5) & 0xFF for i in range(128 + 64)) + bytes((i * 3) & 0x7F for i in range(16)) + struct.pack("<e", 0.05)
    seeds = {
        "minimal-v3": gguf(3, [kv("general.architecture", 8, s(b"qwen3"))], []),
        "minimal-v2": gguf(2, [kv("general.name", 8, s(b"x"))], []),
        "all-types": gguf(3, [
            kv("general.architecture", 8, s(b"qwen35")),
            kv("t.u8", 0, b"\x07"), kv("t.i8", 1, b"\xf9"), kv("t.u16", 2, struct.pack("<H", 700)),
            kv("t.i16", 3, struct.pack("<h", -700)), kv("t.u32", 4, struct.pack("<I", 70000)),
            kv("t.i32", 5, struct.pack("<i", -70000)), kv("t.f32", 6, struct.pack("<f", 1.5)),
            kv("t.bool", 7, b"\x01"), kv("t.u64", 10, struct.pack("<Q", 1 << 40)),
            kv("t.i64", 11, struct.pack("<q", -(1 << 40))), kv("t.f64", 12, struct.pack("<d", 2.5)),
            kv("t.arr", 9, struct.pack("<IQ", 5, 4) + struct.pack("<4i", 3, 3, 2, 0)),
            kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + s(b"a") + s(b"\xc4\xa0b") + s(b"<|im_end|>")),
            kv("qwen35.block_count", 4, struct.pack("<I", 4)),
            kv("qwen35.embedding_length", 4, struct.pack("<I", 32)),
            kv("qwen35.feed_forward_length", 4, struct.pack("<I", 64)),
            kv("qwen35.attention.head_count", 4, struct.pack("<I", 2)),
            kv("qwen35.ssm.conv_kernel", 4, struct.pack("<I", 4)),
            kv("qwen35.ssm.state_size", 4, struct.pack("<I", 8)),
            kv("qwen35.ssm.group_count", 4, struct.pack("<I", 2)),
            kv("qwen35.ssm.time_step_rank", 4, struct.pack("<I", 4)),
            kv("qwen35.ssm.inner_size", 4, struct.pack("<I", 32)),
        ], [("token_embd.weight", [32, 2], 0, f32), ("blk.0.attn_q.weight", [32], 8, q8),
            ("blk.0.attn_k.weight", [32], 1, f16)]),
        "kquants-align64": gguf(3, [kv("general.alignment", 4, struct.pack("<I", 64)),
                                    kv("general.architecture", 8, s(b"llama"))],
                                [("a.weight", [256], 12, q4k), ("b.weight", [256], 14, q6k)], align=64),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name + ".gguf"), "wb") as f:
            f.write(data)
        print(name, len(data))


def gz(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def docx(paragraphs) -> bytes:
    body = "".join(f"<w:p><w:r><w:t>{p}</w:t></w:r></w:p>" for p in paragraphs)
    xml = ('<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
           f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("[Content_Types].xml", (1980, 1, 1, 0, 0, 0)), "<Types/>")
        z.writestr(zipfile.ZipInfo("word/document.xml", (1980, 1, 1, 0, 0, 0)), xml)
    return buf.getvalue()


def zipped(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), text)
    return buf.getvalue()


def main_extract():
    os.makedirs(OUT_EXTRACT, exist_ok=True)
    html = (b"<!DOCTYPE html><html><head><style>p{}</style><script>var a='<p>';</script></head><body>"
            b"<h1>Title &amp; more</h1><p>caf&eacute; &#233; &#x263A; &bogus; <!-- hidden --></p>"
            b"<ul><li>one</li><li>two<br>three</li></ul><pre>  code\n</pre></body></html>")
    text = "Plain text, caf\u00e9, \u65e5\u62a5.\n\nSecond paragraph.\n".encode()
    seeds = {
        "text-utf8": b"\x00" + text,
        "text-utf8-bom": b"\x00\xef\xbb\xbf" + text,
        "text-utf16le": b"\x00\xff\xfe" + text.decode().encode("utf-16-le"),
        "text-utf16be": b"\x00\xfe\xff" + text.decode().encode("utf-16-be"),
        "text-latin1": b"\x07caf\xe9 na\xefve\n",
        "html": b"\x01" + html,
        "html-utf16": b"\x01\xff\xfe" + html.decode().encode("utf-16-le"),
        "gzip-text": b"\x02" + gz(text),
        "gzip-two-members": b"\x02" + gz(text) + gz(b"member two\n"),
        "gzip-html": b"\x06" + gz(html),
        "docx": b"\x03" + docx(["First paragraph &amp; more.", "Second: caf\u00e9."]),
        "markdown": b"\x04# Title\n\n- item *one*\n- item `two`\n\n```c\nint x;\n```\n",
        "jsonl-line": b'\x05{"id": 1, "text": "a document \\u00e9 with \\n escapes"}',
        "pptx": b"\x08" + zipped({
            "[Content_Types].xml": "<Types/>",
            "ppt/slides/slide1.xml": "<p:sld><a:p><a:r><a:t>First &amp; slide</a:t></a:r><a:br/></a:p></p:sld>",
            "ppt/slides/slide2.xml": "<p:sld><a:p><a:r><a:t>Second</a:t></a:r></a:p></p:sld>"}),
        "xlsx": b"\x09" + zipped({
            "xl/workbook.xml": '<workbook><sheets><sheet name="S1" sheetId="1"/></sheets></workbook>',
            "xl/sharedStrings.xml": "<sst><si><t>item</t></si><si><r><t>a</t></r><r><t>b</t></r></si></sst>",
            "xl/worksheets/sheet1.xml": '<worksheet><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c>'
                                        '<c r="B1"><v>2.5</v></c><c t="inlineStr"><is><t>x</t></is></c></row>'
                                        '<row r="2"><c t="s"><v>1</v></c></row></sheetData></worksheet>'}),
        "odt": b"\x0a" + zipped({
            "mimetype": "application/vnd.oasis.opendocument.text",
            "content.xml": "<office:document-content><office:body><office:text><text:h>T</text:h>"
                           "<text:p>a<text:tab/>b<text:line-break/>c</text:p><table:table><table:table-row>"
                           "<table:table-cell><text:p>x</text:p></table:table-cell></table:table-row></table:table>"
                           "</office:text></office:body></office:document-content>"}),
        "epub": b"\x0b" + zipped({
            "mimetype": "application/epub+zip",
            "META-INF/container.xml": '<container><rootfiles><rootfile full-path="O/b.opf"/></rootfiles></container>',
            "O/b.opf": '<package><manifest><item id="a" href="a.xhtml"/><item id="b" href="b.xhtml"/></manifest>'
                       '<spine><itemref idref="b"/><itemref idref="a"/></spine></package>',
            "O/a.xhtml": "<html><body><p>A &eacute;</p></body></html>",
            "O/b.xhtml": "<html><body><h1>B</h1></body></html>"}),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT_EXTRACT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
    main_extract()
