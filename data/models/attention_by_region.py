#!/usr/bin/env python3
"""How much attention each region of a prompt receives from a checkpoint
during teacher-forced decoding of the continuation, measured with HF
transformers (eager attention, output_attentions=True, float32 compute).

    python3 data/models/attention_by_region.py [--model data/models/qwen2-tiny]
        [--traces data/traces/agent-450.jsonl ...] [--episodes 8] [--random]

Decode step s feeds continuation token s at position n + s (n = prompt
tokens) and its query sees n + s + 1 tokens. As in memdecay-calibrate(1), EXTRACT, the
attention a token receives at a step is the softmax weight averaged over
heads and layers, and the uniform-relative attention is that weight times the
number of visible tokens (1.0 = exactly the uniform share). The tables give,
per region, the mean uniform-relative attention and the share of
(token, step) pairs at or above tau = 1 (a "refresh"), by decode step for
prompt tokens and by age (steps since birth) for the decoded continuation.
Prompt tokens take the region of the trace segment their first character lies
in, template text that of what it wraps (data/traces/generate.py's render(),
the same rule as collector/tokenizer/chat_template.h).

--random measures a randomly initialised model of the same configuration
instead, as a baseline: what the table looks like without training.
"""
import argparse
import bisect
import json
import os
import sys

import torch
from transformers import AutoConfig, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "data", "traces"))
sys.path.insert(0, HERE)
import generate  # noqa: E402  (data/traces/generate.py: the region rules of the renderer)
import train_tiny_qwen2  # noqa: E402  (the Encoder: chat template and tokenizer of a checkpoint)

REGIONS = list(generate.REGIONS)
DECODED = "decoded"  # the continuation's tokens (region scratchpad), reported apart
STEP_BUCKETS = [(0, 16), (16, 64), (64, 128), (128, 10**9)]
AGE_BUCKETS = [(1, 4), (4, 16), (16, 64), (64, 10**9)]


def token_regions(encoder, episode):
    """Prompt ids, the region of each prompt token, continuation ids."""
    pieces = generate.render(episode)
    text = "".join(t for t, _ in pieces)
    if text != encoder.prompt(episode):
        raise AssertionError(f"{episode['id']}: generate.render differs from the chat template")
    starts, at = [], 0
    for piece, _ in pieces:
        starts.append(at)
        at += len(piece)
    encoding = encoder.encode(text)
    regions = [pieces[bisect.bisect_right(starts, begin) - 1][1] for begin, _ in encoding.offsets]
    continuation = encoder.encode(episode["continuation"]["text"]).ids
    return encoding.ids, regions, continuation


@torch.no_grad()
def decode_attention(model, prompt, continuation, steps=None):
    """[steps, n + steps] float64: attention received per decode step,
    averaged over heads and layers (0 for tokens not yet born); and the
    float32 logits of positions n - 1 .. n + steps - 1."""
    steps = len(continuation) if steps is None else steps
    ids = torch.tensor([prompt + continuation[:steps]])
    out = model(input_ids=ids, output_attentions=True)
    n = len(prompt)
    rows = torch.stack([layer[0, :, n:n + steps, :] for layer in out.attentions])  # [L, H, S, n+S]
    return rows.double().mean(dim=(0, 1)), out.logits[0, n - 1:n + steps].float()


def bucket_of(value, buckets):
    for k, (lo, hi) in enumerate(buckets):
        if lo <= value < hi:
            return k
    return None


class Table:
    """Sums of uniform-relative attention and refresh counts per (row, bucket)."""

    def __init__(self, buckets):
        self.buckets = buckets
        self.sums, self.refresh, self.count = {}, {}, {}

    def add(self, row, bucket, rel):
        key = (row, bucket)
        self.sums[key] = self.sums.get(key, 0.0) + float(rel.sum())
        self.refresh[key] = self.refresh.get(key, 0) + int((rel >= 1.0).sum())
        self.count[key] = self.count.get(key, 0) + rel.numel()

    def rows(self):
        return sorted({r for r, _ in self.count}, key=lambda r: (REGIONS + [DECODED]).index(r))

    def format(self, label, unit):
        heads = [f"{unit} {lo}-{hi - 1}" if hi < 10**9 else f"{unit} {lo}+" for lo, hi in self.buckets]
        lines = [f"| {label} | all | " + " | ".join(heads) + " |",
                 "| --- | --- | " + " | ".join("---" for _ in heads) + " |"]
        for row in self.rows():
            keys = [(row, b) for b in range(len(self.buckets))]
            total = sum(self.count.get(k, 0) for k in keys)
            cells = [f"{sum(self.sums.get(k, 0) for k in keys) / total:.2f} "
                     f"({100 * sum(self.refresh.get(k, 0) for k in keys) / total:.0f}%)"]
            for k in keys:
                cells.append(f"{self.sums[k] / self.count[k]:.2f} ({100 * self.refresh[k] / self.count[k]:.0f}%)"
                             if self.count.get(k) else "-")
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def accumulate(attn, regions, by_step, by_age):
    n = len(regions)
    steps = attn.shape[0]
    region_index = {r: torch.tensor([i for i, x in enumerate(regions) if x == r]) for r in set(regions)}
    for s in range(steps):
        rel = attn[s, :n + s + 1] * (n + s + 1)
        for region, idx in region_index.items():
            by_step.add(region, bucket_of(s, STEP_BUCKETS), rel[idx])
        for k, (lo, hi) in enumerate(AGE_BUCKETS):  # births b with lo <= s - b < hi
            if s - lo >= 0:
                by_age.add(DECODED, k, rel[n + max(0, s - hi + 1):n + s - lo + 1])


def load(model_dir, random_weights):
    if random_weights:
        config = AutoConfig.from_pretrained(model_dir)
        config._attn_implementation = "eager"
        torch.manual_seed(0)
        return Qwen2ForCausalLM(config).float().eval()
    return Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()


def pick(episodes, count):
    """`count` episodes spread over the file (every domain when count >= 8)."""
    step = max(1, len(episodes) // count)
    return episodes[::step][:count]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.path.join(HERE, "qwen2-tiny"))
    parser.add_argument("--traces", nargs="+", default=[os.path.join(ROOT, "data", "traces", "agent-450.jsonl"),
                                                        os.path.join(ROOT, "data", "traces", "agent-1700.jsonl")])
    parser.add_argument("--episodes", type=int, default=8, help="episodes per traces file")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--random", action="store_true", help="a random-weight model of the same shape")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    encoder = train_tiny_qwen2.Encoder(args.model)
    model = load(args.model, args.random)
    for path in args.traces:
        by_step, by_age = Table(STEP_BUCKETS), Table(AGE_BUCKETS)
        episodes = pick(train_tiny_qwen2.read_jsonl(path), args.episodes)
        for episode in episodes:
            prompt, regions, continuation = token_regions(encoder, episode)
            attn, _ = decode_attention(model, prompt, continuation)
            accumulate(attn, regions, by_step, by_age)
        name = os.path.relpath(path, ROOT)
        print(f"\n{name}, {len(episodes)} episodes: mean uniform-relative attention "
              f"(share of pairs >= 1) per prompt region, by decode step\n")
        print(by_step.format("region", "step"))
        print(f"\n{name}: the decoded continuation, by age (steps since birth)\n")
        print(by_age.format("tokens", "age"))


if __name__ == "__main__":
    main()
