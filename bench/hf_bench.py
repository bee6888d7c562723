#!/usr/bin/env python3
"""The peer measurement for bench/inference_bench.sh: the same prompt and
greedy decode steps in HF transformers on the CPU, eager attention with
output_attentions=True (what an attention-capturing collector needs from
HF), float32 compute from the BF16 checkpoint, the same thread count.

    hf_bench.py CHECKPOINT PROMPT.i32 DECODE_STEPS THREADS

Prints "key value" lines: hf_prefill_s, hf_decode_s, hf_peak_rss_kb,
hf_last_token."""
import resource
import sys
import time

import numpy as np
import torch
from transformers import Qwen2ForCausalLM


def main():
    ckpt, prompt_path, steps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    prompt = torch.from_numpy(np.fromfile(prompt_path, dtype="<i4").astype(np.int64))
    model = Qwen2ForCausalLM.from_pretrained(ckpt, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        t0 = time.monotonic()
        out = model(input_ids=prompt[None], use_cache=True, output_attentions=True)
        prefill_s = time.monotonic() - t0
        cache = out.past_key_values
        token = int(torch.argmax(out.logits[0, -1]))
        del out
        t0 = time.monotonic()
        for _ in range(steps):
            out = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True,
                        output_attentions=True)
            cache = out.past_key_values
            token = int(torch.argmax(out.logits[0, -1]))
        decode_s = time.monotonic() - t0
    print(f"hf_prefill_s {prefill_s:.4f}")
    print(f"hf_decode_s {decode_s:.4f}")
    print(f"hf_peak_rss_kb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
    print(f"hf_last_token {token}")


if __name__ == "__main__":
    main()
