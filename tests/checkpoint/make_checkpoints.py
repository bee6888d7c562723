#!/usr/bin/env python3
"""Writes the tiny Qwen2 checkpoints and the reference values that
tests/checkpoint/test_qwen2_model.c and test_qwen2_config.c check against.

Run from anywhere:  python3 tests/checkpoint/make_checkpoints.py
Needs torch, transformers (5.x) and safetensors.  Deterministic: the same
package versions write the same files.

Checkpoints (fixtures/<name>/), each a random Qwen2ForCausalLM with hidden 32,
2 layers, 4 query / 2 KV heads, intermediate 64, vocab 64, saved with
save_pretrained:
  f32-untied   float32, lm_head stored; config.json rewritten in the form of
               the published Qwen2/2.5 checkpoints (transformers 4: top-level
               rope_theta, torch_dtype, sliding_window, max_window_layers)
  bf16-tied    bfloat16, tie_word_embeddings (no lm_head.weight in the file),
               config.json as transformers 5 writes it (rope_parameters)
  f16-sharded  float16, untied, max_shard_size 20KB: three shards and
               model.safetensors.index.json

Every parameter (norms and biases included) is drawn at random, so no value
is a trivial 0 or 1; a few embedding elements are set to values that are
subnormal or extreme in the stored dtype.

Config-only cases (configs/<name>.json) check defaults and the published
form against what transformers' Qwen2Config makes of them.

reference.json records, for each case, what transformers and safetensors
report: config values, the SHA-256 of config.json, the dtype and shape of
every tensor, the bytes of the tensors the model uses, and sample elements
read back from the files by safetensors/torch and widened to float32.
"""
import hashlib
import json
import os
import shutil

import torch
from safetensors import safe_open
from transformers import Qwen2Config, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
CONFIGS = os.path.join(HERE, "configs")

TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            rms_norm_eps=1e-6)

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}

# Elements of model.embed_tokens.weight[0] set by hand, per stored dtype:
# f16 subnormals and its largest finite value; a bf16 (and f32) subnormal.
SPECIAL = {
    torch.float32: [1e-39, -3.5e-42, 3.0e38, -0.0],
    torch.float16: [1e-6, -2.5e-7, 65504.0, -0.0],
    torch.bfloat16: [1e-39, -2e-40, 3.0e38, -0.0],
}


def make_model(seed, dtype, tie, rope_theta):
    config = Qwen2Config(**TINY, tie_word_embeddings=tie,
                         rope_parameters={"rope_type": "default", "rope_theta": rope_theta})
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn_like(param) * 0.5)
        model.model.embed_tokens.weight[0, :4] = torch.tensor(SPECIAL[dtype])
    return model.to(dtype)


def published_form(path, rope_theta, dtype_name):
    """Rewrites config.json the way the released Qwen2.5 checkpoints spell it."""
    with open(path) as f:
        config = json.load(f)
    for key in ("rope_parameters", "layer_types", "dtype", "pad_token_id"):
        config.pop(key, None)
    config.update(rope_theta=rope_theta, torch_dtype=dtype_name, sliding_window=128,
                  max_window_layers=2, use_sliding_window=False, bos_token_id=1,
                  eos_token_id=2, transformers_version="4.43.1")
    with open(path, "w") as f:
        json.dump(dict(sorted(config.items())), f, indent=2)
        f.write("\n")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def hf_config_values(path):
    """What transformers makes of a config.json."""
    config = Qwen2Config.from_pretrained(os.path.dirname(path)) if os.path.basename(
        path) == "config.json" else Qwen2Config.from_json_file(path)
    with open(path) as f:
        raw = json.load(f)
    declared = raw.get("torch_dtype") or raw.get("dtype") or ""
    return {
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        # as Qwen2Attention computes it
        "head_dim": getattr(config, "head_dim", config.hidden_size // config.num_attention_heads),
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.max_position_embeddings,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_parameters["rope_theta"],
        "tie_word_embeddings": config.tie_word_embeddings,
        "torch_dtype": declared,
        "config_sha256": sha256(path),
    }


def read_tensors(directory):
    """Every tensor of the checkpoint, read by safetensors as torch tensors."""
    tensors, files = {}, {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(directory, name), framework="pt") as f:
            for key in f.keys():
                tensors[key] = f.get_tensor(key)
                files[key] = name
    return tensors, files


def sample_indices(count):
    return sorted({0, 1, 2, 3, 5, count // 3, count // 2, count - 2, count - 1})


SAMPLED = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
           "model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.k_proj.bias",
           "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
           "model.layers.0.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight",
           "model.layers.1.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
           "model.layers.1.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"]


def checkpoint_reference(directory, dtype):
    tensors, files = read_tensors(directory)
    values = hf_config_values(os.path.join(directory, "config.json"))
    used = [k for k in tensors if not (values["tie_word_embeddings"] and k == "lm_head.weight")]
    samples = []
    for name in SAMPLED:
        if name not in tensors:
            continue
        flat = tensors[name].to(torch.float32).flatten()
        for i in sample_indices(flat.numel()):
            samples.append({"tensor": name, "index": i, "value": flat[i].item()})
    return {
        "config": values,
        "dtype": DTYPES[dtype],
        "weight_bytes": sum(tensors[k].numel() * tensors[k].element_size() for k in used),
        "tensors": {k: {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "file": files[k]}
                    for k, t in sorted(tensors.items())},
        "samples": samples,
    }


def write_checkpoints(reference):
    cases = [("f32-untied", 1, torch.float32, False, 1e6, {}),
             ("bf16-tied", 2, torch.bfloat16, True, 1e6, {}),
             ("f16-sharded", 3, torch.float16, False, 10000.0, {"max_shard_size": "20KB"})]
    for name, seed, dtype, tie, theta, options in cases:
        directory = os.path.join(FIXTURES, name)
        shutil.rmtree(directory, ignore_errors=True)
        make_model(seed, dtype, tie, theta).save_pretrained(directory, **options)
        if name == "f32-untied":
            published_form(os.path.join(directory, "config.json"), theta, "float32")
        reference["checkpoints"][name] = checkpoint_reference(directory, dtype)


# A config.json with only the fields the loader requires: everything else
# takes transformers' Qwen2Config defaults (num_key_value_heads 32, the class
# default, so 32 query heads here).
MINIMAL = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 256, "intermediate_size": 128,
           "num_hidden_layers": 3, "num_attention_heads": 32, "vocab_size": 100}

# An explicit null num_key_value_heads means as many KV heads as query heads.
KV_NULL = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 8,
           "num_key_value_heads": None, "vocab_size": 100, "rope_theta": 500000,
           "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "torch_dtype": None}

# Qwen2.5-0.5B-Instruct's published config.json (its shapes and settings).
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896,
    "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
    "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936}


def write_configs(reference):
    os.makedirs(CONFIGS, exist_ok=True)
    for name, config in (("minimal", MINIMAL), ("kv-null", KV_NULL),
                         ("qwen2.5-0.5b-instruct", QWEN25_05B)):
        path = os.path.join(CONFIGS, name + ".json")
        with open(path, "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
        reference["configs"][name] = hf_config_values(path)


def main():
    import transformers
    import safetensors
    reference = {"generator": {"script": "tests/checkpoint/make_checkpoints.py",
                               "torch": torch.__version__.split("+")[0],
                               "transformers": transformers.__version__,
                               "safetensors": safetensors.__version__},
                 "checkpoints": {}, "configs": {}}
    write_checkpoints(reference)
    write_configs(reference)
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
