#!/usr/bin/env python3
"""Writes the .npy files and header bytes that tests/npy/test_npy.c compares
our reader and writer against, all produced by numpy itself.

fixtures/*.npy   arrays saved by numpy (np.save, or format.write_array for
                 versions 2.0 and 3.0); their values are literals below and
                 are repeated, with this file named, in test_npy.c.
headers.json     the bytes numpy writes before the data (format 1.0) for
                 shapes too large to save, including shapes whose padding is a
                 full 64 bytes (numpy pads with 64 - n % 64 spaces, never 0).

Run: python3 tests/npy/make_npy_fixtures.py   (needs numpy)
"""
import io
import json
import os

import numpy as np
from numpy.lib import format as npy_format

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")

MATRIX = [[1.5, -2.0, 0.25], [3.0, 0.0, -0.0]]


def save(name, array):
    np.save(os.path.join(FIXTURES, name), array, allow_pickle=False)


def save_version(name, array, version):
    with open(os.path.join(FIXTURES, name), "wb") as f:
        npy_format.write_array(f, array, version=version, allow_pickle=False)


def write_fixtures():
    os.makedirs(FIXTURES, exist_ok=True)
    # read and reproduced byte for byte by our writer
    save("f32_2x3.npy", np.array(MATRIX, dtype=np.float32))
    save("f32_0x3.npy", np.zeros((0, 3), dtype=np.float32))
    save("f32_5.npy", np.array([0.5, 1.0, 1.5, 2.0, 1e-45], dtype=np.float32))
    save("f32_scalar.npy", np.array(7.0, dtype=np.float32))
    save("i32_2x2.npy", np.array([[1, -2], [2147483647, -2147483648]], dtype=np.int32))
    # read only
    save("f64_3.npy", np.array([0.1, -1e300, 5e-324], dtype=np.float64))
    save("i64_2.npy", np.array([-9223372036854775808, 9223372036854775807], dtype=np.int64))
    save("u8_4.npy", np.array([0, 1, 128, 255], dtype=np.uint8))
    save("i32_2x1x3x1.npy", np.arange(6, dtype=np.int32).reshape(2, 1, 3, 1))
    save_version("f32_2x3_v2.npy", np.array(MATRIX, dtype=np.float32), (2, 0))
    save_version("f32_2x3_v3.npy", np.array(MATRIX, dtype=np.float32), (3, 0))
    # refused
    save("f32_fortran.npy", np.asfortranarray(np.array(MATRIX, dtype=np.float32)))
    save("f32_big_endian.npy", np.array([1.0, 2.0], dtype=">f4"))
    save("f16.npy", np.array([1.0, 2.0], dtype=np.float16))
    save("c64.npy", np.array([1 + 2j], dtype=np.complex64))
    save("structured.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))


def header_bytes(descr, shape):
    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    return buffer.getvalue()


def full_pad(header):
    """numpy padded this header with a whole 64 spaces."""
    return header.endswith(b" " * 64 + b"\n")


def write_headers():
    shapes = [("<f4", [0, 3]), ("<f4", [2, 3]), ("<f4", [1000, 7]), ("<f4", [5]), ("<f4", []),
              ("<f4", [9999999999, 3]), ("<f4", [9223372036854775807, 1]),
              ("<f4", [3, 9223372036854775807]), ("<f4", [2, 3, 4]), ("<f4", [1] * 8),
              ("<i4", [2, 2]), ("<f8", [0]), ("|u1", [12, 34, 56])]
    # shapes whose header lands exactly on 64: numpy then adds 64 spaces
    found = 0
    for ndim in range(1, 9):
        for digits in range(1, 19):
            shape = [10 ** (digits - 1)] * ndim
            if found < 3 and full_pad(header_bytes("<f4", shape)):
                shapes.append(("<f4", shape))
                found += 1
    assert found > 0, "no fully padded header found"
    cases = [{"descr": d, "shape": s, "header_hex": header_bytes(d, s).hex()} for d, s in shapes]
    with open(os.path.join(HERE, "headers.json"), "w") as f:
        json.dump({"generator": {"script": "tests/npy/make_npy_fixtures.py",
                                 "numpy": np.__version__}, "headers": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    write_fixtures()
    write_headers()
