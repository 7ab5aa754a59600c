#!/usr/bin/env python3
"""Makes tests/data/pretok-vectors.json: llama.cpp's token ids for a set of texts under every
BPE pre-tokenizer docpipe runs, with one vocabulary (SmolLM2-135M-Instruct's, from
fetch-real-models.sh) so that only the splitting differs between the cases.

    python3 tests/data/make_pretok_vectors.py SMOLLM2.gguf LLAMA_TOKENIZE > tests/data/pretok-vectors.json

For each pre-tokenizer it writes a vocabulary-only GGUF (the file's metadata, no tensors) with
tokenizer.ggml.pre replaced, and runs `llama-tokenize --stdin --no-escape --no-parse-special --ids` on each text
(add_special as the file says, special-token text read as plain text). For llama-bpe the
add_bos_token key is left out, so the pre-tokenizer's own default (BOS first) shows.
Needs the gguf package (pip install gguf). Used once; the JSON is what the tests read.
"""
import json
import os
import subprocess
import sys
import tempfile

from gguf import GGUFReader, GGUFWriter, GGUFValueType

PRE = ["llama-bpe", "gpt-2", "smollm", "deepseek-llm", "qwen2", "deepseek-r1-qwen", "qwen35"]

TEXTS = [
    "Hello world",
    " Hello world",
    "Hello  world   ",
    "I'm sure they'll say it's fine, aren't they? THEY'LL SAY IT'S",
    "1 12 123 1234 12345 3.14159 1,000,000",
    "Version 2.0.1-rc3 released on 2026-12-04 at 09:45",
    "x=1;y=22;z=333",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "line one\r\nline two\n\n\nline three\t\ttabbed",
    "   leading spaces and trailing   ",
    "\n\n",
    "naïve café résumé Über straße",
    "Привет, мир! Ελληνικά κείμενα",
    "你好，世界。这是一个测试。",
    "日本語のテキストとカタカナ",
    "한국어 텍스트입니다",
    "emoji 🙂🚀 and symbols ©®™ € £ ¥",
    "ｆｕｌｌｗｉｄｔｈ！　ｓｐａｃｅ",
    "“quoted” ‘single’ — dash … ellipsis",
    "tab\tand\u00a0nbsp and\u3000ideographic space",
    "mixed123abc456 abc123 123abc",
    "<|im_start|>user\nnot special here<|im_end|>",
    "C:\\Users\\docs\\report.pdf and /usr/local/bin",
    "https://example.com/path?q=1&r=two#frag",
    "   ",
    "a",
    "µ and ƻ and ǅ and Ⅻ and ½",
    "한글과 漢字 mixed with ASCII",
]


def copy_field(w, f, skip):
    name = f.name
    if name in skip or name.startswith("GGUF."):
        return
    t = f.types[0]
    if t == GGUFValueType.ARRAY:
        sub = f.types[-1]
        if sub == GGUFValueType.STRING:
            w.add_array(name, [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data])
        else:
            w.add_array(name, [f.parts[i].tolist()[0] for i in f.data])
    elif t == GGUFValueType.STRING:
        w.add_string(name, bytes(f.parts[f.data[0]]).decode("utf-8"))
    else:
        w.add_key_value(name, f.parts[f.data[0]].tolist()[0], t)


def main():
    src, tool = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    out = {"vocab": os.path.basename(src),
           "producer": "llama-tokenize (llama.cpp 3f545bec) --stdin --no-escape --no-parse-special --ids, vocabulary-only GGUF",
           "cases": {}}
    with tempfile.TemporaryDirectory() as d:
        for pre in PRE:
            path = os.path.join(d, pre + ".gguf")
            w = GGUFWriter(path, arch=bytes(r.fields["general.architecture"].parts[-1]).decode())
            skip = {"general.architecture", "tokenizer.ggml.pre"}
            if pre == "llama-bpe":
                skip.add("tokenizer.ggml.add_bos_token")
            for f in r.fields.values():
                copy_field(w, f, skip)
            w.add_string("tokenizer.ggml.pre", pre)
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            cases = []
            for t in TEXTS:
                p = subprocess.run([tool, "-m", path, "--stdin", "--no-escape", "--no-parse-special", "--ids", "--log-disable"],
                                   input=t.encode(), capture_output=True, check=True)
                cases.append({"text": t, "ids": json.loads(p.stdout.decode().strip().splitlines()[-1])})
            out["cases"][pre] = cases
    # one case per line: reviewable as text
    sys.stdout.write('{"vocab": %s,\n "producer": %s,\n "cases": {\n' % (json.dumps(out["vocab"]), json.dumps(out["producer"])))
    pres = list(out["cases"])
    for i, pre in enumerate(pres):
        sys.stdout.write('  %s: [\n' % json.dumps(pre))
        rows = out["cases"][pre]
        for j, c in enumerate(rows):
            sys.stdout.write('   %s%s\n' % (json.dumps(c, ensure_ascii=False), "," if j + 1 < len(rows) else ""))
        sys.stdout.write('  ]%s\n' % ("," if i + 1 < len(pres) else ""))
    sys.stdout.write(" }\n}\n")


if __name__ == "__main__":
    main()
