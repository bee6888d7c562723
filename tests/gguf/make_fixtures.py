#!/usr/bin/env python3
"""Writes the GGUF fixtures of tests/gguf/ with the `gguf` package (gguf-py,
llama.cpp's Python reader and writer) and records its reference
dequantization, which tests/gguf/test_gguf_quants.c matches bit for bit.

Re-run:  python3 tests/gguf/make_fixtures.py   (from the source root; needs
gguf and numpy). The random generator is seeded: every run writes the same
bytes with the same package versions.

fixtures/quants.gguf    one tensor per ggml type we dequantize, named after
                        it in lower case ("q4_k"): F32, F16, BF16 (random bit
                        patterns, NaN payloads, infinities, subnormals and
                        signed zeros among them), Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
                        (32 blocks each), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (16
                        blocks each). Blocks are built by hand: random quant
                        bits, every sub-block scale (and min) value each
                        format can hold, and half-precision scales that run
                        through +-0, the smallest and largest subnormals, the
                        smallest normal, +-65504 and random finite values.
                        Plus "iq4_nl", random blocks of a type we refuse.
fixtures/ref/TYPE.f32.npy   gguf.quants.dequantize of that tensor's bytes,
                        float32, flat in element order (ne[0] fastest).
fixtures/ref/TYPE.bf16.npy  the same rounded to bf16 as torch rounds
                        (c10/util/BFloat16.h, round_to_nearest_even: to
                        nearest, ties to even, every NaN 0x7FC0), stored
                        widened to float32 (bf16 bits << 16, exact) so that
                        the .npy reader of io/formats reads it. For non-NaN
                        values this is gguf's own BF16 quantization (ggml's
                        rounding, the same rule).
fixtures/meta_v3.gguf   every metadata value type (the thirteen scalars and
                        arrays of them, nested arrays, empty and non-ASCII
                        strings), a Qwen2-style configuration and tokenizer,
                        general.alignment 64, and F32/Q8_0 tensors of one to
                        four dimensions; the values are the literals of
                        meta_writer below and are repeated in
                        tests/gguf/test_gguf_reader.c.
fixtures/meta_v2.gguf   the same entries with the default alignment (32),
                        stamped version 2: versions 2 and 3 have the same
                        little-endian layout (docs/gguf.md, Version History:
                        version 3 only added big-endian files) and gguf-py
                        writes only version 3, so the version field is the
                        one byte that differs.
fixtures/VERSIONS       the script and package versions (tests/fixture_versions.py).
"""
import os
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fixture_versions  # noqa: E402  (tests/fixture_versions.py)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
REF = os.path.join(FIXTURES, "ref")

QK_K = 256

# Half-precision scales every quantized type cycles through first: +-1,
# +-0, the smallest subnormal, the largest subnormal, the smallest normal,
# +-65504 (the largest finite), 2^-10 and 1/3.
SPECIAL_HALVES = [0x3C00, 0xBC00, 0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF,
                  0x0400, 0x8400, 0x7BFF, 0xFBFF, 0x1400, 0x3555]


def finite_halves(rng, n, start):
    """n half-precision bit patterns: SPECIAL_HALVES from index `start` on,
    then random finite ones (exponent field not all ones)."""
    out = []
    i = start
    while len(out) < n:
        if i < len(SPECIAL_HALVES):
            out.append(SPECIAL_HALVES[i])
            i += 1
            continue
        h = int(rng.integers(0, 0x10000))
        if (h >> 10) & 0x1F != 0x1F:
            out.append(h)
    return np.array(out, dtype=np.uint16)


def halves_bytes(values):
    return values.astype("<u2").view(np.uint8).reshape(-1, 2)


def block_matrix(parts):
    """Concatenates per-block byte fields [(n_blocks, k) uint8] into blocks."""
    return np.concatenate(parts, axis=1).astype(np.uint8)


def random_bytes(rng, n_blocks, k):
    return rng.integers(0, 256, size=(n_blocks, k), dtype=np.uint8)


