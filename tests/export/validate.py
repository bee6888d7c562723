#!/usr/bin/env python3
"""Checks `memdecay-calibrate export` output against each stack's rules and
against an independent reading of steps 1 and 2 of the rule
(memdecay-calibrate(1), EXPORT).

  validate.py FORMAT OUT.jsonl CONFIG [--requests N]

The output must have been written with --runs (the unaligned region runs
are what the independent reading starts from). Rules checked:
  every format   one line per request, its id, format, prompt_tokens >= 1
  trtllm         ranges in order, without overlap or gap, covering [0, N);
                 starts multiples of the block size, ends multiples of it or
                 N; priorities integers in [0, 100]; durations null or
                 integers >= 1; each range's priority the largest of its
                 blocks' tokens' regions (recomputed here from the config)
  vllm           the same for the directives over the prompt, then one
                 directive [N, null) for decoded tokens; priorities
                 non-increasing (the PR's validator); durations null or > 0
                 seconds; each priority at most its blocks' recomputed one
  sglang/dynamo  one integer priority in [1, 100] per request, the
                 token-weighted mean of the blocks' priorities rounded half
                 up (recomputed); dynamo's under nvext.agent_hints, without
                 cache_control
"""
import json
import math
import sys


def region_priority(config):
    out = {}
    for name, r in config["regions"].items():
        out[name] = 100 if r["pinned"] else 1 + math.floor(98 * r["base_priority"] + 0.5)
    return out


def block_priorities(runs, n, block, prio):
    token = [None] * n
    for run in runs:
        for i in range(run["start"], run["end"]):
            token[i] = prio[run["region"]]
    assert None not in token, "runs do not cover the prompt"
    return [max(token[k:k + block]) for k in range(0, n, block)]


def check_cover(spans, n, block, start_key, end_key):
    at = 0
    for s in spans:
        assert s[start_key] == at, f"gap or overlap at {at}: {s}"
        assert s[start_key] % block == 0, f"start not block-aligned: {s}"
        assert s[end_key] > s[start_key], f"empty range: {s}"
        assert s[end_key] % block == 0 or s[end_key] == n, f"end not aligned: {s}"
        at = s[end_key]
    assert at == n, f"ranges end at {at}, prompt has {n} tokens"


def main():
    fmt, path, config_path = sys.argv[1:4]
    want_requests = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--requests" else None
    config = json.load(open(config_path, encoding="utf-8"))
    prio = region_priority(config)
    lines = [json.loads(l) for l in open(path, encoding="utf-8")]
    if want_requests is not None:
        assert len(lines) == want_requests, f"{len(lines)} lines, expected {want_requests}"
    ids = set()
    for rec in lines:
        assert rec["id"] not in ids, f"duplicate id {rec['id']}"
        ids.add(rec["id"])
        assert rec["format"] == fmt
        n, block = rec["prompt_tokens"], rec["block_size"]
        assert n >= 1 and block >= 1
        runs = rec["runs"]
        blocks = block_priorities(runs, n, block, prio)
        if fmt == "trtllm":
            cfg = rec["kv_cache_retention_config"]
            ranges = cfg["token_range_retention_configs"]
            check_cover(ranges, n, block, "token_start", "token_end")
            for r in ranges:
                p = r["priority"]
                assert isinstance(p, int) and 0 <= p <= 100, r
                d = r["duration_ms"]
                assert d is None or (isinstance(d, int) and d >= 1), r
                want = max(blocks[r["token_start"] // block:(r["token_end"] + block - 1) // block])
                assert p == want, f"{rec['id']}: range {r} priority, recomputed {want}"
                assert all(b == p for b in blocks[r["token_start"] // block:(r["token_end"] + block - 1) // block])
            assert 0 <= cfg["decode_retention_priority"] <= 100
            assert cfg["decode_retention_priority"] == prio[rec["decode_region"]]
        elif fmt == "vllm":
            ds = rec["retention_directives"]
            check_cover(ds[:-1], n, block, "start", "end")
            assert ds[-1]["start"] == n and ds[-1]["end"] is None, ds[-1]
            previous = 101
            for d in ds:
                p = d["priority"]
                assert isinstance(p, int) and 0 <= p <= 100, d
                assert p <= previous, f"{rec['id']}: priorities increase at {d}"
                previous = p
                assert d["duration"] is None or (isinstance(d["duration"], float) and d["duration"] > 0), d
            for d in ds[:-1]:
                want = max(blocks[d["start"] // block:(d["end"] + block - 1) // block])
                assert d["priority"] <= want, d
            assert ds[-1]["priority"] <= prio[rec["decode_region"]]
        elif fmt in ("sglang", "dynamo"):
            assert block == 1
            p = rec["priority"] if fmt == "sglang" else rec["nvext"]["agent_hints"]["priority"]
            if fmt == "dynamo":
                assert "cache_control" not in rec["nvext"]
            assert isinstance(p, int) and 1 <= p <= 100
            total = sum(blocks)
            assert p == (2 * total + n) // (2 * n), f"{rec['id']}: {p}, recomputed from {total}/{n}"
        else:
            raise SystemExit(f"unknown format {fmt}")
    print(f"{fmt}: {len(lines)} requests valid")


if __name__ == "__main__":
    main()
