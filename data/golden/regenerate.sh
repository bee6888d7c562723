#!/bin/sh
# Regenerates the golden config of the CI regression (see README.md here):
#   data/golden/regenerate.sh [BUILD_DIR]
# Runs the README's main command (`run` on the shipped checkpoint and
# traces, default options but float32 prompt products, --exact-gemm, so
# that the files are the same on every CPU: BF16 products are the default
# on AMD Zen 4 and 5) from the source root with relative paths, so that the
# file names no directory of this machine.
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
work=$build/golden.run
rm -rf "$work"
"$build/calib/memdecay-calibrate" run --model data/models/qwen2-tiny \
  --traces data/traces/agent-450.jsonl --workdir "$work" \
  -o data/golden/qwen2-tiny-agent-450.json --reproducible --exact-gemm
rm -rf "$work"
# The golden eval results: `eval` of the same checkpoint and traces with the
# golden config just written, default options but --exact-gemm.
"$build/calib/memdecay-calibrate" eval --model data/models/qwen2-tiny \
  --traces data/traces/agent-450.jsonl --config data/golden/qwen2-tiny-agent-450.json \
  -o data/golden/qwen2-tiny-agent-450.eval.json --reproducible -q --exact-gemm
# The golden eval results of the first 6 episodes, for the eval regression
# of the sanitized builds (tests/regression/meson.build): the same eval with
# --max-episodes 6.
"$build/calib/memdecay-calibrate" eval --model data/models/qwen2-tiny \
  --traces data/traces/agent-450.jsonl --config data/golden/qwen2-tiny-agent-450.json \
  -o data/golden/qwen2-tiny-agent-450.first6.eval.json --reproducible -q --max-episodes 6 \
  --exact-gemm
# The export goldens follow the config: data/golden/export/regenerate.sh.
data/golden/export/regenerate.sh "$build/calib/memdecay-calibrate"
