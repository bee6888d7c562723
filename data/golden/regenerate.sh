#!/bin/sh
# Regenerates the golden config of the CI regression (see README.md here):
#   data/golden/regenerate.sh [BUILD_DIR]
# Runs the README's main command (`run` on the shipped checkpoint and
# traces, default options) from the source root with relative paths, so that
# the file names no directory of this machine.
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
work=$build/golden.run
rm -rf "$work"
"$build/calib/memdecay-calibrate" run --model data/models/qwen2-tiny \
  --traces data/traces/agent-450.jsonl --workdir "$work" \
  -o data/golden/qwen2-tiny-agent-450.json --reproducible
rm -rf "$work"
# The golden eval results: `eval` of the same checkpoint and traces with the
# golden config just written, default options.
"$build/calib/memdecay-calibrate" eval --model data/models/qwen2-tiny \
  --traces data/traces/agent-450.jsonl --config data/golden/qwen2-tiny-agent-450.json \
  -o data/golden/qwen2-tiny-agent-450.eval.json --reproducible -q
# The golden eval results of the first 6 episodes, for the eval regression
# of the sanitized builds (tests/regression/meson.build): the same eval with
# --max-episodes 6.
"$build/calib/memdecay-calibrate" eval --model data/models/qwen2-tiny \
  --traces data/traces/agent-450.jsonl --config data/golden/qwen2-tiny-agent-450.json \
  -o data/golden/qwen2-tiny-agent-450.first6.eval.json --reproducible -q --max-episodes 6