def legacy_blocks(rng, qtype, n_blocks):
    """Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: fp16 d (and m), random quants."""
    d = halves_bytes(finite_halves(rng, n_blocks, 0))
    m = halves_bytes(finite_halves(rng, n_blocks, 5))
    if qtype == T.Q4_0:
        return block_matrix([d, random_bytes(rng, n_blocks, 16)])
    if qtype == T.Q4_1:
        return block_matrix([d, m, random_bytes(rng, n_blocks, 16)])
    if qtype == T.Q5_0:
        return block_matrix([d, random_bytes(rng, n_blocks, 4), random_bytes(rng, n_blocks, 16)])
    if qtype == T.Q5_1:
        return block_matrix([d, m, random_bytes(rng, n_blocks, 4),
                             random_bytes(rng, n_blocks, 16)])
    if qtype == T.Q8_0:
        qs = random_bytes(rng, n_blocks, 32)
        qs[:8] = np.arange(256, dtype=np.uint8).reshape(8, 32)  # every int8 value
        return block_matrix([d, qs])
    raise ValueError(qtype)


def pack_q3_k_scales(scales):
    """Sixteen 6-bit scales into Q3_K's 12 bytes: low nibbles of scales k and
    k + 8 in byte k (k < 8), the top two bits of scale i + 4 j at bits 2 j of
    byte 8 + i."""
    packed = np.zeros(12, dtype=np.uint8)
    for k in range(8):
        packed[k] = (scales[k] & 0xF) | ((scales[k + 8] & 0xF) << 4)
    for i in range(4):
        for j in range(4):
            packed[8 + i] |= ((scales[i + 4 * j] >> 4) & 3) << (2 * j)
    return packed


