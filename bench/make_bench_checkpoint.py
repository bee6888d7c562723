#!/usr/bin/env python3
"""Writes a random checkpoint with the exact shapes of Qwen2.5-0.5B (hidden
896, intermediate 4864, 24 layers, 14/2 heads, vocab 151936, tied) or
Qwen2.5-1.5B (hidden 1536, intermediate 8960, 28 layers, 12/2 heads, tied)
and a prompt of random token ids, for bench/inference_bench.sh and
bench/llama_cpp_bench.sh.

    make_bench_checkpoint.py OUTDIR PROMPT_TOKENS [--dtype bf16|f32] [--shapes 0.5b|1.5b]

OUTDIR gets config.json, model.safetensors (0.5B: ~1 GB in BF16, ~2 GB in
F32) and prompt.i32 (raw little-endian int32). Weights are drawn in BF16
(an F32 checkpoint holds the same values) and scaled as in
tests/model/make_fixtures.py so that activations and attention look like a
trained model's (not uniform).
"""
import argparse
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

SHAPES = {
    "0.5b": dict(hidden=896, intermediate=4864, layers=24, heads=14, kv_heads=2, vocab=151936),
    "1.5b": dict(hidden=1536, intermediate=8960, layers=28, heads=12, kv_heads=2, vocab=151936),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("prompt_tokens", type=int)
    parser.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    parser.add_argument("--shapes", choices=sorted(SHAPES), default="0.5b")
    args = parser.parse_args()
    out, prompt_tokens = args.out, args.prompt_tokens
    os.makedirs(out, exist_ok=True)
    s = SHAPES[args.shapes]
    config = {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": s["hidden"],
        "initializer_range": 0.02, "intermediate_size": s["intermediate"],
        "max_position_embeddings": 32768, "max_window_layers": s["layers"], "model_type": "qwen2",
        "num_attention_heads": s["heads"], "num_hidden_layers": s["layers"],
        "num_key_value_heads": s["kv_heads"], "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "sliding_window": 32768, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16" if args.dtype == "bf16" else "float32",
        "use_cache": True, "use_sliding_window": False, "vocab_size": s["vocab"],
    }
    g = torch.Generator().manual_seed(2024)

    def normal(*shape, std):
        return (torch.randn(*shape, generator=g) * std).to(torch.bfloat16)

    h, i_, hd = s["hidden"], s["intermediate"], s["hidden"] // s["heads"]
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    w = {"model.embed_tokens.weight": normal(s["vocab"], h, std=0.03),
         "model.norm.weight": (1.0 + normal(h, std=0.1).float()).to(torch.bfloat16)}
    for l in range(s["layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = (1.0 + normal(h, std=0.1).float()).to(torch.bfloat16)
        w[p + "post_attention_layernorm.weight"] = (1.0 + normal(h, std=0.1).float()).to(torch.bfloat16)
        w[p + "self_attn.q_proj.weight"] = normal(q, h, std=1.2 / h**0.5)
        w[p + "self_attn.q_proj.bias"] = normal(q, std=0.5)
        w[p + "self_attn.k_proj.weight"] = normal(kv, h, std=1.2 / h**0.5)
        w[p + "self_attn.k_proj.bias"] = normal(kv, std=0.5)
        w[p + "self_attn.v_proj.weight"] = normal(kv, h, std=1.0 / h**0.5)
        w[p + "self_attn.v_proj.bias"] = normal(kv, std=0.1)
        w[p + "self_attn.o_proj.weight"] = normal(h, q, std=1.0 / q**0.5)
        w[p + "mlp.gate_proj.weight"] = normal(i_, h, std=1.0 / h**0.5)
        w[p + "mlp.up_proj.weight"] = normal(i_, h, std=1.0 / h**0.5)
        w[p + "mlp.down_proj.weight"] = normal(h, i_, std=1.0 / i_**0.5)
    if args.dtype == "f32":
        w = {name: t.float() for name, t in w.items()}
    save_file(w, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    prompt = torch.randint(0, s["vocab"], (prompt_tokens,), generator=g).numpy().astype("<i4")
    prompt.tofile(os.path.join(out, "prompt.i32"))


if __name__ == "__main__":
    main()
