#!/bin/sh
# Tokenizer benchmark: load time of the shipped Qwen tokenizer.json (target: under 1 s) and
# encode throughput on the tokenizer test corpus.
#
#   bench/tokenizer_bench.sh [SECONDS_PER_MEASUREMENT]     (from the source root, after .ci/build)
#
# Uses $MD_BUILD_DIR (default ./build). Timings are of this machine under its current load.
set -eu
cd "$(dirname "$0")/.."
build=${MD_BUILD_DIR:-build}
[ -x "$build/bench/tokenizer_bench" ] || { echo "tokenizer_bench.sh: build first (.ci/build)" >&2; exit 2; }
echo "machine: $(nproc) cores, $(uname -m); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$build/bench/tokenizer_bench" data/tokenizer/qwen/tokenizer.json \
  tests/tokenizer/fixtures/qwen_corpus.jsonl "${1:-2}"
