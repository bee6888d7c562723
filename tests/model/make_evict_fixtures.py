#!/usr/bin/env python3
"""Records what HF transformers computes for a sequence whose KV cache loses
tokens along the way: the reference for eviction in the C forward pass
(tests/model/test_qwen2_evict.c on the CPU back end, tests/cudaemu's
cuda_emu_evict on the emulated CUDA back end).

Re-run:  python3 tests/model/make_evict_fixtures.py   (from the source root;
CPU, needs torch, transformers >= 5, numpy; the checkpoints must exist, made
by tests/model/make_fixtures.py). Seeds are fixed; HF's float32 results may
differ in the last bits between machines, far inside the test's 1e-4.

The schedule (the same for every checkpoint; token ids drawn per checkpoint):
  prefill 12, prefill 9, prefill 7      a 28-token prompt in three chunks
  evict 0 3 4 10 17 22                  scattered positions, position 0 among them
  decode x 4                            positions 28 .. 31
  evict 31 1 12 27                      unsorted; 31 was just decoded; 1 is the
                                        token in slot 0 after the first eviction
  prefill 6                             positions 32 .. 37 (matrix-matrix) after eviction
  decode x 4                            positions 38 .. 41
At most 32 tokens are cached at once, so a cache of 32 slots holds the whole
run of 42 positions: the test runs with that capacity (memory is reused).

HF computes everything in one forward pass over the 42 tokens with
position_ids = arange(42) (kept tokens keep their original RoPE positions)
and a 4-D additive attention mask [1, 1, 42, 42]: mask[q][k] = 0 when k <= q
and key k has not been evicted before the operation that runs query q, else
torch.finfo(float32).min (transformers' own convention for masked entries;
exp of it underflows to exactly 0, as -inf would). Eager attention adds the
mask to the scores before the softmax, so the masked keys take no part.

Written into tests/model/fixtures/<name>/evict/ (little-endian .npy):
  schedule.npy   int32 [ops, 2]   (kind, count): kind 0 = prefill of `count`
                                  tokens, 1 = decode (count 1), 2 = evict
                                  `count` positions
  tokens.npy     int32 [T]        the token ids, in the order they are run
  positions.npy  int32 [E]        the evicted positions, in schedule order
  logits.npy     float32 [T, V]   HF's logits of every token
  README.md      this description, the versions it ran with and the command

Checks before writing: without evictions the 4-D mask reproduces HF's own
causal forward (the mask path is the one HF uses), and the evictions move the
logits by far more than the tolerance (the test is not vacuous).
"""

import os
import sys

import numpy as np
import torch
import transformers
from transformers import Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
PREFILL, DECODE, EVICT = 0, 1, 2

# (kind, argument): prefill n tokens, decode one token, evict these positions.
SCHEDULE = [
    (PREFILL, 12), (PREFILL, 9), (PREFILL, 7),
    (EVICT, [0, 3, 4, 10, 17, 22]),
    (DECODE, 1), (DECODE, 1), (DECODE, 1), (DECODE, 1),
    (EVICT, [31, 1, 12, 27]),
    (PREFILL, 6),
    (DECODE, 1), (DECODE, 1), (DECODE, 1), (DECODE, 1),
]
CHECKPOINTS = [("hd128_f32", 501), ("theta1e4_f32", 502)]  # name, seed of the token ids
TOLERANCE = 1e-4


def build_mask(schedule):
    """The additive mask and the tokens' count; checks the schedule is valid."""
    total = sum(arg for kind, arg in schedule if kind != EVICT)
    visible = np.zeros((total, total), dtype=bool)
    evicted, cached, pos = set(), [], 0
    for kind, arg in schedule:
        if kind == EVICT:
            assert len(set(arg)) == len(arg) and all(p in cached for p in arg), arg
            evicted.update(arg)
            cached = [p for p in cached if p not in arg]
            continue
        assert kind == PREFILL or arg == 1
        for q in range(pos, pos + arg):
            for k in range(q + 1):
                visible[q, k] = k not in evicted
        cached += list(range(pos, pos + arg))
        pos += arg
    mask = torch.full((1, 1, total, total), torch.finfo(torch.float32).min)
    mask[0, 0][torch.from_numpy(visible)] = 0.0
    return mask, total


def hf_logits(model, tokens, mask):
    n = tokens.shape[0]
    with torch.no_grad():
        out = model(input_ids=tokens[None], attention_mask=mask,
                    position_ids=torch.arange(n)[None], use_cache=False)
    return out.logits[0]


def readme(name, seed):
    return f"""# Eviction reference for {name}

Written by `python3 tests/model/make_evict_fixtures.py` (from the source root);
the schedule, the file formats and the HF computation are described in that
script's docstring. Token ids: numpy default_rng({seed}).

Versions it ran with: torch {torch.__version__}, transformers {transformers.__version__},
numpy {np.__version__}, Python {sys.version.split()[0]}.
"""


def build(name, seed):
    ckpt_dir = os.path.join(FIXTURES, name)
    model = Qwen2ForCausalLM.from_pretrained(ckpt_dir, dtype=torch.float32,
                                             attn_implementation="eager")
    model.eval()
    mask, total = build_mask(SCHEDULE)
    vocab = model.config.vocab_size
    tokens = torch.from_numpy(np.random.default_rng(seed).integers(0, vocab, total).astype(np.int64))
    logits = hf_logits(model, tokens, mask)

    causal_mask, _ = build_mask([(PREFILL, total)])
    with torch.no_grad():
        plain = model(input_ids=tokens[None], use_cache=False).logits[0]
    same = float((hf_logits(model, tokens, causal_mask) - plain).abs().max())
    moved = float((logits - plain).abs().max())
    assert same < 1e-5, f"{name}: the 4-D causal mask differs from HF's causal forward by {same}"
    assert moved > 100 * TOLERANCE, f"{name}: the evictions move the logits by only {moved}"

    out = os.path.join(ckpt_dir, "evict")
    os.makedirs(out, exist_ok=True)
    rows = [(kind, len(arg) if kind == EVICT else arg) for kind, arg in SCHEDULE]
    positions = [p for kind, arg in SCHEDULE if kind == EVICT for p in arg]
    np.save(os.path.join(out, "schedule.npy"), np.array(rows, dtype=np.int32))
    np.save(os.path.join(out, "tokens.npy"), tokens.numpy().astype(np.int32))
    np.save(os.path.join(out, "positions.npy"), np.array(positions, dtype=np.int32))
    np.save(os.path.join(out, "logits.npy"), logits.numpy().astype(np.float32))
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme(name, seed))
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(f"{name}: {total} tokens, evictions move the logits by up to {moved:.3f}, "
          f"4-D causal mask vs HF causal {same:.2e}, {size / 1e3:.0f} kB")


def main():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for name, seed in CHECKPOINTS:
        build(name, seed)


if __name__ == "__main__":
    sys.exit(main())
