#!/usr/bin/env python3
"""The retention mapping's two implementations against each other: every
line of export's golden outputs for the shipped traces
(data/golden/export/agent-450.FORMAT.jsonl, written by the C side with
--runs, which export_cli checks byte for byte against the program) is
recomputed by the Python package (memdecay.retention.retention_settings)
from the line's own region runs, decode region and block size, with the
golden config and the step the goldens were written with (25 ms, see
data/golden/export/regenerate.sh); the two must be equal as JSON values.
A mutation (one base priority nudged) must make them differ, so the
comparison can fail. Needs python3 and numpy (the package imports it)."""
import copy
import json
import os
import sys

root = os.environ.get("MD_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(root, "python"))
try:
    from memdecay import config as md_config
    from memdecay.retention import retention_settings
except ImportError as e:
    print(f"cannot import the package: {e} (numpy: Debian python3-numpy)", file=sys.stderr)
    sys.exit(1)

STEP_MS = 25
golden_config = os.path.join(root, "data", "golden", "qwen2-tiny-agent-450.json")
with open(golden_config, encoding="utf-8") as f:
    doc = json.load(f)
cfg = md_config.parse(doc, golden_config)


def recompute(conf, line):
    got, _warnings = retention_settings(conf, line["runs"], decode_region=line["decode_region"],
                                        format=line["format"], block_size=line["block_size"],
                                        step_ms=STEP_MS, request_id=line["id"], with_runs=True)
    return got


failures = 0
lines = 0
for fmt in ("trtllm", "vllm", "sglang", "dynamo"):
    path = os.path.join(root, "data", "golden", "export", f"agent-450.{fmt}.jsonl")
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            want = json.loads(text)
            got = recompute(cfg, want)
            lines += 1
            if got != want:
                failures += 1
                print(f"{path}:{n}: Python differs from C\n  C:      {json.dumps(want)}\n"
                      f"  Python: {json.dumps(got)}", file=sys.stderr)
if lines == 0:
    print("no golden lines read", file=sys.stderr)
    sys.exit(1)

# The check can fail: an unpinned region's base priority nudged by 0.02
# (one priority step is 1/98) changes some line of some format.
mutant = copy.deepcopy(doc)
name = next(r for r, v in mutant["regions"].items() if not v["pinned"])
mutant["regions"][name]["base_priority"] = min(1.0, mutant["regions"][name]["base_priority"] + 0.02)
mcfg = md_config.parse(mutant, golden_config)
changed = 0
for fmt in ("trtllm", "vllm", "sglang", "dynamo"):
    path = os.path.join(root, "data", "golden", "export", f"agent-450.{fmt}.jsonl")
    with open(path, encoding="utf-8") as f:
        changed += sum(recompute(mcfg, json.loads(t)) != json.loads(t) for t in f)
if changed == 0:
    print(f"mutation not caught: base_priority of {name} + 0.02 changed no line", file=sys.stderr)
    failures += 1
print(f"{lines} golden lines recomputed, {failures} failures; the mutation changed {changed} lines")
sys.exit(1 if failures else 0)
