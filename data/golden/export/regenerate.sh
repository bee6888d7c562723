#!/bin/sh
# Regenerates the golden regression files of `memdecay-calibrate export`:
# the shipped traces (data/traces/agent-450.jsonl) mapped with the shipped
# golden config (data/golden/qwen2-tiny-agent-450.json) and the shipped demo
# model (data/models/qwen2-tiny), 25 ms a decode step, each stack's default
# block size, with the region runs (--runs). tests/export/cli.sh compares
# a fresh export with them byte for byte; regenerate only after a change to
# the rule, a format or the renderer that is meant, and say why in the
# commit.
#
#   data/golden/export/regenerate.sh [PROGRAM]   (default build/calib/memdecay-calibrate)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
program=${1:-$root/build/calib/memdecay-calibrate}
for format in trtllm vllm sglang dynamo; do
  "$program" export "$root/data/traces/agent-450.jsonl" --format "$format" --step-ms 25 \
    --config "$root/data/golden/qwen2-tiny-agent-450.json" --model "$root/data/models/qwen2-tiny" \
    --runs -q -o "$here/agent-450.$format.jsonl" 2>/dev/null
done
echo "regenerated $here/agent-450.{trtllm,vllm,sglang,dynamo}.jsonl"
