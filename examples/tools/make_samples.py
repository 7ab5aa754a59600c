#!/usr/bin/env python3
"""Makes the two binary sample documents under examples/docs (a .docx and a .log.gz) from text
written here, so what is committed can be regenerated and checked. Standard library only;
docpipe itself never needs Python. Run from the repository root: python3 examples/tools/make_samples.py"""
import gzip
import zipfile

DOCX = "examples/docs/handover-memo.docx"
GZ = "examples/docs/archive/access-2026-11-27.log.gz"

PARAGRAPHS = [
    "Handover memo: night shift to day shift, 28 November 2026",
    "The nightly summary job finished at 04:12 UTC with exit code 3: three HR documents could not be read.",
    "Storage node st-04 rebooted once at 02:37 UTC; the vendor has the crash dump.",
    "交接说明：夜班到白班。存储节点st-04在凌晨两点三十七分重启一次，厂商已收到崩溃转储。",
    "Nothing else needs attention before the 10:00 stand-up.",
]

CONTENT_TYPES = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                 '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                 '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                 '<Default Extension="xml" ContentType="application/xml"/>'
                 '<Override PartName="/word/document.xml" ContentType="application/'
                 'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
RELS = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'officeDocument" Target="word/document.xml"/></Relationships>')


def fixed(name):
    info = zipfile.ZipInfo(name, date_time=(2026, 11, 28, 6, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def docx():
    body = "".join(f"<w:p><w:r><w:t xml:space=\"preserve\">{p}</w:t></w:r></w:p>" for p in PARAGRAPHS)
    doc = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
           '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
           f"<w:body>{body}</w:body></w:document>")
    with zipfile.ZipFile(DOCX, "w") as z:
        z.writestr(fixed("[Content_Types].xml"), CONTENT_TYPES)
        z.writestr(fixed("_rels/.rels"), RELS)
        z.writestr(fixed("word/document.xml"), doc)


def log_gz():
    lines = [f"2026-11-27T{h:02d}:{m:02d}:00Z GET /export/tickets 200 {100 + (h * 7 + m) % 900}ms"
             for h in range(0, 5) for m in range(0, 60, 15)]
    lines.append("2026-11-27T04:59:00Z GET /export/tickets 429 3ms throttled")
    with open(GZ, "wb") as f:
        f.write(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))


if __name__ == "__main__":
    docx()
    log_gz()
