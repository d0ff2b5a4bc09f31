#!/usr/bin/env python3
"""Writes the hand-built seed corpus of fuzz_gguf into fuzz/corpus/gguf/ (deterministic).
Valid tiny GGUF files (v2/v3, every scalar and array type, tensors of every supported ggml
type) and invalid ones (truncated, bad counts/lengths/offsets/types). Run from the repo root."""
import os, struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
       U64: "<Q", I64: "<q", F64: "<d"}
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}

# 1.0 in each plain float type; byte offsets of the fp16 scales inside a block of each block type
PLAIN = {0: struct.pack("<f", 1.0), 1: b"\x00\x3c", 30: b"\x80\x3f"}
SCALES = {2: (0,), 3: (0, 2), 6: (0,), 7: (0, 2), 8: (0,), 12: (0, 2), 13: (0, 2), 14: (208,)}

def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(b)) + b

def val(t, v):
    if t == STR:
        return s(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(val(et, i) for i in items)
    return struct.pack(FMT[t], v)

def gguf(kvs, tensors, version=3, align=32, data=None):
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + val(t, v)
    blobs, off = [], 0
    for name, ne, ty in tensors:
        bs, ts = TYPES[ty]
        n = 1
        for d in ne[1:]:
            n *= d
        nbytes = n * (ne[0] // bs) * ts
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ty, off)
        blob = bytearray((i * 37 + len(name)) & 0xFF for i in range(nbytes))
        # the reader refuses non-finite values and block scales (ggml validate_row_data):
        # plain float types hold 1.0, block types get finite fp16 scales
        if ty in PLAIN:
            blob = bytearray(PLAIN[ty] * (nbytes // ts))
        for b0 in range(0, nbytes, ts):
            for at in SCALES.get(ty, ()):
                blob[b0 + at:b0 + at + 2] = b"\x00\x3c"
        blob = bytes(blob)
        blobs.append(blob + b"\0" * ((-nbytes) % align))
        off += len(blobs[-1])
    out += b"\0" * ((-len(out)) % align)
    body = b"".join(blobs)
    return out + (data if data is not None else body)

def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    meta = [("general.architecture", STR, "llama"), ("general.alignment", U32, 32),
            ("llama.block_count", U32, 2), ("llama.context_length", U32, 256),
            ("llama.embedding_length", U32, 64), ("llama.feed_forward_length", U32, 128),
            ("llama.attention.head_count", U32, 4), ("llama.attention.head_count_kv", U32, 2),
            ("llama.rope.freq_base", F32, 10000.0),
            ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
            ("tokenizer.ggml.model", STR, "gpt2"),
            ("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "a", "b", "ab", " "])),
            ("tokenizer.ggml.token_type", ARR, (I32, [3, 1, 1, 1, 1])),
            ("tokenizer.ggml.merges", ARR, (STR, ["a b"])),
            ("tokenizer.ggml.bos_token_id", U32, 0)]
    scalars = [("k.u8", U8, 7), ("k.i8", I8, -7), ("k.u16", U16, 700), ("k.i16", I16, -700),
               ("k.i32", I32, -70000), ("k.bool", BOOL, 1), ("k.u64", U64, 1 << 40),
               ("k.i64", I64, -(1 << 40)), ("k.f64", F64, 0.25),
               ("k.arr_f32", ARR, (F32, [1.0, -2.0])), ("k.arr_u8", ARR, (U8, [])),
               ("k.arr_str_empty", ARR, (STR, []))]
    tensors = [("token_embd.weight", [64, 5], 3), ("output_norm.weight", [64], 0)]
    files["valid_meta_v3.gguf"] = gguf(meta + scalars, tensors)
    files["valid_meta_v2.gguf"] = gguf(meta, tensors, version=2)
    files["valid_empty.gguf"] = gguf([], [])
    all_types = [("t%d" % ty, [TYPES[ty][0] * 2, 2] if TYPES[ty][0] < 256 else [256, 1], ty)
                 for ty in sorted(TYPES)]
    files["valid_all_types.gguf"] = gguf([("general.alignment", U32, 64)], all_types, align=64)
    good = files["valid_meta_v3.gguf"]
    files["trunc_header.gguf"] = good[:20]
    files["trunc_meta.gguf"] = good[:200]
    files["trunc_data.gguf"] = good[:-1]
    files["bad_magic.gguf"] = b"GGUX" + good[4:]
    files["bad_version1.gguf"] = good[:4] + struct.pack("<I", 1) + good[8:]
    files["bad_bigendian.gguf"] = good[:4] + struct.pack(">I", 3) + good[8:]
    files["bad_tensor_count.gguf"] = good[:8] + struct.pack("<Q", 1 << 62) + good[16:]
    files["bad_kv_count.gguf"] = good[:16] + struct.pack("<Q", 0xFFFFFFFFFFFFFFFF) + good[24:]
    files["bad_strlen.gguf"] = good[:24] + struct.pack("<Q", 1 << 63) + good[32:]
    files["bad_unknown_type.gguf"] = gguf([], [("x", [32], 8)]).replace(
        struct.pack("<IQ", 8, 0), struct.pack("<IQ", 16, 0), 1)
    files["bad_offset.gguf"] = gguf([], [("x", [4], 0), ("y", [4], 0)]).replace(
        struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 1 << 40), 1)
    files["bad_misaligned.gguf"] = gguf([], [("x", [4], 0), ("y", [4], 0)]).replace(
        struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 4), 1)
    files["bad_alignment.gguf"] = gguf([("general.alignment", U32, 24)], [("x", [4], 0)])
    files["bad_nested_array.gguf"] = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s("k") + \
        struct.pack("<IIQ", ARR, ARR, 1) + struct.pack("<IQ", U8, 1) + b"\1"
    files["bad_dup_key.gguf"] = gguf([("a", U8, 1), ("a", U8, 2)], [])
    files["bad_ndims.gguf"] = gguf([], [("x", [4], 0)]).replace(
        s("x") + struct.pack("<I", 1), s("x") + struct.pack("<I", 9), 1)
    files["bad_row_block.gguf"] = gguf([], [("x", [32], 8)]).replace(
        struct.pack("<Q", 32) + struct.pack("<I", 8), struct.pack("<Q", 33) + struct.pack("<I", 8), 1)
    # tensors must tile the data section in offset order (each next one where the previous
    # ends, rounded up to the alignment), with finite values and scales
    two = [("x", [8], 0), ("y", [8], 0)]          # 32 bytes each, alignment 32: 0, 32
    files["bad_overlap.gguf"] = gguf([], two).replace(
        struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 0), 1)
    files["bad_gap.gguf"] = gguf([], two + [("z", [8], 0)]).replace(
        struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 64), 1)
    files["bad_relabel_size.gguf"] = gguf([], [("x", [32, 4], 8), ("y", [8], 0)]).replace(
        struct.pack("<Q", 4) + struct.pack("<I", 8), struct.pack("<Q", 4) + struct.pack("<I", 2), 1)
    nan = gguf([], [("x", [32, 2], 8)])
    at = len(nan) - 2 * 34 - ((-2 * 34) % 32) + 34  # the second block's fp16 d
    files["bad_nan_scale.gguf"] = nan[:at] + b"\x00\x7e" + nan[at + 2:]
    inf = gguf([], [("x", [8], 0)])
    files["bad_inf_value.gguf"] = inf[:-32 + 12] + struct.pack("<f", float("inf")) + inf[-32 + 16:]
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), OUT))

if __name__ == "__main__":
    main()
