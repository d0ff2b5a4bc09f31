#!/usr/bin/env python3
"""artifact_seeds.py — writes the seed corpus of fuzz_artifact (fuzz/corpus/artifact/):
valid calibration artifacts of every record kind plus hand-made corruptions. Layout: see
src/artifact/artifact.c. Usage: python3 fuzz/artifact_seeds.py fuzz/corpus/artifact"""
import math, os, struct, sys

def fnv(b):
    h = 0xcbf29ce484222325
    for x in b:
        h ^= x
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h

def rec(kind, layer, role, n0, n1, data, fmt='f'):
    return struct.pack('<5I', kind, layer, role, n0, n1) + struct.pack('<%d%s' % (len(data), fmt), *data)

def artifact(recs, n_layers=2, d=8, tag=b'vecinfer', version=1, sha=bytes(range(32)), fix=True):
    payload = b''.join(recs)
    head = b'VQCALIB\0' + struct.pack('<I', version) + tag.ljust(16, b'\0') + sha
    head += struct.pack('<2I6II', n_layers, d, 1, 2, 3, 4, 5, 6, len(recs)) + struct.pack('<Q', len(payload))
    body = head + payload
    return body + struct.pack('<Q', fnv(body) if fix else 0)

d = 8
smooth = rec(1, 0, 0, d, 1, [1.0 + i for i in range(d)])
cb = rec(2, 0, 0, 4, 2, [0.1 * i for i in range(8)])
vcb = rec(2, 1, 1, 2, 8, [0.5 - 0.1 * i for i in range(16)])
U = [1.0 if i == j else 0.0 for i in range(d) for j in range(d)]
pca = rec(3, 1, 0, d, 2, U + [8 - i for i in range(d)])
sens = rec(4, 0, 0, 2, 1, [1.5, float('nan')], 'd')
seeds = {
    'valid_vecinfer': artifact([smooth, cb, vcb]),
    'valid_spectral': artifact([pca], tag=b'spectral'),
    'valid_all': artifact([smooth, cb, vcb, pca, sens], tag=b'mixed'),
    'valid_empty': artifact([], n_layers=1, tag=b'ratequant'),
    'bad_checksum': artifact([smooth, cb], fix=False),
    'bad_magic': b'VQCALIX\0' + artifact([smooth, cb])[8:],
    'bad_version': artifact([smooth, cb], version=7),
    'bad_kind': artifact([rec(9, 0, 0, 1, 1, [0.0])]),
    'bad_dup': artifact([pca, pca], tag=b'spectral'),
    'bad_smooth_only': artifact([smooth]),
    'bad_nan': artifact([smooth, rec(2, 0, 0, 4, 2, [float('nan')] * 8)]),
    'bad_cb_size': artifact([smooth, rec(2, 0, 0, 3, 2, [0.0] * 6)]),
    'bad_geometry': artifact([], d=12),
    'trunc_header': artifact([smooth, cb])[:50],
    'trunc_payload': artifact([smooth, cb])[:-20],
}
out = sys.argv[1] if len(sys.argv) > 1 else 'fuzz/corpus/artifact'
os.makedirs(out, exist_ok=True)
for name, b in seeds.items():
    with open(os.path.join(out, name + '.vqcal'), 'wb') as f:
        f.write(b)
