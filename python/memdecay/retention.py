"""Retention settings of serving stacks for a live request, from a
calibrated memdecay.json and the request's region-labelled prompt.

The mapping rule is shared with `memdecay-calibrate export` (the C side);
both must give identical settings for identical inputs. Steps:

1. Per region r: priority P_r = 100 if pinned, else 1 + floor(98 b_r + 0.5)
   (1..99); duration D_r = None (no expiry) if pinned or its half-life is
   null, else max(1, floor(h_r * step_ms + 0.5)) milliseconds. A region keeps
   its priority for one half-life of its MemDecay prior, then the stack's
   default applies: a step standing in for the continuous decay
   b_r exp(-lambda_r dt).
2. Block k holds tokens [k B, min((k+1) B, N)); it takes the largest setting
   among its tokens' regions, ordered by P, then D with None the largest:
   alignment never lowers a token's retention.
3. Consecutive blocks with equal settings merge into ranges [start, end)
   covering [0, N) in order. A range's region (for messages) is the region
   whose setting it took; at a tie, the first in the config's order.
4. Per format: trtllm (KvCacheRetentionConfig), vllm (retention_directives
   of the open retention PR, with its monotone clamp), sglang and dynamo (one
   request priority: the token-weighted mean of P, rounded).

What is approximated is said in python/README.md.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence, Union

from .config import Config

FORMATS = ("trtllm", "vllm", "sglang", "dynamo")

# Each stack's own default block size (tokens per KV block):
# TensorRT-LLM's KvCacheConfig.tokens_per_block (32), vLLM's
# CacheConfig.DEFAULT_BLOCK_SIZE (16); SGLang and Dynamo take one priority
# per request, so blocks do not matter (reported as 1).
DEFAULT_BLOCK_SIZE = {"trtllm": 32, "vllm": 16, "sglang": 1, "dynamo": 1}

# The key each format's settings go under: the stack's own request field.
REQUEST_FIELD = {"trtllm": "kv_cache_retention_config", "vllm": "retention_directives",
                 "sglang": "priority", "dynamo": "nvext"}

_NEEDS_DURATION = ("trtllm", "vllm")


class RetentionError(ValueError):
    """Input the mapping refuses (a region the config lacks, block size 0,
    ...): nothing is produced."""


def region_setting(config: Config, name: str, step_ms: Optional[float]):
    """Step 1: (P_r, D_r) of region `name`; D_r None without step_ms."""
    i = config.region_index(name)
    if i < 0:
        raise RetentionError(f"region {name!r} is not in the config")
    r = config.regions[i]
    if r.pinned:
        return 100, None
    p = 1 + int(math.floor(98 * r.base_priority + 0.5))
    if step_ms is None or not math.isfinite(r.half_life):
        return p, None
    return p, max(1, int(math.floor(r.half_life * step_ms + 0.5)))


def _key(setting):
    # the order of step 2: P first, then D with None (no expiry) the largest
    p, d = setting
    return (p, math.inf if d is None else d)


def _runs_of(regions) -> list:
    """(region, start, end) maximal runs from per-token names or from runs."""
    regions = list(regions)
    if not regions:
        return []
    if isinstance(regions[0], str):
        out = []
        for i, g in enumerate(regions):
            if out and out[-1][0] == g:
                out[-1][2] = i + 1
            else:
                out.append([g, i, i + 1])
        return [tuple(r) for r in out]
    runs = []
    for r in regions:
        g, s, e = (r["region"], r["start"], r["end"]) if isinstance(r, dict) else r
        runs.append((g, int(s), int(e)))
    runs.sort(key=lambda r: r[1])
    at = 0
    for g, s, e in runs:
        if s != at or e <= s:
            raise RetentionError(f"region runs must cover [0, N) in order without gaps or overlap: "
                                 f"run {g!r} [{s}, {e}) after {at}")
        at = e
    merged = []  # adjacent runs of one region merge: maximal runs
    for g, s, e in runs:
        if merged and merged[-1][0] == g:
            merged[-1] = (g, merged[-1][1], e)
        else:
            merged.append((g, s, e))
    return merged


def retention_settings(config: Config, regions: Union[Sequence[str], Iterable], decode_region: str = "scratchpad",
                       format: str = "trtllm", block_size: Optional[int] = None,
                       step_ms: Optional[float] = None, request_id: str = "request",
                       with_runs: bool = False):
    """The retention settings of one request.

    regions: the region name of every prompt token (template tokens
    included), or its runs as (region, start, end) / {"region", "start",
    "end"} covering [0, N). decode_region: the region decoded tokens take.
    format: trtllm, vllm, sglang or dynamo. block_size: the stack's (None:
    its default). step_ms: milliseconds per decode step (needed by trtllm and
    vllm, whose settings carry durations).

    Returns (line, warnings): line is the JSON object of one export output
    line ({"id", "format", "prompt_tokens", "block_size", FIELD: settings,
    "runs" with with_runs}); warnings a list of strings (vLLM's clamp).
    Raises RetentionError on bad input."""
    if format not in FORMATS:
        raise RetentionError(f"format {format!r}: expected one of {', '.join(FORMATS)}")
    if block_size is None:
        block_size = DEFAULT_BLOCK_SIZE[format]
    if format in ("sglang", "dynamo"):
        block_size = 1  # one priority per request: blocks are irrelevant
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise RetentionError(f"block size {block_size!r}: expected an integer >= 1")
    if format in _NEEDS_DURATION:
        if step_ms is None:
            raise RetentionError(f"{format}: needs step_ms (milliseconds per decode step) for its durations")
        if not (isinstance(step_ms, (int, float)) and math.isfinite(step_ms) and step_ms > 0):
            raise RetentionError(f"step_ms {step_ms!r}: expected a number > 0")
    elif step_ms is not None and not (math.isfinite(step_ms) and step_ms > 0):
        raise RetentionError(f"step_ms {step_ms!r}: expected a number > 0")
    runs = _runs_of(regions)
    if not runs:
        raise RetentionError(f"request {request_id}: no prompt tokens")
    n = runs[-1][2]
    for g, _, _ in runs + [(decode_region, 0, 0)]:
        if config.region_index(g) < 0:
            raise RetentionError(f"request {request_id}: region {g!r} is not in the config "
                                 f"(its regions: {', '.join(config.region_names)})")
    setting = {g: region_setting(config, g, step_ms) for g, _, _ in runs}
    setting[decode_region] = region_setting(config, decode_region, step_ms)
    order = {g: config.region_index(g) for g in setting}

    # Step 2: per block, the largest setting among its tokens' regions (and
    # which regions have it).
    blocks = []  # (setting, set of regions with it)
    k, ri = 0, 0
    while k * block_size < n:
        lo, hi = k * block_size, min((k + 1) * block_size, n)
        while runs[ri][2] <= lo:
            ri += 1
        present = []
        j = ri
        while j < len(runs) and runs[j][1] < hi:
            present.append(runs[j][0])
            j += 1
        best = max((setting[g] for g in present), key=_key)
        blocks.append((best, {g for g in present if setting[g] == best}))
        k += 1
    # Step 3: merge equal neighbours.
    ranges = []  # [start, end, setting, regions]
    for k, (s, gs) in enumerate(blocks):
        lo, hi = k * block_size, min((k + 1) * block_size, n)
        if ranges and ranges[-1][2] == s:
            ranges[-1][1] = hi
            ranges[-1][3] |= gs
        else:
            ranges.append([lo, hi, s, set(gs)])
    ranges = [(lo, hi, s, min(gs, key=lambda g: order[g])) for lo, hi, s, gs in ranges]

    warnings = []
    p_d, d_d = setting[decode_region]
    if format == "trtllm":
        settings = {
            "token_range_retention_configs": [
                {"token_start": lo, "token_end": hi, "priority": s[0], "duration_ms": s[1]}
                for lo, hi, s, _ in ranges],
            "decode_retention_priority": p_d,
            "decode_duration_ms": d_d,
        }
    elif format == "vllm":
        directives = [(lo, hi, s[0], s[1], g) for lo, hi, s, g in ranges]
        directives.append((n, None, p_d, d_d, decode_region))
        settings = []
        prev = None
        for lo, hi, p, d, g in directives:
            if prev is not None and p > prev:
                warnings.append(f"request {request_id}: region {g} tokens [{lo}, "
                                f"{'end' if hi is None else hi}): priority {p} lowered to {prev} "
                                "(vLLM requires priorities non-increasing with position)")
                p = prev
            prev = p
            settings.append({"start": lo, "end": hi, "priority": p,
                             "duration": None if d is None else d / 1000})
    else:
        # One priority per request: the token-weighted mean of the tokens'
        # own P (block size 1), rounded half up. SGLang (and Dynamo, which
        # passes agent_hints.priority to the engine) order by it with higher
        # values kept longer by default, our direction.
        total = sum(lo_hi_p for lo_hi_p in ((hi - lo) * s[0] for lo, hi, s, _ in ranges))
        p_req = (2 * total + n) // (2 * n)  # floor(mean + 1/2) in integers, as export computes it
        settings = p_req if format == "sglang" else {"agent_hints": {"priority": p_req}}
    line = {"id": request_id, "format": format, "prompt_tokens": n, "block_size": block_size,
            REQUEST_FIELD[format]: settings}
    if with_runs:
        line["runs"] = [{"region": g, "start": s, "end": e} for g, s, e in runs]
        line["decode_region"] = decode_region
    return line, warnings