def pack_k4_scales(sc, mn):
    """Eight 6-bit scales and mins into the 12 bytes of Q4_K and Q5_K (the
    inverse of ggml's get_scale_min_k4)."""
    packed = np.zeros(12, dtype=np.uint8)
    for j in range(4):
        packed[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
        packed[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6)
        packed[j + 8] = (sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4)
    return packed


def k_blocks(rng, qtype, n_blocks):
    """Q2_K .. Q6_K with every sub-block scale value in the first blocks."""
    d = halves_bytes(finite_halves(rng, n_blocks, 0))
    dmin = halves_bytes(finite_halves(rng, n_blocks, 7))
    if qtype == T.Q2_K:
        # 16 bytes a block, each a 4-bit scale and a 4-bit min: 0..255 over 16 blocks.
        scales = (np.arange(n_blocks * 16) % 256).astype(np.uint8).reshape(n_blocks, 16)
        return block_matrix([scales, random_bytes(rng, n_blocks, QK_K // 4), d, dmin])
    if qtype == T.Q3_K:
        packed = np.stack([pack_q3_k_scales((np.arange(16) + 16 * b) % 64) if b < 4 else
                           pack_q3_k_scales(rng.integers(0, 64, 16)) for b in range(n_blocks)])
        return block_matrix([random_bytes(rng, n_blocks, QK_K // 8),
                             random_bytes(rng, n_blocks, QK_K // 4), packed, d])
    if qtype in (T.Q4_K, T.Q5_K):
        packed = np.stack([pack_k4_scales((np.arange(8) + 8 * b) % 64, (np.arange(8) + 8 * b + 29) % 64)
                           if b < 8 else pack_k4_scales(rng.integers(0, 64, 8), rng.integers(0, 64, 8))
                           for b in range(n_blocks)])
        sc, mn = gguf.quants.Q4_K.get_scale_min(packed)  # gguf's own unpacking
        assert set(sc.ravel().tolist()) == set(range(64)) == set(mn.ravel().tolist())
        parts = [d, dmin, packed]
        if qtype == T.Q5_K:
            parts.append(random_bytes(rng, n_blocks, QK_K // 8))
        parts.append(random_bytes(rng, n_blocks, QK_K // 2))
        return block_matrix(parts)
    if qtype == T.Q6_K:
        # int8 scales: every value -128..127 over 16 blocks.
        scales = (np.arange(n_blocks * 16) % 256).astype(np.uint8).reshape(n_blocks, 16)
        return block_matrix([random_bytes(rng, n_blocks, QK_K // 2),
                             random_bytes(rng, n_blocks, QK_K // 4), scales, d])
    raise ValueError(qtype)


def float_bits(rng, qtype, n):
    """Raw F32/F16/BF16 elements: special patterns first, then random bits."""
    if qtype == T.F32:
        special = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x7F800000,
                   0xFF800000, 0x7FC00000, 0x7F800001, 0xFFBFFFFF, 0x3F800000]
        bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
        bits[:len(special)] = special
        return bits.astype("<u4").view(np.uint8)
    special = {T.F16: [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00,
                       0x7E00, 0x7C01, 0xFDFF, 0x3C00],
               T.BF16: [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0x7F80, 0xFF80,
                        0x7FC0, 0x7F81, 0xFFBF, 0x3F80]}[qtype]
    bits = rng.integers(0, 0x10000, size=n, dtype=np.uint32).astype(np.uint16)
    bits[:len(special)] = special
    return bits.astype("<u2").view(np.uint8)


def bf16_reference(values):
    """Float32 -> bf16 as torch rounds: gguf's BF16 quantization (ggml's
    round to nearest even) for every non-NaN value, 0x7FC0 for NaN. Returned
    widened to float32."""
    bits = gguf.quants.quantize(values, T.BF16).view("<u2").copy()
    bits[np.isnan(values)] = 0x7FC0
    return (bits.astype(np.uint32) << 16).view(np.float32)


# name, type, rows, row length
QUANT_TENSORS = [
    ("f32", T.F32, 8, 64),
    ("f16", T.F16, 8, 64),
    ("bf16", T.BF16, 8, 64),
    ("q4_0", T.Q4_0, 4, 256),
    ("q4_1", T.Q4_1, 4, 256),
    ("q5_0", T.Q5_0, 4, 256),
    ("q5_1", T.Q5_1, 4, 256),
    ("q8_0", T.Q8_0, 4, 256),
    ("q2_k", T.Q2_K, 8, 512),
    ("q3_k", T.Q3_K, 8, 512),
    ("q4_k", T.Q4_K, 8, 512),
    ("q5_k", T.Q5_K, 8, 512),
    ("q6_k", T.Q6_K, 8, 512),
]


def write_quants():
    rng = np.random.default_rng(20260)
    os.makedirs(REF, exist_ok=True)
    writer = gguf.GGUFWriter(os.path.join(FIXTURES, "quants.gguf"), "quants")
    for name, qtype, rows, row_len in QUANT_TENSORS:
        block_elements, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        n_blocks = rows * row_len // block_elements
        if qtype in (T.F32, T.F16, T.BF16):
            raw = float_bits(rng, qtype, rows * row_len)
        elif block_elements == 32:
            raw = legacy_blocks(rng, qtype, n_blocks)
        else:
            raw = k_blocks(rng, qtype, n_blocks)
        raw = np.ascontiguousarray(raw).reshape(rows, row_len // block_elements * block_bytes)
        writer.add_tensor(name, raw, raw_dtype=qtype)
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32, copy=False).ravel()
        assert ref.size == rows * row_len
        np.save(os.path.join(REF, f"{qtype.name}.f32.npy"), ref, allow_pickle=False)
        np.save(os.path.join(REF, f"{qtype.name}.bf16.npy"), bf16_reference(ref),
                allow_pickle=False)
    # A type we do not dequantize: refused by name.
    block_elements, block_bytes = gguf.GGML_QUANT_SIZES[T.IQ4_NL]
    writer.add_tensor("iq4_nl", random_bytes(rng, 2, 4 * block_bytes), raw_dtype=T.IQ4_NL)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def meta_writer(path, alignment):
    """The metadata fixture's content (test_gguf_reader.c repeats it)."""
    V = gguf.GGUFValueType
    w = gguf.GGUFWriter(path, "qwen2")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.true", True)
    w.add_bool("test.false", False)
    w.add_string("test.string", "h\u00e9llo w\u00f6rld \u2713")
    w.add_key_value("test.empty_string", "", V.STRING)
    w.add_uint64("test.u64", 2**64 - 1)
    w.add_int64("test.i64", -2**63)
    w.add_float64("test.f64", 1e300)
    w.add_float64("test.f64_tenth", 0.1)
    w.add_uint64("test.count_u64", 24)
    w.add_int32("test.count_i32", 24)
    w.add_int32("test.minus_one", -1)
    w.add_key_value("test.array.u8", [0, 1, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.array.i8", [-128, 0, 127], V.ARRAY, sub_type=V.INT8)
    w.add_key_value("test.array.u16", [0, 65535], V.ARRAY, sub_type=V.UINT16)
    w.add_key_value("test.array.i16", [-32768, 32767], V.ARRAY, sub_type=V.INT16)
    w.add_key_value("test.array.u32", [0, 4294967295], V.ARRAY, sub_type=V.UINT32)
    w.add_key_value("test.array.i32", [-2147483648, 2147483647], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("test.array.u64", [2**64 - 1, 7], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("test.array.i64", [-2**63, 2**63 - 1], V.ARRAY, sub_type=V.INT64)
    w.add_key_value("test.array.f32", [1.5, -2.25], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("test.array.f64", [1e-300, -0.5], V.ARRAY, sub_type=V.FLOAT64)
    w.add_key_value("test.array.bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("test.array.string", ["a", "", "\u00fc"], V.ARRAY, sub_type=V.STRING)
    w.add_array("test.array.nested", [[1, 2], [3], [4, 5, 6]])
    w.add_array("test.array.deep", [[["x"]], [["y", "z"]]])
    # A Qwen2 configuration and tokenizer as llama.cpp's converter writes them.
    w.add_block_count(2)
    w.add_context_length(32768)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(["a", "b", "ab", "<|endoftext|>"])
    w.add_token_types([1, 1, 1, 3])
    w.add_token_merges(["a b"])
    w.add_bos_token_id(3)
    w.add_eos_token_id(3)
    w.add_pad_token_id(3)
    # Tensors of one to four dimensions (numpy shapes; GGUF stores them
    # reversed, fastest first), values 0, 1, 2, ...
    w.add_tensor("t1", np.arange(5, dtype=np.float32))
    w.add_tensor("t2", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.add_tensor("t3", np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    w.add_tensor("t4", np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4))
    w.add_tensor("q8", gguf.quants.quantize(np.linspace(-1, 1, 128, dtype=np.float32)
                                            .reshape(2, 64), T.Q8_0), raw_dtype=T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_meta(path, version, alignment):
    """Reads a metadata fixture back with gguf's reader."""
    r = gguf.GGUFReader(path)
    assert int(r.fields["GGUF.version"].parts[0][0]) == version
    assert r.alignment == alignment
    assert r.fields["test.u64"].contents() == 2**64 - 1
    # gguf-py's reader flattens nested arrays: the types and leaves.
    V = gguf.GGUFValueType
    nested, deep = r.fields["test.array.nested"], r.fields["test.array.deep"]
    assert nested.types == [V.ARRAY, V.ARRAY, V.INT32] and nested.contents() == [1, 2, 3, 4, 5, 6]
    assert deep.types == [V.ARRAY, V.ARRAY, V.ARRAY, V.STRING] and deep.contents() == ["x", "y", "z"]
    shapes = {t.name: list(t.shape) for t in r.tensors}  # gguf-py lists ne order
    assert shapes["t2"] == [4, 3] and shapes["t4"] == [4, 3, 2, 1] and shapes["q8"] == [64, 2]


def write_meta():
    v3 = os.path.join(FIXTURES, "meta_v3.gguf")
    v2 = os.path.join(FIXTURES, "meta_v2.gguf")
    meta_writer(v3, 64)
    meta_writer(v2, None)
    with open(v2, "r+b") as f:
        f.seek(4)
        assert f.read(4) == (3).to_bytes(4, "little")
        f.seek(4)
        f.write((2).to_bytes(4, "little"))
    check_meta(v3, 3, 64)
    check_meta(v2, 2, 32)


def main():
    os.makedirs(FIXTURES, exist_ok=True)
    write_quants()
    write_meta()
    fixture_versions.write_versions(FIXTURES, "tests/gguf/make_fixtures.py", [gguf, np])


if __name__ == "__main__":
    main()
