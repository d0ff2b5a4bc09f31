#!/usr/bin/env python3
"""gguf_edit.py — writes a modified copy of a GGUF file for the bad-input CLI tests (no
dependencies). The metadata is re-serialized, so its length may change: the tensor data
section is copied after padding to general.alignment, tensor offsets (relative to the data
section) stay valid.

  gguf_edit.py IN OUT [edits...]
    --drop-tokens N        drop the last N tokenizer entries (tokens, scores, token_type)
    --token-text ID TEXT   replace the stored text of token ID
    --find-token TEXT      print the id of the token stored as TEXT and exit (OUT unused)
    --offset NAME OFF      set the data offset of tensor NAME
    --type NAME TYPE       set the ggml type id of tensor NAME
    --empty-tokens         make every tokenizer token string empty
    --set-u32 KEY V        set (or add) the u32 metadata KEY
    --drop-key KEY         remove the metadata KEY
    --set-str KEY V        set (or add) the string metadata KEY
    --trunc-arr KEY N      keep the first N entries of the array KEY
"""
import os
import struct
import sys

# the GGUF value writer of the fuzz seed generator (no __pycache__ left in the source tree)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fuzz"))
from gguf_seeds import ARR, FMT as SCALAR, STR, s as pack_str, val as pack_value  # noqa: E402


class Reader:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def str(self):
        n = self.take("<Q")
        s = self.b[self.p:self.p + n]
        self.p += n
        return bytes(s)

    def value(self, t):
        if t == STR:
            return self.str()
        if t == ARR:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[t])


def main(argv):
    src, dst, edits = argv[1], argv[2], argv[3:]
    with open(src, "rb") as f:
        blob = f.read()
    r = Reader(memoryview(blob))
    magic, version, n_t, n_kv = r.take("<I"), r.take("<I"), r.take("<Q"), r.take("<Q")
    assert magic == 0x46554747, "not a GGUF file"
    kvs = []
    for _ in range(n_kv):
        k = r.str()
        t = r.take("<I")
        kvs.append([k, t, r.value(t)])
    tensors = []
    for _ in range(n_t):
        name = r.str()
        nd = r.take("<I")
        ne = [r.take("<Q") for _ in range(nd)]
        tensors.append([name, ne, r.take("<I"), r.take("<Q")])
    kv = {k: e for e, k in ((e, e[0]) for e in kvs)}
    align = kv[b"general.alignment"][2] if b"general.alignment" in kv else 32
    data_start = (r.p + align - 1) // align * align
    i = 0
    while i < len(edits):
        op = edits[i]
        if op == "--drop-tokens":
            n = int(edits[i + 1])
            for key in (b"tokenizer.ggml.tokens", b"tokenizer.ggml.scores", b"tokenizer.ggml.token_type"):
                if key in kv:
                    et, items = kv[key][2]
                    kv[key][2] = (et, items[:len(items) - n])
            i += 2
        elif op == "--token-text":
            et, items = kv[b"tokenizer.ggml.tokens"][2]
            items[int(edits[i + 1])] = edits[i + 2].encode()
            i += 3
        elif op == "--find-token":
            et, items = kv[b"tokenizer.ggml.tokens"][2]
            print(items.index(edits[i + 1].encode()))
            return 0
        elif op in ("--offset", "--type"):
            t = next(t for t in tensors if t[0] == edits[i + 1].encode())
            t[3 if op == "--offset" else 2] = int(edits[i + 2])
            i += 3
        elif op == "--empty-tokens":
            et, items = kv[b"tokenizer.ggml.tokens"][2]
            kv[b"tokenizer.ggml.tokens"][2] = (et, [b""] * len(items))
            i += 1
        elif op == "--set-u32":
            key = edits[i + 1].encode()
            if key in kv:
                kv[key][1], kv[key][2] = 4, int(edits[i + 2])
            else:
                kvs.append([key, 4, int(edits[i + 2])])
                kv[key] = kvs[-1]
            i += 3
        elif op in ("--set-str", "--trunc-arr"):
            key = edits[i + 1].encode()
            if op == "--trunc-arr":
                et, items = kv[key][2]
                kv[key][2] = (et, items[:int(edits[i + 2])])
            elif key in kv:
                kv[key][1], kv[key][2] = STR, edits[i + 2].encode()
            else:
                kvs.append([key, STR, edits[i + 2].encode()])
                kv[key] = kvs[-1]
            i += 3
        elif op == "--drop-key":
            key = edits[i + 1].encode()
            kvs = [e for e in kvs if e[0] != key]
            kv.pop(key, None)
            i += 2
        else:
            raise SystemExit("gguf_edit.py: unknown edit " + op)
    out = bytearray(struct.pack("<IIQQ", magic, version, n_t, len(kvs)))
    for k, t, v in kvs:
        out += pack_str(k) + struct.pack("<I", t) + pack_value(t, v)
    for name, ne, ty, off in tensors:
        out += pack_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ty, off)
    out += b"\0" * (-len(out) % align)
    with open(dst, "wb") as f:
        f.write(out)
        f.write(blob[data_start:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
