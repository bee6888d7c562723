#!/usr/bin/env python3
"""Reference outputs of HF transformers for the shipped checkpoint
data/models/qwen2-tiny on one shipped episode, for a parity test of the C
forward pass and attention capture: tests/model/fixtures/tiny/ (its README
describes every file).

Re-run:  python3 tests/model/make_tiny_fixture.py   (from anywhere; CPU,
needs torch, transformers >= 5, tokenizers, numpy). Deterministic given the
checkpoint; HF's float32 results may differ in the last bits between
machines, far inside the tolerances the README states.
"""
import os
import sys

import numpy as np
import tokenizers
import torch
import transformers
from transformers import Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "data", "models"))
import attention_by_region  # noqa: E402
import train_tiny_qwen2  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import fixture_versions  # noqa: E402  (tests/fixture_versions.py)

MODEL = os.path.join(ROOT, "data", "models", "qwen2-tiny")
TRACES = os.path.join(ROOT, "data", "traces", "agent-450.jsonl")
OUT = os.path.join(HERE, "fixtures", "tiny")
STEPS = 16
TOP_PER_POSITION = 32   # logit rows kept: the largest at each position...
EVERY_NTH_USED = 16     # ...every 16th used id...
UNUSED_SAMPLE = 16      # ...and some ids whose embedding row is zero (logit exactly 0)


@torch.no_grad()
def run(model, ids, n):
    """Decode attention [S, n+S] (float64 mean over heads and layers), the
    prefill attention each prompt token received [n] (summed over the n
    prompt queries, mean over heads and layers) and the logits of positions
    n-1 .. n+S-1 [S+1, vocab] (float32), from one teacher-forced forward."""
    out = model(input_ids=torch.tensor([ids]), output_attentions=True)
    stacked = torch.stack([layer[0].double() for layer in out.attentions])  # [L, H, T, T]
    decode = stacked[:, :, n:, :].mean(dim=(0, 1))
    prefill = stacked[:, :, :n, :n].sum(dim=2).mean(dim=(0, 1))
    return decode, prefill, out.logits[0, n - 1:].double()


def logit_rows(logits, used):
    used_ids = torch.nonzero(used).flatten()
    unused_ids = torch.nonzero(~used).flatten()
    pick = set(logits.topk(TOP_PER_POSITION, dim=-1).indices.flatten().tolist())
    pick |= set(used_ids[::EVERY_NTH_USED].tolist())
    pick |= set(unused_ids[torch.linspace(0, len(unused_ids) - 1, UNUSED_SAMPLE).long()].tolist())
    return torch.tensor(sorted(pick))


def save(name, array):
    np.save(os.path.join(OUT, name), array)
    print(f"{name}: {array.dtype} {list(array.shape)}")



def main():
    torch.set_num_threads(2)
    encoder = train_tiny_qwen2.Encoder(MODEL)
    episode = train_tiny_qwen2.read_jsonl(TRACES)[0]
    prompt, regions, continuation = attention_by_region.token_regions(encoder, episode)
    n = len(prompt)
    ids = prompt + continuation[:STEPS]
    model = Qwen2ForCausalLM.from_pretrained(MODEL, dtype=torch.float32, attn_implementation="eager").eval()
    head = model.get_output_embeddings().weight
    used = head.abs().sum(dim=1) > 0
    decode, prefill, logits = run(model, ids, n)
    # The same computation in float64: the size of float32 rounding, for the README's tolerances.
    decode64, prefill64, logits64 = run(model.double(), ids, n)

    top2 = logits.topk(2, dim=-1).values
    rows = logit_rows(logits, used)
    os.makedirs(OUT, exist_ok=True)
    save("prompt_ids.npy", np.array(prompt, dtype=np.int32))
    save("continuation_ids.npy", np.array(continuation[:STEPS], dtype=np.int32))
    save("logits_rows.npy", rows.numpy().astype(np.int32))
    save("logits.npy", logits[:, rows].numpy().astype(np.float32))
    save("argmax.npy", logits.argmax(dim=-1).numpy().astype(np.int32))
    save("decode_attn.npy", decode.numpy().astype(np.float32))
    save("prefill_attn.npy", prefill.numpy().astype(np.float32))
    fixture_versions.write_versions(OUT, "tests/model/make_tiny_fixture.py", [torch, transformers, tokenizers, np])
    print(f"episode {episode['id']}: prompt {n} tokens, {STEPS} decode steps, regions "
          + ", ".join(f"{r} {regions.count(r)}" for r in attention_by_region.REGIONS))
    print(f"logit rows kept: {len(rows)} ({int(used[rows].sum())} used, {int((~used[rows]).sum())} zero rows)")
    print(f"argmax: {logits.argmax(dim=-1).tolist()}")
    print(f"smallest top-1 minus top-2 logit gap: {float((top2[:, 0] - top2[:, 1]).min()):.4g}")
    print(f"argmax equals the next continuation token at {int((logits.argmax(-1)[:-1] == torch.tensor(continuation[:STEPS])).sum())} of {STEPS} positions")
    print(f"float32 vs float64: logits max abs diff {float((logits - logits64).abs().max()):.3g} "
          f"(max |logit| {float(logits.abs().max()):.3g}); decode attention max abs diff "
          f"{float((decode - decode64).abs().max()):.3g} (max {float(decode.max()):.3g}); "
          f"prefill max abs diff {float((prefill - prefill64).abs().max()):.3g} (max {float(prefill.max()):.3g})")
    print(f"decode rows sum to 1 within {float((decode.sum(dim=1) - 1).abs().max()):.3g}; "
          f"prefill sums to n within {float((prefill.sum() - n).abs()):.3g}")


if __name__ == "__main__":
    main()
