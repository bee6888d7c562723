#!/usr/bin/env python3
"""Builds the quantized GGUF fixture of tests/model/test_qwen2_gguf_hf.c and
records what HF transformers computes on it.

Re-run:  python3 tests/model/make_gguf_fixture.py   (from the source root; CPU,
needs torch, transformers >= 5, gguf, accelerate, numpy). Seeded: the same file
on every run.

tests/model/fixtures/gguf_q/ holds
  model.gguf    a random Qwen2 of odd shape (2 layers, hidden 96, MLP 224, 6
                query heads and 2 KV heads of 32, vocabulary 320, untied
                output), written with gguf-py as llama.cpp's converter
                writes a Qwen2 model (qwen2.* keys, blk.N.* names, a gpt2
                tokenizer of 320 single-character tokens), its matrices
                quantized by gguf.quants.quantize: Q8_0, Q4_0, Q4_1, Q5_0,
                Q5_1 by layer and matrix, the embedding Q8_0, the output
                Q5_1, norms and biases F32
  prompt.npy    int32 [n]           prompt token ids
  logits.npy    float32 [n, vocab]  HF's logits at every prompt position:
                AutoModelForCausalLM.from_pretrained(dir, gguf_file=...,
                dtype=float32), which dequantizes with gguf-py to float32
  VERSIONS      the script and the package versions
"""
import os
import sys

import gguf
import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_versions import write_versions  # noqa: E402

OUT = os.path.join("tests", "model", "fixtures", "gguf_q")
LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, VOCAB = 2, 96, 224, 6, 2, 320
EPS, THETA, CONTEXT = 1e-6, 10000.0, 512
Q = gguf.GGMLQuantizationType
# The matrix types, by layer then by matrix (q, k, v, o, gate, up, down).
TYPES = [[Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_0],
         [Q.Q5_1, Q.Q5_0, Q.Q8_0, Q.Q4_1, Q.Q4_0, Q.Q5_1, Q.Q5_0]]


def tokens():
    """320 distinct single-character tokens in GPT-2's byte-level alphabet."""
    chars = [chr(c) for c in range(0x21, 0x7f)] + [chr(c) for c in range(0xa1, 0x1a0)]
    return chars[:VOCAB]


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261204)

    def weight(rows, cols, scale=0.08):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    path = os.path.join(OUT, "model.gguf")
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_block_count(LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens())
    w.add_token_types([1] * VOCAB)
    w.add_token_merges([])

    def add(name, array, qtype=None):
        if qtype is None:
            w.add_tensor(name, array)
        else:
            w.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)

    add("token_embd.weight", weight(VOCAB, HIDDEN, 0.5), Q.Q8_0)
    head_dim = HIDDEN // HEADS
    for layer in range(LAYERS):
        t = TYPES[layer]
        p = f"blk.{layer}."
        add(p + "attn_norm.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        add(p + "attn_q.weight", weight(HEADS * head_dim, HIDDEN), t[0])
        add(p + "attn_q.bias", (0.05 * rng.standard_normal(HEADS * head_dim)).astype(np.float32))
        add(p + "attn_k.weight", weight(KV_HEADS * head_dim, HIDDEN), t[1])
        add(p + "attn_k.bias", (0.05 * rng.standard_normal(KV_HEADS * head_dim)).astype(np.float32))
        add(p + "attn_v.weight", weight(KV_HEADS * head_dim, HIDDEN), t[2])
        add(p + "attn_v.bias", (0.05 * rng.standard_normal(KV_HEADS * head_dim)).astype(np.float32))
        add(p + "attn_output.weight", weight(HIDDEN, HEADS * head_dim), t[3])
        add(p + "ffn_norm.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
        add(p + "ffn_gate.weight", weight(FFN, HIDDEN), t[4])
        add(p + "ffn_up.weight", weight(FFN, HIDDEN), t[5])
        add(p + "ffn_down.weight", weight(HIDDEN, FFN), t[6])
    add("output_norm.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
    add("output.weight", weight(VOCAB, HIDDEN, 0.3), Q.Q5_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    prompt = rng.integers(0, VOCAB, size=37, dtype=np.int32)
    model = transformers.AutoModelForCausalLM.from_pretrained(OUT, gguf_file="model.gguf",
                                                              dtype=torch.float32)
    model.eval()
    assert model.config.vocab_size == VOCAB and not model.config.tie_word_embeddings
    with torch.no_grad():
        logits = model(torch.tensor(prompt[None, :].astype(np.int64))).logits[0].numpy()
    np.save(os.path.join(OUT, "prompt.npy"), prompt)
    np.save(os.path.join(OUT, "logits.npy"), logits.astype(np.float32))
    write_versions(OUT, "tests/model/make_gguf_fixture.py", [np, torch, transformers, gguf])
    print(f"wrote {OUT}: {os.path.getsize(path)} bytes, logits {logits.shape}, "
          f"max |logit| {np.abs(logits).max():.3f}")


if __name__ == "__main__":
    main()
