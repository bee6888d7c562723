#!/usr/bin/env python3
"""Constructs the settings `memdecay-calibrate export` wrote with the
serving stacks' own Python classes, where they are installed (not part of
the tests: the stacks are large, and need accelerators' wheels).

  tools/check_stack_settings.py FORMAT OUT.jsonl

  trtllm  every line's kv_cache_retention_config becomes
          tensorrt_llm.llmapi.KvCacheRetentionConfig with one
          KvCacheRetentionConfig.TokenRangeRetentionConfig per range
          (durations as datetime.timedelta), which checks the priorities'
          range and that the ranges do not overlap
  vllm    every line's retention_directives go into
          vllm.entrypoints.openai.chat_completion.protocol.ChatCompletionRequest
          with a one-message chat: the validator of vLLM pull request
          #38514 refuses priorities that increase with position. A vLLM
          without that pull request has no such field; the script says so
          instead of passing
  sglang  every line's priority goes into SGLang's ChatCompletionRequest
  dynamo  nothing to construct in Python (nvext is read by Dynamo's Rust
          frontend): the shape is checked

Prints what was checked and with which version, and exits 0 when every line
constructs, 1 when one does not, 2 when the stack is not installed.
"""
import datetime
import importlib.metadata
import json
import sys


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def check_trtllm(records):
    try:
        from tensorrt_llm.llmapi import KvCacheRetentionConfig
    except ImportError as e:
        print(f"trtllm: tensorrt_llm cannot be imported here ({e})")
        return 2
    Range = KvCacheRetentionConfig.TokenRangeRetentionConfig

    def ms(v):
        return None if v is None else datetime.timedelta(milliseconds=v)

    for rec in records:
        c = rec["kv_cache_retention_config"]
        KvCacheRetentionConfig(
            token_range_retention_configs=[
                Range(token_start=r["token_start"], token_end=r["token_end"],
                      priority=r["priority"], duration_ms=ms(r["duration_ms"]))
                for r in c["token_range_retention_configs"]],
            decode_retention_priority=c["decode_retention_priority"],
            decode_duration_ms=ms(c["decode_duration_ms"]))
    print(f"trtllm: {len(records)} KvCacheRetentionConfig constructed "
          f"(tensorrt_llm {version('tensorrt_llm') or version('tensorrt-llm')})")
    return 0


def check_vllm(records):
    try:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    except ImportError:
        try:
            from vllm.entrypoints.openai.protocol import ChatCompletionRequest
        except ImportError as e:
            print(f"vllm: vllm cannot be imported here ({e})")
            return 2
    if "retention_directives" not in ChatCompletionRequest.model_fields:
        print(f"vllm: vllm {version('vllm')} has no retention_directives (pull request #38514 "
              "is not in it): nothing checked")
        return 2
    for rec in records:
        ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}],
                              retention_directives=rec["retention_directives"])
    print(f"vllm: {len(records)} requests validated (vllm {version('vllm')})")
    return 0


def check_sglang(records):
    try:
        from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
    except ImportError as e:
        print(f"sglang: sglang cannot be imported here ({e})")
        return 2
    for rec in records:
        ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}],
                              priority=rec["priority"])
    print(f"sglang: {len(records)} requests constructed (sglang {version('sglang')})")
    return 0


def check_dynamo(records):
    for rec in records:
        hints = rec["nvext"]["agent_hints"]
        assert set(rec["nvext"]) == {"agent_hints"} and isinstance(hints["priority"], int)
    print(f"dynamo: {len(records)} nvext objects of the documented shape (no Python class to "
          "construct)")
    return 0


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    fmt, path = sys.argv[1:]
    checks = {"trtllm": check_trtllm, "vllm": check_vllm, "sglang": check_sglang,
              "dynamo": check_dynamo}
    if fmt not in checks:
        raise SystemExit(f"unknown format {fmt}")
    try:
        return checks[fmt](lines(path))
    except Exception as e:  # the stack refused a setting
        print(f"{fmt}: refused: {type(e).__name__}: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
