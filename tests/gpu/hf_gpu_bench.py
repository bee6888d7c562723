#!/usr/bin/env python3
"""The peer measurement for tests/gpu/check.sh: the same prompt and greedy
decode steps in HF transformers on the GPU, bfloat16, eager attention with
output_attentions=True (what an attention-capturing collector needs from
HF), batch 1.

    hf_gpu_bench.py CHECKPOINT PROMPT.i32 PROMPT_TOKENS DECODE_STEPS

Prints "key value" lines: hf_prefill_s, hf_decode_s, hf_decode_steps,
hf_peak_gib, hf_versions."""
import sys
import time

import numpy as np
import torch
import transformers
from transformers import Qwen2ForCausalLM


def main():
    ckpt, prompt_path = sys.argv[1], sys.argv[2]
    prompt_tokens, steps = int(sys.argv[3]), int(sys.argv[4])
    device = torch.device("cuda")
    ids = np.fromfile(prompt_path, dtype="<i4")[:prompt_tokens].astype(np.int64)
    prompt = torch.from_numpy(ids).to(device)[None]
    model = Qwen2ForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16, attn_implementation="eager")
    model.to(device).eval()
    with torch.no_grad():
        model(input_ids=prompt[:, :16], use_cache=True, output_attentions=True)  # warm-up
        torch.cuda.synchronize()
        t0 = time.monotonic()
        out = model(input_ids=prompt, use_cache=True, output_attentions=True)
        token = int(torch.argmax(out.logits[0, -1]))
        torch.cuda.synchronize()
        prefill_s = time.monotonic() - t0
        cache = out.past_key_values
        del out
        t0 = time.monotonic()
        for _ in range(steps):
            out = model(input_ids=torch.tensor([[token]], device=device), past_key_values=cache,
                        use_cache=True, output_attentions=True)
            cache = out.past_key_values
            token = int(torch.argmax(out.logits[0, -1]))  # synchronises, as greedy decoding must
        torch.cuda.synchronize()
        decode_s = time.monotonic() - t0
    print(f"hf_prefill_s {prefill_s:.5f}")
    print(f"hf_decode_s {decode_s:.5f}")
    print(f"hf_decode_steps {steps}")
    print(f"hf_peak_gib {torch.cuda.max_memory_allocated() / 2**30:.2f}")
    print(f"hf_versions torch {torch.__version__} transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
