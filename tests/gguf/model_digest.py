#!/usr/bin/env python3
"""The reference digests tests/gguf/check_model.c compares a real GGUF
checkpoint's dequantization with: the SHA-256 of every tensor dequantized
by gguf-py (gguf.quants.dequantize) to float32, little-endian, the tensors
in file order; and the same for the values rounded to bf16 as torch rounds
(as tests/gguf/make_fixtures.py: gguf's BF16 quantization, NaN -> 0x7FC0).

Run:  python3 tests/gguf/model_digest.py FILE.gguf   (needs gguf and numpy;
a few GB of memory for the largest tensors). Prints both digests, the
package versions, and the tensor count; the values go into check_model.c's
table of models.
"""
import hashlib
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (bf16_reference)


def main():
    reader = gguf.GGUFReader(sys.argv[1])
    f32 = hashlib.sha256()
    bf16 = hashlib.sha256()
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        values = np.ascontiguousarray(values, dtype="<f4").ravel()
        f32.update(values.tobytes())
        bits = (make_fixtures.bf16_reference(values).view(np.uint32) >> 16).astype("<u2")
        bf16.update(bits.tobytes())
    print(f"tensors: {len(reader.tensors)}")
    print(f"float32: {f32.hexdigest()}")
    print(f"bf16:    {bf16.hexdigest()}")
    print(f"gguf {make_fixtures.fixture_versions.module_version(gguf)}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
