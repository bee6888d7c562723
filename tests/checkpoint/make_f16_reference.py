#!/usr/bin/env python3
"""Writes f16_reference.json: numpy's float16 -> float32 conversion of all
65536 half-precision bit patterns, for test_dtype.c.

The 65536 results, as little-endian float32 bit patterns (262144 bytes), are
recorded by their SHA-256 rather than committed; a few patterns are listed in
full so that a failure can be read.  numpy converts in software
(npy_halfbits_to_floatbits) and keeps NaN payloads and signs bit for bit.

Run: python3 tests/checkpoint/make_f16_reference.py   (needs numpy)
"""
import hashlib
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
floats = halves.view(np.float16).astype(np.float32).view(np.uint32)
digest = hashlib.sha256(floats.astype("<u4").tobytes()).hexdigest()

# zero, subnormals (smallest, largest), normals (smallest, one, largest),
# infinities, NaNs (quiet, signalling, with payload), negatives
listed = [0x0000, 0x0001, 0x0002, 0x0155, 0x03ff, 0x0400, 0x3555, 0x3c00, 0x3c01, 0x7bff,
          0x7c00, 0x7c01, 0x7d55, 0x7e00, 0x7fff, 0x8000, 0x8001, 0x83ff, 0xbc00, 0xfbff,
          0xfc00, 0xfe00, 0xffff]
reference = {
    "generator": {"script": "tests/checkpoint/make_f16_reference.py", "numpy": np.__version__},
    "float32_bits_sha256": digest,
    "samples": [{"f16": int(h), "f32": int(floats[h])} for h in listed],
}
with open(os.path.join(HERE, "f16_reference.json"), "w") as f:
    json.dump(reference, f, indent=1)
    f.write("\n")
