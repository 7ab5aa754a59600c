#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_gguf (tests/fuzz/corpus/gguf). Standard library only.

Seeds are small valid GGUF files covering every metadata type, arrays of strings, v2 and v3
headers, a non-default alignment and a few tensor types, so mutations reach deep parser states.
Run from this folder: python3 make_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "corpus", "gguf")


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


if __name__ == "__main__":
    main()
